"""The PNG: one group of bars per scenario, one bar per server.

Throughput and throughput per CPU-second are drawn relative to the best
peer of each row (= 1.0: the best of nginx, h2o and lighttpd there) because
the absolute figures of the scenarios differ by four orders of magnitude, on
a log scale so that 0.5x and 2x are as far from it and one pipelined row does
not flatten the others; each bar is labelled with its
absolute median. Idle memory, where lower is better, gets its own panel in KiB
per connection, and the ratios of rows to rows of the same server (php-cached
against keepalive-100 and php-uncached) another.
"""
import subprocess
import sys

from . import report

COLORS = {"tern": "#2a7ab9", "tern-uring": "#7fb8e3", "nginx": "#3a9a48", "h2o": "#d9822b",
          "lighttpd": "#8e5bb5", "floor": "#9a9a9a"}
SERVERS = ("tern", "tern-uring", *report.PEERS, "floor")


def import_pyplot():
    """matplotlib, installed from PyPI on first use if it is missing."""
    try:
        import matplotlib
    except ImportError:
        print("bench: installing matplotlib (python3 -m pip install matplotlib)", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "matplotlib"],
                       check=True, timeout=600)
        import matplotlib
    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt
    return plt


def _short(x):
    if x is None:
        return ""
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e4:
        return f"{x / 1e3:.0f}k"
    if x >= 100:
        return f"{x:.0f}"
    return f"{x:.2f}" if x < 10 else f"{x:.1f}"


def _grouped_bars(ax, rows, figure, title):
    """Bars of rows' `figure` relative to the row's best peer, grouped by scenario."""
    from matplotlib.ticker import FuncFormatter  # imported late: may just have been installed
    scenarios = []
    for r in rows:
        if r.scenario not in scenarios:
            scenarios.append(r.scenario)
    width = 0.8 / len(SERVERS)
    ratios = []
    for i, server in enumerate(SERVERS):
        xs, heights, labels = [], [], []
        for g, sc in enumerate(scenarios):
            row = next((r for r in rows if r.scenario is sc and r.server == server), None)
            ratio = row and row.ratios.get((figure, "peer"))
            if ratio is None:
                continue
            xs.append(g + (i - (len(SERVERS) - 1) / 2) * width)
            heights.append(ratio)
            ratios.append(ratio)
            labels.append(_short(getattr(row, figure)))
        bars = ax.bar(xs, heights, width, label=server, color=COLORS[server])
        ax.bar_label(bars, labels=labels, fontsize=7, rotation=90, padding=2)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_yscale("log", base=2)
    if ratios:
        ax.set_ylim(min(0.25, min(ratios) / 2), max(4.0, max(ratios) * 4))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xticks(range(len(scenarios)))
    ax.set_xticklabels([f"{sc.name}\n({sc.unit})" if figure == "value" else sc.name
                        for sc in scenarios], fontsize=8)
    ax.set_ylabel("relative to the best peer = 1.0 (log scale)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper left")


def _compared_bars(ax, rows):
    """report.compared: one group per ratio, one bar per server, log scale."""
    from matplotlib.ticker import FuncFormatter
    groups = report.compared(rows)
    servers = ("tern", "tern-uring", "nginx")
    width = 0.8 / len(servers)
    for i, server in enumerate(servers):
        xs, heights = [], []
        for g, (_, _, _, ratios) in enumerate(groups):
            if ratios.get(server) is not None:
                xs.append(g + (i - (len(servers) - 1) / 2) * width)
                heights.append(ratios[server])
        bars = ax.bar(xs, heights, width, label=server, color=COLORS[server])
        ax.bar_label(bars, labels=[_short(h) for h in heights], fontsize=7, padding=2)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_yscale("log", base=2)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{label}\n({name} /\n{ref})" for label, name, ref, _ in groups],
                       fontsize=7)
    ax.set_title("rows against rows,\nsame server (log scale)", fontsize=10)
    ax.margins(y=0.3)
    ax.legend(fontsize=8, loc="upper left")


def _memory_bars(ax, rows):
    mem = [r for r in rows if r.scenario.name == "idle-memory" and r.value is not None]
    if not mem:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
    bars = ax.bar([r.server for r in mem], [r.value for r in mem],
                  color=[COLORS[r.server] for r in mem])
    ax.bar_label(bars, labels=[f"{r.value:.2f}" for r in mem], fontsize=8)
    ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    ax.set_ylabel("KiB per idle connection")
    ax.set_title("idle-memory: RSS per keep-alive\nconnection (lower is better)", fontsize=10)
    ax.margins(y=0.2)


def write_png(rows, path, subtitle):
    plt = import_pyplot()
    fig = plt.figure(figsize=(16, 9))
    grid = fig.add_gridspec(2, 5)
    throughput = [r for r in rows if r.scenario.higher_is_better]
    compared = bool(report.compared(rows))
    _grouped_bars(fig.add_subplot(grid[0, :]), throughput, "value",
                  "Throughput (req/s; file-64m: MiB/s), median; labels: absolute")
    _grouped_bars(fig.add_subplot(grid[1, :3 if compared else 4]), throughput, "per_cpu",
                  "Requests per second of server CPU (file-64m: MiB per CPU-s; php-*: "
                  "without php-fpm's), median")
    if compared:
        _compared_bars(fig.add_subplot(grid[1, 3]), rows)
    _memory_bars(fig.add_subplot(grid[1, 4]), rows)
    fig.suptitle(f"tern vs {', '.join(report.PEERS)} and the floor (higher is better)   "
                 f"{subtitle}", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
