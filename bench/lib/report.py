"""From samples to the table: medians of the runs that are results, ratios of
medians, the project's targets, and the text and Markdown renderings."""
import statistics
from dataclasses import dataclass, field

from .servers import PEERS

# (scenario, figure, peer, bound, limit[, server]): the server's (default
# tern's) median figure divided by the peer's must be >= limit (bound ">=")
# or <= limit (bound "<="). "peer" is the best of PEERS in that row and
# figure (see aggregate); "tern" is tern on epoll, for tern-uring's rows.
TARGETS = [
    ("keepalive-100", "value", "peer", ">=", 1.0),
    ("keepalive-100", "per_cpu", "peer", ">=", 1.3),
    ("keepalive-100", "per_cpu", "floor", ">=", 0.9),
    ("keepalive-100", "p99_ms", "peer", "<=", 1.0),
    ("keepalive-1000", "value", "peer", ">=", 1.0),
    ("keepalive-1000", "per_cpu", "peer", ">=", 1.3),
    ("keepalive-1000", "per_cpu", "floor", ">=", 0.9),
    ("keepalive-1000", "p99_ms", "peer", "<=", 1.0),
    ("conn-per-request", "value", "peer", ">=", 1.15),
    ("files", "per_cpu", "peer", ">=", 1.2),
    ("pipelined-16", "value", "peer", ">=", 4.0),
    ("pipelined-16", "value", "floor", ">=", 0.4),
    ("file-64m", "value", "peer", ">=", 1.0),
    # Per CPU-s of the whole machine: over loopback a server using sendfile
    # leaves the copy to its reader's CPU, so per server CPU-s it looks
    # cheaper than the transfer is (see bench/results/README.md).
    ("file-64m", "per_machine_cpu", "peer", ">=", 1.0),
    ("idle-memory", "value", "peer", "<=", 1.0),
    # HTTPS: per server CPU-s against the best peer on each row, and memory
    # per idle TLS connection against nginx's.
    ("tls-keepalive-100", "per_cpu", "peer", ">=", 1.0),
    ("tls-handshake-full", "per_cpu", "peer", ">=", 1.0),
    ("tls-handshake-resumed", "per_cpu", "peer", ">=", 1.0),
    # tls-ticket-reused has no target: see its note.
    ("tls-file-64m", "per_cpu", "peer", ">=", 1.0),
    ("tls-idle-memory", "value", "nginx", "<=", 1.0),
    # The reverse proxy against nginx's, per server CPU-s, on each backend
    # (io_uring is tern's default).
    ("proxy-100", "per_cpu", "nginx", ">=", 1.2),
    ("proxy-1000", "per_cpu", "nginx", ">=", 1.2),
    ("proxy-100", "per_cpu", "nginx", ">=", 1.2, "tern-uring"),
    ("proxy-1000", "per_cpu", "nginx", ">=", 1.2, "tern-uring"),
    # Hits of a [[cache]] zone against nginx's proxy_cache, per server CPU-s.
    ("proxy-cached-1k", "per_cpu", "nginx", ">=", 1.5),
    ("proxy-cached-100k", "per_cpu", "nginx", ">=", 1.2),
    ("proxy-cached-1k", "per_cpu", "nginx", ">=", 1.5, "tern-uring"),
    ("proxy-cached-100k", "per_cpu", "nginx", ">=", 1.2, "tern-uring"),
    ("keepalive-1000", "per_cpu", "tern", ">=", 1.15, "tern-uring"),
    ("conn-per-request", "per_cpu", "tern", ">=", 1.15, "tern-uring"),
    # HTTP/2 on tern's own frames and HPACK, per server CPU-s, on each backend.
    ("h2-100x10", "per_cpu", "peer", ">=", 1.2),
    ("h2c-100x10", "per_cpu", "peer", ">=", 1.2),
    ("h2-file-64m", "per_cpu", "peer", ">=", 1.0),
    ("h2-100x10", "per_cpu", "peer", ">=", 1.2, "tern-uring"),
    ("h2c-100x10", "per_cpu", "peer", ">=", 1.2, "tern-uring"),
    ("h2-file-64m", "per_cpu", "peer", ">=", 1.0, "tern-uring"),
]
# (scenario, reference scenario, figure, bound, limit, server): a server's
# median figure in one row over its own in another of the same run, what
# a feature costs it (a guard against the same site without it).
ROW_TARGETS = [
    ("limit-keepalive-100", "sites-keepalive-100", "per_cpu", ">=", 0.95, "tern"),
    ("limit-keepalive-100", "sites-keepalive-100", "per_cpu", ">=", 0.95, "tern-uring"),
    ("auth-keepalive-100", "sites-keepalive-100", "per_cpu", ">=", 0.95, "tern"),
    ("auth-keepalive-100", "sites-keepalive-100", "per_cpu", ">=", 0.95, "tern-uring"),
]
URING = "tern-uring"
FIGURE_NAMES = {"value": "main figure", "per_cpu": "per CPU-s",
                "per_machine_cpu": "per machine CPU-s", "p99_ms": "p99"}
FIGURES = ("value", "per_cpu", "per_machine_cpu", "p99_ms")


@dataclass
class Row:
    scenario: object
    server: str
    value: float = None
    per_cpu: float = None
    per_machine_cpu: float = None
    p99_ms: float = None
    ok: int = 0
    total: int = 0
    errors: list = field(default_factory=list)
    # (figure, name) -> this row's figure over that server's in the same
    # scenario; name "peer" is the best of PEERS for that figure.
    ratios: dict = field(default_factory=dict)
    best_peer: dict = field(default_factory=dict)  # figure -> the peer "peer" stands for


def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _ratio(a, b):
    return a / b if a is not None and b else None


def aggregate(scenarios, samples):
    """One Row per (scenario, server), in scenario order then server order."""
    rows = []
    for sc in scenarios:
        by_server = {}
        for server in sc.servers:
            runs = [s for s in samples if s.scenario == sc.name and s.server == server]
            good = [s for s in runs if not s.failed]
            row = Row(sc, server, _median(s.value for s in good), _median(s.per_cpu for s in good),
                      _median(s.per_machine_cpu for s in good),
                      _median(s.p99_ms for s in good), len(good), len(runs),
                      [f"round {s.round}: {'; '.join(s.errors)}" for s in runs if s.failed])
            by_server[server] = row
            rows.append(row)
        best = {fig: _best_peer(sc, by_server, fig) for fig in FIGURES}
        for row in by_server.values():
            row.best_peer = {fig: peer.server for fig, peer in best.items() if peer}
            for name in ("tern", *PEERS, "floor"):
                other = by_server.get(name)
                for fig in FIGURES:
                    row.ratios[(fig, name)] = _ratio(getattr(row, fig), other and getattr(other, fig))
            for fig, peer in best.items():
                row.ratios[(fig, "peer")] = _ratio(getattr(row, fig), peer and getattr(peer, fig))
    return rows


def _best_peer(sc, by_server, fig):
    """The peer row with the best median `fig` in scenario `sc`: the highest
    throughput (the lowest memory for idle-memory), the lowest p99."""
    rows = [by_server[p] for p in PEERS if p in by_server and getattr(by_server[p], fig) is not None]
    if not rows:
        return None
    lower_is_better = fig == "p99_ms" or not sc.higher_is_better
    pick = min if lower_is_better else max
    return pick(rows, key=lambda r: getattr(r, fig))


def paired_ratio(samples, sc, server, fig, peer):
    """The median over rounds of `server`'s `fig` over `peer`'s in the same
    round ("peer": the best of PEERS in that round). A slow or fast spell of
    the machine moves every server of a round alike and cancels out of it,
    where it can tip a ratio of medians either way."""
    lower_is_better = fig == "p99_ms" or not sc.higher_is_better
    by_round = {}
    for s in samples:
        if s.scenario == sc.name and not s.failed and getattr(s, fig) is not None:
            by_round.setdefault(s.round, {})[s.server] = getattr(s, fig)
    ratios = []
    for figures in by_round.values():
        if peer == "peer":
            others = [figures[p] for p in PEERS if p in figures]
            other = (min if lower_is_better else max)(others) if others else None
        else:
            other = figures.get(peer)
        ratio = _ratio(figures.get(server), other)
        if ratio is not None:
            ratios.append(ratio)
    return _median(ratios)


def target_results(rows, samples=()):
    """[(description, ratio or None, bound, limit, passed or None, paired
    ratio or None)], for the scenarios the run had."""
    by_key = {(r.scenario.name, r.server): r for r in rows}
    run = {r.scenario.name for r in rows}
    out = []
    for scenario, fig, peer, bound, limit, *server in TARGETS:
        if scenario not in run:
            continue
        server = server[0] if server else "tern"
        row = by_key.get((scenario, server))
        ratio = row and row.ratios.get((fig, peer))
        passed = None if ratio is None else (ratio >= limit if bound == ">=" else ratio <= limit)
        name = peer
        if peer == "peer":
            name = f"best peer ({row.best_peer[fig]})" if row and fig in row.best_peer else "best peer"
        who = "" if server == "tern" else f"{server} "
        paired = row and paired_ratio(samples, row.scenario, server, fig, peer)
        out.append((f"{scenario} {who}{FIGURE_NAMES[fig]} / {name}", ratio, bound, limit, passed, paired))
    for scenario, reference, fig, bound, limit, server in ROW_TARGETS:
        if scenario not in run or reference not in run:
            continue
        row, other = by_key.get((scenario, server)), by_key.get((reference, server))
        ratio = _ratio(row and getattr(row, fig), other and getattr(other, fig))
        passed = None if ratio is None else (ratio >= limit if bound == ">=" else ratio <= limit)
        out.append((f"{scenario} {server} {FIGURE_NAMES[fig]} / {reference}", ratio, bound, limit, passed,
                    None))
    return out


def compared(rows, figure="value"):
    """[(label, scenario, reference, {server: ratio})]: each compare_to of a
    scenario, its median `figure` over the reference's, for each server."""
    by_key = {(r.scenario.name, r.server): r for r in rows}
    out, seen = [], set()
    for r in rows:
        sc = r.scenario
        if sc.name in seen:
            continue
        seen.add(sc.name)
        for ref, label in sc.compare_to:
            ratios = {}
            for server in sc.servers:
                row, other = by_key.get((sc.name, server)), by_key.get((ref, server))
                ratios[server] = _ratio(row and getattr(row, figure),
                                        other and getattr(other, figure))
            out.append((label, sc.name, ref, ratios))
    return out


def _compared_both(rows):
    """compared() of the main figure, with the ratios of per CPU-s beside."""
    per_cpu = compared(rows, "per_cpu")
    return [(label, name, ref, ratios, cpu[3]) for (label, name, ref, ratios), cpu
            in zip(compared(rows), per_cpu)]


def compared_json(rows):
    return [{"label": label, "scenario": name, "reference": ref, "ratios": ratios,
             "per_cpu_ratios": cpu_ratios}
            for label, name, ref, ratios, cpu_ratios in _compared_both(rows)]


def fmt_value(x, unit):
    if x is None:
        return "-"
    if unit == "KiB/conn":
        return f"{x:.2f}"
    if unit == "MiB/s":
        return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"
    return f"{x:,.0f}"


def _fmt_ratio(x):
    return "-" if x is None else f"{x:.2f}"


def _fmt_ms(x):
    return "-" if x is None else (f"{x:.2f}" if x < 10 else f"{x:.1f}")


HEADER = ["scenario", "server", "median", "unit", "per CPU-s", "per machine CPU-s", "p99 ms",
          "runs ok", "x best peer", "x floor", "CPU x best peer", "CPU x floor",
          "machine CPU x best peer", "p99 x best peer", "CPU x tern"]


def _peer_ratio(row, fig):
    """The ratio to the best peer, naming it: "1.21 (h2o)"."""
    ratio = row.ratios.get((fig, "peer"))
    if ratio is None:
        return "-"
    return f"{ratio:.2f} ({row.best_peer[fig]})"


def table_cells(rows):
    """The table as lists of strings, shared by the text and Markdown forms."""
    cells = []
    for r in rows:
        unit = r.scenario.unit
        if r.ok == 0 and r.total:
            median = "FAILED"
        else:
            median = fmt_value(r.value, unit)
        per_cpu_unit = "MiB" if unit == "MiB/s" else "req"
        per_cpu = "-" if r.per_cpu is None else f"{r.per_cpu:,.0f} {per_cpu_unit}"
        machine = "-" if r.per_machine_cpu is None else f"{r.per_machine_cpu:,.0f} {per_cpu_unit}"
        cells.append([r.scenario.name, r.server, median, unit, per_cpu, machine, _fmt_ms(r.p99_ms),
                      f"{r.ok}/{r.total}",
                      _peer_ratio(r, "value"),
                      _fmt_ratio(r.ratios[("value", "floor")]),
                      _peer_ratio(r, "per_cpu"),
                      _fmt_ratio(r.ratios[("per_cpu", "floor")]),
                      _peer_ratio(r, "per_machine_cpu"),
                      _peer_ratio(r, "p99_ms"),
                      _fmt_ratio(r.ratios[("per_cpu", "tern")]) if r.server == URING else "-"])
    return cells


def text_table(rows):
    cells = [HEADER] + table_cells(rows)
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER))]
    lines = []
    for n, c in enumerate(cells):
        lines.append("  ".join(x.ljust(w) if i < 2 else x.rjust(w)
                               for i, (x, w) in enumerate(zip(c, widths))))
        if n == 0:
            lines.append("-" * len(lines[0]))
    return "\n".join(lines)


def text_targets(rows, samples=()):
    lines = []
    for desc, ratio, bound, limit, passed, paired in target_results(rows, samples):
        verdict = {True: "ok", False: "MISSED", None: "no data"}[passed]
        lines.append(f"  {desc:<56} {_fmt_ratio(ratio):>6}  (target {bound} {limit})  {verdict:<8}"
                     f"  paired {_fmt_ratio(paired)}")
    return "\n".join(lines)


def text_compared(rows):
    return "\n".join(f"  {label:<22} {name} / {ref}: "
                     + ", ".join(f"{server} {_fmt_ratio(r)} (per CPU-s {_fmt_ratio(cpu[server])})"
                                 for server, r in ratios.items())
                     for label, name, ref, ratios, cpu in _compared_both(rows))


def errors_text(rows):
    return "\n".join(f"  {r.scenario.name} / {r.server}: {e}" for r in rows for e in r.errors)


def _md_table(header, body):
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---" if i < 2 else "---:" for i in range(len(header))) + "|"]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
    return "\n".join(out)


def markdown(rows, samples, meta):
    """The whole results page. meta: date, machine, versions, rounds, durations."""
    parts = [f"# tern vs {', '.join(PEERS)} and the floor: {meta['date']}", "",
             f"Machine: {meta['machine']}  ",
             f"Versions: {meta['versions']}  ",
             f"Method: bench/results/README.md; {meta['rounds']} round(s), servers "
             f"alternated (tern, tern-uring, {', '.join(PEERS)}, floor) in each round; warm-up "
             f"{meta['warmup']} s, then "
             f"measure {meta['duration']} s (ab: {meta['ab_requests']:,} requests). Server on "
             "CPU 0, load generator on CPU 1. Medians of the runs that had no errors; "
             "ratios are ratios of medians. `per CPU-s`: requests (MiB for file-64m) per "
             "second of server CPU time (utime+stime of every server process; for the php-* "
             "rows tern's or nginx's, not php-fpm's). `per machine CPU-s`: the same per "
             "second of CPU time of the whole machine (both CPUs: server, load generator "
             "and the kernel's work between them; /proc/stat). `x best peer`: tern's (or that "
             "server's) median over the best median of nginx, h2o and lighttpd in that row "
             "and figure, the peer named beside it. tern runs on both I/O backends: "
             "`tern` (epoll) and `tern-uring` (io_uring); `CPU x tern`: tern-uring's "
             "requests per CPU-s over tern's on epoll."
             + (" nginx's PHP locations: fastcgi_keep_conn on (--nginx-keep-conn)."
                if meta.get("nginx_keep_conn") else ""),
             "", "![chart](latest.png)", "", _md_table(HEADER, table_cells(rows)), ""]
    if compared(rows):
        parts += ["## Rows against rows (same server, same run)", "",
                  _md_table(["ratio", "rows", "tern", "tern-uring", "nginx", "tern per CPU-s",
                             "tern-uring per CPU-s", "nginx per CPU-s"],
                            [[label, f"{name} / {ref}"]
                             + [_fmt_ratio(d.get(server)) for d in (ratios, cpu)
                                for server in ("tern", "tern-uring", "nginx")]
                             for label, name, ref, ratios, cpu in _compared_both(rows)]), ""]
    parts += ["## Targets (tern / peer)", "",
              "`ratio`: of the medians, which the target is judged on. `paired`: the median over "
              "rounds of the two servers' ratio within each round, which a slow or fast spell "
              "of the machine (it moves every server of a round alike) cannot tip.", "",
              _md_table(["target", "ratio", "bound", "result", "paired"],
                        [[d, _fmt_ratio(r), f"{b} {lim}",
                          {True: "ok", False: "**missed**", None: "no data"}[p], _fmt_ratio(pr)]
                         for d, r, b, lim, p, pr in target_results(rows, samples)]), ""]
    errors = errors_text(rows)
    if errors:
        parts += ["## Failed runs (not results)", "", "```", errors, "```", ""]
    parts += ["## Scenarios and commands", ""]
    for sc in meta["scenarios"]:
        parts.append(f"- **{sc.name}** ({sc.unit}){': ' + sc.note if sc.note else ''}")
        first = {}
        for s in samples:
            if s.scenario == sc.name:
                first.setdefault(s.server, s.command)
        parts += [f"  - {server}: `{cmd}`" for server, cmd in first.items()]
    parts += ["", "Servers (each pinned with `taskset -c 0`):", ""]
    parts += [f"- `{cmd}`" for cmd in meta["server_commands"]]
    for label, path, text in meta["configs"]:
        parts += ["", f"{label} config (`{path}`):", "", "```", text, "```"]
    parts += ["", "## Every run", "", "<details><summary>all samples</summary>", "",
              _md_table(["scenario", "server", "round", "value", "per CPU-s", "per machine CPU-s",
                         "p99 ms", "CPU s", "machine CPU s", "detail", "errors"],
                        [[s.scenario, s.server, str(s.round), fmt_value(s.value, meta["units"][s.scenario]),
                          "-" if s.per_cpu is None else f"{s.per_cpu:,.0f}",
                          "-" if s.per_machine_cpu is None else f"{s.per_machine_cpu:,.0f}",
                          _fmt_ms(s.p99_ms),
                          "-" if s.cpu_s is None else f"{s.cpu_s:.2f}",
                          "-" if s.machine_cpu_s is None else f"{s.machine_cpu_s:.2f}", s.detail,
                          "; ".join(s.errors)]
                         for s in samples]),
              "", "</details>", ""]
    return "\n".join(parts)
