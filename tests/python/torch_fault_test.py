"""The gradwire torch.distributed backend on its own, N ranks started by
this script (gradwire launch would stop the survivors of a killed rank
before they could report):

  init METHOD   init_process_group("gradwire") with env://, tcp:// or
                file:// (no GW_* variable: the rendezvous is torch's
                store, and so is the job token: without the one rank 0
                puts there gw_comm_init would refuse the job), an allreduce, new_group over every rank and over
                ranks {0, 1} (made by gw_comm_split of the default
                communicator), an allreduce on each
  kill          the last rank SIGKILLs itself in a loop of allreduces;
                every survivor must raise within the timeout given to
                init_process_group (5 s) plus grace, naming the dead rank
  stall         the last rank stops calling (sleeps) instead: the
                survivors raise within that timeout, naming it

    torch_fault_test.py N init env|tcp|file
    torch_fault_test.py N kill|stall
"""

import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

TIMEOUT_S = 5


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(mode, method, rank, size):
    import torch
    import torch.distributed as dist

    import gradwire
    import gradwire.torch as gwt

    dist.init_process_group("gradwire", init_method=method, rank=rank, world_size=size, timeout=datetime.timedelta(seconds=TIMEOUT_S))
    out = {"rank": rank, "backend": dist.get_backend()}
    if mode == "init":
        t = torch.full((1000,), float(rank + 1))
        dist.all_reduce(t)
        out["sum"] = t[0].item()
        everyone = dist.new_group()
        pair = dist.new_group([0, 1])
        for name, g in (("everyone", everyone), ("pair", pair)):
            if g == dist.GroupMember.NON_GROUP_MEMBER:
                out[name] = None
                continue
            t = torch.full((10,), float(rank + 1), dtype=torch.float64)
            dist.all_reduce(t, group=g)
            out[name] = [t[0].item(), g.origin]
        dist.barrier()
    else:
        x = torch.ones(1 << 16)
        t0 = None
        try:
            for i in range(1000000):
                if i == 20:
                    t0 = time.monotonic()
                    if rank == size - 1 and mode == "kill":
                        os.kill(os.getpid(), signal.SIGKILL)
                    if rank == size - 1:
                        time.sleep(TIMEOUT_S * 4)  # until the driver kills it
                        os._exit(0)
                dist.all_reduce(x, op=dist.ReduceOp.MAX)
            out["error"] = None
        except Exception as e:  # noqa: BLE001
            out.update(error=type(e).__name__, culprit=getattr(e, "culprit", None), seconds=time.monotonic() - (t0 or time.monotonic()), message=str(e).splitlines()[0])
    print(json.dumps(out), flush=True)
    os._exit(0)  # the communicator of a failed job: no goodbye to a dead peer


def main():
    n, mode = int(sys.argv[1]), sys.argv[2]
    kind = sys.argv[3] if len(sys.argv) > 3 else "env"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GW_")}
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="gw-torch-init-")
    method = {"env": "env://", "tcp": "tcp://127.0.0.1:%d" % port, "file": "file://%s/store" % tmp}[kind]
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(n))
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", mode, method, str(r), str(n)], env=dict(env, RANK=str(r)), stdout=subprocess.PIPE, text=True) for r in range(n)]
    limit = TIMEOUT_S * 4 + 30
    deadline = time.monotonic() + limit
    results, failed = {}, []
    waited = procs if mode == "init" else procs[:-1]  # the victim is killed once the survivors are done
    for r, p in enumerate(waited):
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            failed.append("rank %d still running after %d s: a hang" % (r, limit))
            for q in procs:
                q.kill()
            continue
        for line in out.splitlines():
            if line.startswith("{"):
                results[r] = json.loads(line)
    if mode != "init":
        procs[-1].kill()
        procs[-1].wait()
    if mode == "init":
        for r in range(n):
            got = results.get(r)
            want_pair = [3.0, "split"] if r < 2 else None
            if got is None:
                failed.append("rank %d printed nothing (status %s)" % (r, procs[r].returncode))
            elif got["sum"] != n * (n + 1) / 2 or got["backend"] != "gradwire" or got["everyone"] != [n * (n + 1) / 2, "split"] or got["pair"] != want_pair:
                failed.append("rank %d: %s" % (r, got))
            else:
                print("rank %d (%s): %s" % (r, method, got))
    else:
        victim = n - 1
        for r in range(n - 1):
            got = results.get(r)
            if got is not None and mode == "stall" and got.get("error") is not None and got["seconds"] < TIMEOUT_S * 0.8:
                failed.append("survivor rank %d raised after %.1f s, before the %d s timeout" % (r, got["seconds"], TIMEOUT_S))
            if got is None:
                failed.append("survivor rank %d printed nothing" % r)
            elif got["error"] is None:
                failed.append("survivor rank %d raised nothing" % r)
            elif got["culprit"] != victim:
                failed.append("survivor rank %d blamed %s, not %d: %s" % (r, got["culprit"], victim, got))
            elif got["seconds"] > TIMEOUT_S + 10:
                failed.append("survivor rank %d took %.1f s (timeout %d s)" % (r, got["seconds"], TIMEOUT_S))
            else:
                print("rank %d raised %s in %.2f s naming rank %d: %s" % (r, got["error"], got["seconds"], got["culprit"], got["message"]))
    for f in failed:
        print("FAIL: " + f)
    print("torch fault %s %s: %s" % (mode, kind, "failed" if failed else "passed"))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        main()
