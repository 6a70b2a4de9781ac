"""fault_trial.py - one trial of scripts/fault-trials: where its ranks run
(Place: a private /dev/shm, the emulated hosts), starting them, injecting
the fault, enforcing the hang limit, cleaning up and classifying the
outcome from the workers' own output (Trial). The driver, its options and
its summary are in scripts/fault-trials, whose comment says what a trial is.
"""
import ctypes
import json
import os
import re
import selectors
import signal
import socket
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIGNALS = {"KILL": signal.SIGKILL, "STOP": signal.SIGSTOP}
PHASES = ("join", "loop")
SKIP = 77
PR_SET_PDEATHSIG = 1
# The rank the ERROR lines name (see Trial.log_culprit).
BLAMING_RE = re.compile(r"\bblaming rank (\d+)\b")
MISSING_RE = re.compile(r"\bmissing ranks? (\d+)\b")
RANK_RE = re.compile(r"\brank (\d+)\b")
END_RE = re.compile(r"^GWTRIAL (ready|end) (.*)$")


class Interrupted(Exception):
    pass


class Skip(Exception):
    pass


def now_ms():
    return time.clock_gettime(time.CLOCK_MONOTONIC) * 1e3


_libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent():
    """preexec_fn: the child gets SIGKILL when this script dies."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def free_port(host):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def log(msg):
    print(msg, flush=True)


# --- where the ranks run ------------------------------------------------------


class Place:
    """What a setting needs around its ranks: a private /dev/shm (as root)
    and, for hosts, the emulated cluster. close() undoes everything."""

    def __init__(self, args, setting):
        self.args, self.setting = args, setting
        self.holder = None  # process keeping the private mount namespace
        self.prefix = None  # cluster prefix (hosts)
        self.shm_dir = "/dev/shm"
        self.port_next = 20000 + (os.getpid() % 600) * 20

    def open(self):
        if os.geteuid() == 0 and not self.args.no_private_shm:
            self._private_shm()
        if self.setting == "hosts":
            self._cluster_up()

    def _private_shm(self):
        # A process in its own mount namespace with a tmpfs on /dev/shm; the
        # ranks enter it (nsenter --mount) and so share that /dev/shm. It
        # dies with this script (PR_SET_PDEATHSIG), and the namespace and
        # the tmpfs with it.
        script = ("mount -t tmpfs -o mode=1777,size=2g gwtrials /dev/shm && echo ready && "
                  "exec sleep 2147483647")
        try:
            p = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--", "sh",
                                  "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 preexec_fn=die_with_parent, text=True, cwd="/")
        except OSError as e:
            log(f"note: no private /dev/shm ({e}); segments left by a trial are only counted")
            return
        line = p.stdout.readline()
        if line.strip() != "ready":
            err = p.stderr.read() if p.poll() is not None else ""
            p.kill()
            p.wait()
            log(f"note: no private /dev/shm ({err.strip() or 'unshare failed'}); segments left "
                "by a trial are only counted")
            return
        self.holder = p
        self.shm_dir = f"/proc/{p.pid}/root/dev/shm"

    def _cluster(self, *argv, check=True):
        cmd = [os.path.join(ROOT, "scripts", "cluster.sh"), "--prefix", self.prefix, *argv]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stdout}")
        return r

    def _cluster_up(self):
        if os.geteuid() != 0:
            raise Skip("emulated hosts need root (network namespaces and tc)")
        for tool in ("ip", "tc", "nsenter"):
            if subprocess.run(["sh", "-c", f"command -v {tool}"], stdout=subprocess.DEVNULL).returncode:
                raise Skip(f"emulated hosts need {tool}")
        remove_stale_clusters()
        self.prefix = f"gwft{os.getpid()}h"
        t = time.monotonic()
        self._cluster("up", str(self.args.ranks), "--rate", self.args.rate)
        log(f"hosts: {self.args.ranks} emulated hosts {self.prefix}0..{self.args.ranks - 1} "
            f"at {self.args.rate} ({time.monotonic() - t:.1f} s to set up)")

    def root_addr(self, trial):
        if self.setting == "hosts":
            # A fresh namespace has every port free; a new port per trial
            # keeps a previous root's TIME_WAIT out of the way. Below the
            # kernel's ephemeral range (32768 up, ip_local_port_range): a
            # port in it may be the local end of a rank's connection on
            # host 0, and the root's bind then fails (EADDRINUSE: 2 trials
            # of 100 once, counted as errors before the fault).
            self.port_next = 20000 + (self.port_next - 19999) % 12000
            return "198.18.0.1", self.port_next
        return "127.0.0.1", free_port("127.0.0.1")

    def command(self, rank, argv):
        pre = []
        if self.holder or self.prefix:
            pre = ["nsenter"]
            if self.prefix:
                pre.append(f"--net=/run/netns/{self.prefix}{rank}")
            if self.holder:
                # Entering a mount namespace moves the root to the namespace's
                # own; -r -w keep the holder's (they differ in a chroot, as in
                # the VM).
                pre += ["--target", str(self.holder.pid), "--mount", "--root", "--wd"]
            pre.append("--")
        return pre + argv

    def shm_entries(self):
        try:
            return set(os.listdir(self.shm_dir))
        except OSError:
            return set()

    def remove_shm(self, names):
        """Remove the segments a trial left. In the private /dev/shm they are
        all ours; in the shared one only gradwire's that no live process has
        mapped (a live job's creator maps its segment at once) are removed,
        so another job's are never touched."""
        names = [n for n in names if n.startswith("gw-")]
        if not self.holder and names:
            mapped = mapped_shm()
            names = [n for n in names if n not in mapped]
        for n in names:
            try:
                os.unlink(os.path.join(self.shm_dir, n))
            except OSError:
                pass

    def netns_pids(self):
        if not self.prefix:
            return []
        pids = []
        for r in range(self.args.ranks):
            out = subprocess.run(["ip", "netns", "pids", f"{self.prefix}{r}"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
            pids += out.split()
        return pids

    def close(self):
        if self.prefix:
            r = self._cluster("down", check=False)
            if r.returncode != 0:
                log(f"warning: cluster.sh down --prefix {self.prefix} failed:\n{r.stdout}")
            self.prefix = None
        if self.holder:
            self.holder.kill()
            self.holder.wait()
            self.holder = None


def mapped_shm():
    """Names under /dev/shm that some process has mapped."""
    names = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/maps") as f:
                for line in f:
                    i = line.find("/dev/shm/")
                    if i >= 0:
                        names.add(line[i + 9:].split(" (deleted)")[0].strip())
        except OSError:
            pass
    return names


def remove_stale_clusters():
    """Clusters of earlier runs of this script that died without cleaning up
    (SIGKILL): namespaces gwft<PID>h<i> whose PID is gone."""
    out = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True).stdout
    stale = set()
    for line in out.splitlines():
        m = re.match(r"^(gwft(\d+)h)(\d+|-br)\b", line)
        if m and not os.path.exists(f"/proc/{m.group(2)}"):
            stale.add(m.group(1))
    for p in sorted(stale):
        log(f"removing the cluster {p} of an earlier run that was killed")
        subprocess.run([os.path.join(ROOT, "scripts", "cluster.sh"), "--prefix", p, "down"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# --- one trial ----------------------------------------------------------------


class Rank:
    def __init__(self, rank, proc):
        self.rank, self.proc = rank, proc
        self.out, self.err = b"", b""
        self.ready = None  # fields of the ready line
        self.end = None  # fields of the end line
        self.status = None  # returncode once reaped


def parse_fields(text):
    return dict(kv.split("=", 1) for kv in text.split() if "=" in kv)


class Trial:
    def __init__(self, args, place, index, draw, join_window_ms):
        self.args, self.place, self.index, self.draw = args, place, index, draw
        self.join_window_ms = join_window_ms
        self.ranks = []
        self.sel = selectors.DefaultSelector()
        self.tmp = tempfile.mkdtemp(prefix="gw-fault-trial.")
        self.fault_file = os.path.join(self.tmp, "fault")
        self.stop_when = None

    def env(self, rank, addr, port, token):
        e = dict(os.environ)
        for k in list(e):  # nothing of an outer job leaks in
            if k.startswith(("GW_", "OMPI_", "PMI_", "PMIX_", "SLURM_")) or k in (
                    "MASTER_ADDR", "MASTER_PORT"):
                del e[k]
        n = str(self.args.ranks)
        e.update(RANK=str(rank), WORLD_SIZE=n, LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=n,
                 GW_ROOT=f"{addr}:{port}", MASTER_ADDR=addr, MASTER_PORT=str(port),
                 GW_JOB_TOKEN=token, GW_TIMEOUT_MS=str(self.args.timeout_ms),
                 GW_TRIAL_FAULT_FILE=self.fault_file)
        if self.place.setting == "hosts":
            e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"] = "0", "1"
        transport = {"shm": "shm", "tcp": "tcp", "rxe": "ib"}.get(self.place.setting)
        if transport:
            e["GW_TRANSPORT"] = transport
        for kv in self.args.env:
            k, _, v = kv.partition("=")
            e[k] = v
        return e

    def spawn(self):
        addr, port = self.place.root_addr(self.index)
        token = os.urandom(16).hex()
        worker = os.path.join(self.args.build, "tests", "worker_trial")
        for r in range(self.args.ranks):
            p = subprocess.Popen(self.place.command(r, [worker]), env=self.env(r, addr, port, token),
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, start_new_session=True,
                                 preexec_fn=die_with_parent)
            rk = Rank(r, p)
            self.ranks.append(rk)
            for f, which in ((p.stdout, "out"), (p.stderr, "err")):
                os.set_blocking(f.fileno(), False)
                self.sel.register(f, selectors.EVENT_READ, (rk, which))

    def pump(self, until_ms):
        """Read output and reap exits until until_ms (monotonic) or until
        every pipe is closed."""
        while True:
            left = until_ms - now_ms()
            if left <= 0:
                break
            if not self.sel.get_map():
                # Every pipe is closed; a rank that closed them is exiting
                # but may not be reapable yet.
                time.sleep(min(left, 5) / 1e3)
                self.reap()
                if all(rk.status is not None for rk in self.ranks) or (
                        self.stop_when and self.stop_when()):
                    break
                continue
            for key, _ in self.sel.select(min(left, 50) / 1e3):
                rk, which = key.data
                try:
                    chunk = os.read(key.fileobj.fileno(), 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    self.sel.unregister(key.fileobj)
                    key.fileobj.close()
                    continue
                if which == "out":
                    rk.out += chunk
                    self.parse_out(rk)
                else:
                    rk.err += chunk
            self.reap()
            if self.stop_when and self.stop_when():
                break
        self.reap()

    def parse_out(self, rk):
        for line in rk.out.decode(errors="replace").splitlines():
            m = END_RE.match(line)
            if m:
                f = parse_fields(m.group(2))
                setattr(rk, m.group(1), f)

    def reap(self):
        for rk in self.ranks:
            if rk.status is None:
                rc = rk.proc.poll()
                if rc is not None:
                    rk.status = rc

    def inject(self, victim, sig):
        t = now_ms()
        try:
            os.kill(victim.proc.pid, sig)
        except ProcessLookupError:
            pass
        tmp = self.fault_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{t:.3f}\n")
        os.rename(tmp, self.fault_file)
        return t

    def run(self):
        d = self.draw
        a = self.args
        self.stop_when = None
        self.shm_before = self.place.shm_entries()
        self.spawn_ms = now_ms()
        self.spawn()
        victim = self.ranks[d["victim"]]
        others = [rk for rk in self.ranks if rk is not victim]
        res = dict(trial=self.index, victim=d["victim"], signal=d["signal"], drawn_phase=d["phase"])
        if d["phase"] == "join":
            moment = self.spawn_ms + d["frac"] * self.join_window_ms
        else:
            # Wait until every rank has joined; a job that cannot form with
            # no fault at all is a failure of its own.
            self.stop_when = lambda: all(rk.ready for rk in self.ranks) or any(
                rk.end or rk.status is not None for rk in self.ranks)
            self.pump(self.spawn_ms + a.timeout_ms + a.margin_ms)
            if not all(rk.ready for rk in self.ranks):
                return self.finish(res, None, setup_failed=True)
            moment = now_ms() + d["frac"] * a.loop_window_ms
        self.stop_when = None
        self.pump(moment)
        t_fault = self.inject(victim, SIGNALS[d["signal"]])
        res["delay_ms"] = round(t_fault - self.spawn_ms, 1)  # from starting the ranks
        if d["phase"] == "loop":
            res["after_join_ms"] = round(t_fault - (moment - d["frac"] * a.loop_window_ms), 1)
        deadline = t_fault + a.timeout_ms + a.grace_ms + a.margin_ms
        self.stop_when = lambda: all(rk.status is not None for rk in others)
        self.pump(deadline)
        self.stop_when = None
        return self.finish(res, t_fault)

    def kill_all(self):
        # Stop them all first, so that none sees another die and reports
        # on it after the trial is over.
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for rk in self.ranks:
                if rk.status is None:
                    try:
                        os.killpg(rk.proc.pid, sig)
                    except ProcessLookupError:
                        pass

    def release(self, drain=True):
        """Kill what is left of the job (the hung, a stopped victim), reap
        every rank, read the rest of their output, remove the trial's files.
        Also the way out on Ctrl-C (drain=False)."""
        self.kill_all()
        for rk in self.ranks:
            rk.proc.wait()
        self.stop_when = None
        if drain:
            self.pump(now_ms() + 500)
        for rk in self.ranks:
            for f in (rk.proc.stdout, rk.proc.stderr):
                if not f.closed:
                    try:
                        self.sel.unregister(f)
                    except (KeyError, ValueError):
                        pass
                    f.close()
        self.reap()
        self.sel.close()
        if os.path.isdir(self.tmp):
            for f in os.listdir(self.tmp):
                os.unlink(os.path.join(self.tmp, f))
            os.rmdir(self.tmp)

    def finish(self, res, t_fault, setup_failed=False):
        victim = self.ranks[self.draw["victim"]]
        others = [rk for rk in self.ranks if rk is not victim]
        hung = [rk.rank for rk in others if rk.status is None]
        if hung and not setup_failed:
            res["hung_stacks"] = {rk.rank: stack_of(rk.proc.pid) for rk in others
                                  if rk.rank in hung}
        self.release()
        res["setup_failed"] = setup_failed
        res["hang"] = bool(hung) and not setup_failed
        res["hung_ranks"] = hung
        if victim.ready and t_fault is not None and float(victim.ready["at"]) < t_fault:
            res["phase"] = "loop"
        else:
            res["phase"] = "join"
        survivors, times = [], []
        for rk in others:
            s = dict(rank=rk.rank, exit=rk.status, hung=rk.rank in hung)
            e = rk.end
            if e:
                s.update(status=e.get("status"), phase=e.get("phase"), iters=int(e.get("iters", 0)),
                         wrong=int(e.get("wrong", 0)), op=e.get("op"))
                culprit = int(e.get("culprit", -1))
                src = "gw_comm_init_culprit" if e.get("phase") == "init" else "gw_comm_culprit"
                s.update(culprit=culprit, culprit_source=src, log_culprit=self.log_culprit(rk))
                if t_fault is not None and e.get("status") != "GW_OK":
                    since = float(e.get("since_fault_ms", -1))
                    if since < 0:
                        since = float(e["at"]) - t_fault
                    s["ms_to_error"] = round(since, 1)
                    times.append(since)
            else:
                s.update(status=None, culprit=None, wrong=0)
            if rk.status is not None and rk.status < 0:
                s["killed_by"] = signal.Signals(-rk.status).name
            s["log"] = first_error_line(rk.err)
            survivors.append(s)
        res["survivors"] = survivors
        res["transport"] = ",".join(sorted({rk.ready.get("transport", "?") for rk in self.ranks
                                            if rk.ready}))
        # An error before the fault is a failure without a fault (e.g. a
        # timeout of a healthy but starved job), not a reaction to it.
        res["early_error"] = t_fault is not None and any(
            rk.end and rk.end.get("status") != "GW_OK" and float(rk.end["at"]) < t_fault
            for rk in others)
        res["wrong"] = any(s.get("wrong", 0) > 0 for s in survivors)
        # worker_trial exits 0 after an error (1 when a result was wrong).
        res["clean"] = (not res["hang"] and not setup_failed and not res["early_error"] and all(
            s["status"] not in (None, "GW_OK") and s["exit"] in (0, 1) for s in survivors))
        res["culprit_all"] = res["clean"] and all(s["culprit"] == victim.rank for s in survivors)
        res["ms_to_error"] = round(max(times), 1) if times and res["clean"] else None
        # Leftovers: processes in the hosts' namespaces, segments in /dev/shm.
        res["left_processes"] = self.place.netns_pids()
        shm_new = sorted(self.place.shm_entries() - self.shm_before)
        res["left_shm"] = len(shm_new)
        self.place.remove_shm(shm_new)
        if self.args.logs:
            self.save_logs(res)
        return res

    def log_culprit(self, rk):
        """The rank the library's log blames, kept beside the culprit for
        comparison: "blaming rank K", else one its ERROR lines call
        missing, else the first rank named by the first ERROR line that
        names one."""
        errors = [line.split(" ERROR ", 1)[1] for line in rk.err.decode(errors="replace").splitlines()
                  if " ERROR " in line]
        for pat in (BLAMING_RE, MISSING_RE, RANK_RE):
            for line in errors:
                m = pat.search(line)
                if m:
                    return int(m.group(1))
        return -1

    def save_logs(self, res):
        d = os.path.join(self.args.logs, self.place.setting)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"trial{self.index:04d}.txt"), "w") as f:
            f.write(json.dumps({k: v for k, v in res.items() if k != "survivors"}) + "\n")
            for rk in self.ranks:
                for name, data in (("out", rk.out), ("err", rk.err)):
                    for line in data.decode(errors="replace").splitlines():
                        f.write(f"[{rk.rank} {name}] {line}\n")


def stack_of(pid):
    """Where a hung rank is: its kernel wait channel, and gdb's backtrace of
    every thread when gdb is installed."""
    try:
        with open(f"/proc/{pid}/wchan") as f:
            text = f"wchan {f.read().strip()}\n"
    except OSError:
        text = ""
    try:
        r = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=30)
        text += "\n".join(line for line in r.stdout.splitlines() if line.startswith(("#", "Thread")))
    except (OSError, subprocess.TimeoutExpired):
        pass
    return text


def short_stack(text):
    """The innermost functions of the main thread of a stack_of() text."""
    frames, main = [], False
    for line in text.splitlines():
        if line.startswith("Thread"):
            main = line.startswith("Thread 1 ")
        elif main:
            m = re.match(r"#\d+\s+(?:0x[0-9a-f]+ in )?([\w.]+)", line)
            if m:
                frames.append(m.group(1))
    if not frames:
        return text.splitlines()[0] if text else "?"
    return " < ".join(frames[:8])


def first_error_line(err):
    for line in err.decode(errors="replace").splitlines():
        if " ERROR " in line:
            return line[line.index(" ERROR ") + 1:][:300]
    return None
