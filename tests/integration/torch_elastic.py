"""Start a command as torchrun does, through torch's elastic agent.

Usage: torch_elastic.py BACKEND PORT NPROC CMD [ARGS...]

BACKEND "static" is torchrun's default (--master-addr/--master-port): the
agent holds its own TCPStore on PORT (TORCHELASTIC_USE_AGENT_STORE=True)
and hands MASTER_ADDR/MASTER_PORT to the workers. "c10d" is
--rdzv-backend=c10d. Exits with the first failing worker's status, 0 when
all succeed.

This drives torch.distributed.launcher.api.elastic_launch, the function
torchrun's main calls, through its API (redirects given as Std.NONE),
which Debian 12's torchrun (torch 1.13 on Python 3.11) never reaches: it
dies parsing its own --redirects default ("'NoneType' object has no
attribute 'get'"). Users get torchrun's own command line from
`python3 -m gradwire.torchrun` (python/gradwire/torchrun.py, which repairs
that parsing); torchrun_test.sh runs both.
"""
import sys
import uuid

from torch.distributed.elastic.multiprocessing import Std
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.launcher.api import LaunchConfig, elastic_launch


def main():
    backend, port, nproc, cmd = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    cfg = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=nproc, run_id=str(uuid.uuid4()),
                       rdzv_backend=backend, rdzv_endpoint="127.0.0.1:" + port,
                       rdzv_configs={"rank": 0} if backend == "static" else {},
                       max_restarts=0, monitor_interval=0.2, redirects=Std.NONE, tee=Std.NONE)
    try:
        elastic_launch(cfg, entrypoint=cmd[0])(*cmd[1:])
    except ChildFailedError as e:
        first = min(e.failures.values(), key=lambda f: f.timestamp)
        print("torch_elastic: rank %d failed with exit code %d" % (first.local_rank, first.exitcode),
              file=sys.stderr)
        sys.exit(first.exitcode if 0 < first.exitcode < 256 else 1)


if __name__ == "__main__":
    main()
