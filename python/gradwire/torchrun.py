"""torchrun, working on Debian 12's torch 1.13: ``python3 -m gradwire.torchrun``
takes torchrun's command line as it is and runs torchrun's own main
(torch.distributed.run), after one repair.

Why. torchrun's --redirects and --tee default to "0" and are parsed by
Std.from_str (torch/distributed/elastic/multiprocessing/api.py), which
finds the member by iterating over the IntFlag Std. From Python 3.11 on,
iterating a Flag yields its canonical one-bit members only: NONE (0) and
ALL (OUT | ERR) are left out, so "0" and "3" map to None, and the agent
dies in to_map with "AttributeError: 'NoneType' object has no attribute
'get'" before it starts any worker. torch fixed the lookup after 1.13
(Std(int(v))); this module installs the same lookup when, and only when,
the torch it runs on still has the bug, so a fixed torch runs untouched.

    python3 -m gradwire.torchrun --nproc_per_node 4 --master_port 29500 --no_python ./my_job
    python3 -m gradwire.torchrun --nproc_per_node 4 --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:29500 train.py

The workers are started by torch's elastic agent as torchrun starts them
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...); gradwire's programs and
the "gradwire" backend find their job there.
"""

import re
import sys


def repair_std():
    """Make Std.from_str return the member for "0".."3" (and in mappings)
    where this torch's returns None. Returns whether a repair was needed."""
    from torch.distributed.elastic.multiprocessing import api

    Std = api.Std
    if Std.from_str("0") is Std.NONE and Std.from_str("3") is Std.ALL:
        return False
    value_regex, mapping_regex = api._VALUE_REGEX, api._MAPPING_REGEX

    def from_str(cls, vm):
        if re.match(value_regex, vm):
            return cls(int(vm))
        if re.match(mapping_regex, vm):
            return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
        raise ValueError("%s does not match: <%s> or <%s>" % (vm, value_regex, mapping_regex))

    Std.from_str = classmethod(from_str)
    return True


def main(argv=None):
    repair_std()
    from torch.distributed import run

    run.main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
