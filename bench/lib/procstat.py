"""CPU time and memory of a server, read from /proc.

A server may be several processes (nginx: a master and its worker), so every
reading sums the process and all of its descendants. /proc/PID/stat already
sums the threads of one process, dead threads included.
"""
import os

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid):
    """Fields 3.. of /proc/PID/stat (after the parenthesised command name,
    which may itself contain spaces or parentheses)."""
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    return text[text.rindex(")") + 2:].split()


def _children_map():
    """ppid -> [pid] for every process now alive."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ppid = int(_stat_fields(entry)[1])  # field 4
        except (OSError, ValueError, IndexError):
            continue  # the process went away while we looked
        children.setdefault(ppid, []).append(int(entry))
    return children


def process_tree(pid):
    """pid and all of its descendants."""
    children = _children_map()
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(children.get(p, []))
    return tree


def cpu_seconds(pid):
    """utime + stime (fields 14 and 15) of the whole process tree, in seconds."""
    ticks = 0
    for p in process_tree(pid):
        try:
            fields = _stat_fields(p)
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / CLK_TCK


def machine_busy_seconds():
    """CPU time this machine spent working, every CPU together: user, nice,
    system, irq and softirq from /proc/stat (not idle, iowait or steal).
    Around a run it counts the server, the load generator and the kernel's
    network work between them, wherever the kernel did it."""
    with open("/proc/stat") as f:
        fields = f.readline().split()  # "cpu user nice system idle iowait irq softirq steal ..."
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[1:8])
    return (user + nice + system + irq + softirq) / CLK_TCK


def rss_kib(pid):
    """VmRSS of the whole process tree, in KiB."""
    total = 0
    for p in process_tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            continue
    return total
