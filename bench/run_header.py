#!/usr/bin/python3
"""run_header.py - the run header of every benchmark script's JSON.

A figure means little without what it was measured on: the source it was
built from, when, on which host with how many cores, how busy the machine
was before and after (these machines are shared), the command that made it
and the versions of the peer libraries it is compared with. The bench/*.sh
scripts take the header from here, so that every campaign's JSON carries
the same members under "run"; gradwire-bench writes the same members from
bench/bench_run.c. scripts/render_results.py prints them as a page's
"Measured on" block, and tests/results/check_results.sh refuses a JSON file
whose header lacks one of them (REQUIRED below).

  run_header.py begin [--command CMD] [--ranks N] > HDR
                                              header at the start of a run
                                              (N: the ranks a job of it runs
                                              here, for "oversubscribed")
  run_header.py finish HDR DATA [OUT]         add the load at the end to HDR
                                              and put it under "run" in the
                                              JSON object DATA (into OUT, or
                                              DATA itself)
  run_header.py check FILE...                 exit 1 naming each file whose
                                              header is incomplete

Python's standard library only (/usr/bin/python3).
"""
import datetime
import json
import os
import socket
import subprocess
import sys

# The members a complete header has; "load" has "start" and "end".
REQUIRED = ("commit", "date", "host", "cores", "load", "command", "peers")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _out(cmd):
    """First line of cmd's output, or None when it cannot be run."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (p.stdout or "").strip().splitlines()
    return lines[0].strip() if p.returncode == 0 and lines else None


def _dpkg(package):
    return _out(["dpkg-query", "-W", "-f=${Version}", package])


def commit(root=ROOT):
    """git describe of the source tree, "+dirty" when a tracked file outside
    the documentation differs from that commit. docs/ and README.md do not
    count: scripts/results.sh writes the JSON, the pages and the README's
    list while its campaigns run, and text cannot change a figure."""
    c = _out(["git", "-C", root, "describe", "--always", "--tags"])
    if not c:
        return "unknown"
    try:
        p = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--",
                            ".", ":(exclude)docs", ":(exclude)README.md"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return c + "+unknown"
    if p.returncode != 0:
        return c + "+unknown"
    return c + "+dirty" if p.stdout.strip() else c


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def peers():
    """The versions of the libraries gradwire is compared with: Open MPI as
    ompi_info says, Gloo and torch as Debian packages them (Gloo has no
    version of its own; Debian's torch is python3-torch)."""
    ompi = _out(["ompi_info", "--version"]) or _out(["mpirun", "--version"])
    if ompi:
        ompi = ompi.replace("Open MPI v", "").replace("mpirun (Open MPI) ", "")
    return {"open_mpi": ompi, "gloo": _dpkg("libgloo-dev"), "torch": _dpkg("python3-torch")}


def begin(command, ranks=None):
    """The header at the start; "placement" (where gradwire-bench's ranks
    ran, one entry per rank) is null here, where a script runs many jobs,
    and "oversubscribed" says whether ranks of its jobs outnumber the CPUs
    of this process's affinity mask, when the script says how many ranks a
    job has (else null), as gradwire-bench's own header does."""
    cpus = len(os.sched_getaffinity(0))
    return {
        "commit": commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": socket.gethostname(),
        "cores": {"online": os.cpu_count(), "affinity": len(os.sched_getaffinity(0))},
        "load": {"start": loadavg(), "end": None},
        "command": command,
        "peers": peers(),
        "placement": None,
        "oversubscribed": None if ranks is None else ranks > cpus,
    }


def finish(hdr):
    hdr["load"]["end"] = loadavg()
    hdr["date_end"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return hdr


def problems(doc):
    """What is missing from doc's run header, as a list of words."""
    run = doc.get("run") if isinstance(doc, dict) else None
    if not isinstance(run, dict):
        return ["no \"run\" header"]
    bad = [k for k in REQUIRED if run.get(k) in (None, "", {})]
    load = run.get("load") or {}
    for k in ("start", "end"):
        v = load.get(k) if isinstance(load, dict) else None
        if not (isinstance(v, list) and len(v) == 3):
            bad.append("load." + k)
    cores = run.get("cores") or {}
    for k in ("online", "affinity"):
        if not isinstance(cores, dict) or not isinstance(cores.get(k), int):
            bad.append("cores." + k)
    # Newer members, checked when present (older campaigns predate them).
    if not isinstance(run.get("placement", []), (list, type(None))):
        bad.append("placement")
    if not isinstance(run.get("oversubscribed", False), (bool, type(None))):
        bad.append("oversubscribed")
    p = run.get("peers") or {}
    for k in ("open_mpi", "gloo", "torch"):
        if not isinstance(p, dict) or k not in p:
            bad.append("peers." + k)
    return bad


def main(argv):
    if len(argv) >= 1 and argv[0] == "begin":
        cmd = ranks = None
        rest = argv[1:]
        while rest:
            if len(rest) >= 2 and rest[0] == "--command":
                cmd = rest[1]
            elif len(rest) >= 2 and rest[0] == "--ranks" and rest[1].isdigit() and int(rest[1]) > 0:
                ranks = int(rest[1])
            else:
                sys.exit("usage: run_header.py begin [--command CMD] [--ranks N]")
            rest = rest[2:]
        if cmd is None:
            with open("/proc/%d/cmdline" % os.getppid(), "rb") as f:
                cmd = " ".join(a.decode(errors="replace") for a in f.read().split(b"\0") if a)
        json.dump(begin(cmd, ranks), sys.stdout, indent=1)
        print()
        return 0
    if len(argv) in (3, 4) and argv[0] == "finish":
        with open(argv[1]) as f:
            hdr = finish(json.load(f))
        with open(argv[2]) as f:
            data = json.load(f)
        out = {"run": hdr}
        out.update({k: v for k, v in data.items() if k != "run"})
        path = argv[3] if len(argv) == 4 else argv[2]
        with open(path + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
        os.replace(path + ".tmp", path)
        return 0
    if len(argv) >= 2 and argv[0] == "check":
        rc = 0
        for path in argv[1:]:
            try:
                with open(path) as f:
                    bad = problems(json.load(f))
            except (OSError, ValueError) as e:
                bad = ["unreadable: %s" % e]
            if bad:
                print("%s: incomplete run header: %s" % (path, ", ".join(bad)), file=sys.stderr)
                rc = 1
        return rc
    print(__doc__.split("\n\n")[2], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
