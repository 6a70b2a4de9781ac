"""results_format.py - the formatting render_results.py and its custom pages share:
sizes, figures, ratios, Markdown tables and the "Measured on" block of a
run header."""


SUFFIX = [(1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")]


def size_name(s):
    for v, u in SUFFIX:
        if s >= v and s % v == 0:
            return "%d %siB" % (s // v, u)
    return "%d B" % s


def fmt(v, digits):
    return "-" if v is None else "%.*f" % (digits, v)


def load_text(v):
    return ", ".join("%.2f" % x for x in v) if v else "-"


def busy(run):
    """Whether the machine was busier than its cores when the run started
    (its figures are then indicative only). The 1-minute load average at
    the start is what else ran (scripts/results.sh lets the load of the
    campaign before settle first); the one at the end counts the
    benchmark's own ranks, as many as the cores or more, so it is shown
    but judges nothing."""
    cores = (run.get("cores") or {}).get("online") or 0
    start = ((run.get("load") or {}).get("start") or [0])[0]
    return bool(cores and start > cores)


def measured_on(run):
    c, p = run["cores"], run["peers"]
    note = []
    if busy(run):
        note = ["```{note}",
                "The machine was busier than its %d cores when this run started (load average below): the "
                "figures are indicative only until measured again; the ratios, measured in the same "
                "run, say more than the absolute figures." % c["online"], "```", ""]
    return "\n".join(
        note + [
            "```{list-table} Measured on",
            ":stub-columns: 1",
            "",
            "* - host",
            "  - %s, %d cores online, %d in the affinity mask" % (run["host"], c["online"], c["affinity"]),
            "* - load average (1, 5, 15 min)",
            "  - %s at the start; %s at the end (with the benchmark's own ranks)" % (load_text(run["load"]["start"]), load_text(run["load"]["end"])),
            "* - date (UTC)",
            "  - %s to %s" % (run["date"], run.get("date_end", "?")),
            "* - gradwire commit",
            "  - `%s`" % run["commit"],
            "* - command",
            "  - `%s`" % run["command"],
            "* - peers",
            "  - Open MPI %s; Gloo (Debian libgloo-dev) %s; torch (Debian python3-torch) %s"
            % (p.get("open_mpi") or "absent", p.get("gloo") or "absent", p.get("torch") or "absent"),
            "```",
        ]
    )


def md_table(head, rows, align=None):
    align = align or ["---:"] * len(head)
    out = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def ratio(a, b, digits=2):
    return "%.*f" % (digits, a / b) if a is not None and b else "-"


def med_or_none(v):
    v = [x for x in v if x is not None]
    return median(v) if v else None


def pct(v):
    return "-" if v is None else "%.2f%%" % (100 * v)


def ms(v):
    return fmt(None if v is None else 1e3 * v, 1)


def sig(v):
    return "-" if v is None else "%.4g" % v


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
