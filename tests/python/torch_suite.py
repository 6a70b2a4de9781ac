"""torch's own distributed test base (torch.testing._internal.distributed.
distributed_test.DistributedTest._DistTestBase, shipped with python3-torch)
run against a backend, as torch's test/distributed/test_distributed_spawn.py
runs it against gloo: one process per rank, spawned for each test, the
default group on BACKEND through a file:// init method.

    torch_suite.py BACKEND RESULTS.tsv [NAME_OR_GLOB ...]

BACKEND is "gloo" or "gradwire" (see below how gradwire stands in for
gloo). Each test's outcome (pass, fail, error,
skip) and its first line of reason go to RESULTS.tsv; NAMEs (exact)
or globs pick tests. Not part of the default suite (minutes per dozen tests on 2 cores):
tests/python/run.sh suite runs a chosen list, torch_suite_compare.sh the lot.
"""

import os
import sys
import tempfile

if __name__ == "__main__":  # the spawned ranks import this file again: they inherit it
    os.environ["GW_PY_SUITE_BACKEND"] = sys.argv[1]
os.environ["BACKEND"] = os.environ.get("GW_PY_SUITE_BACKEND", "gloo")
os.environ.setdefault("WORLD_SIZE", "2")
os.environ.setdefault("TEMP_DIR", tempfile.mkdtemp(prefix="gw-suite-"))

import types  # noqa: E402
import unittest  # noqa: E402

try:
    import expecttest  # noqa: F401  torch's common_utils imports it; Debian does not package it
except ImportError:
    # Only its TestCase base and ACCEPT flag are used on the way in; no test
    # run here compares expected text (assertExpectedInline).
    _shim = types.ModuleType("expecttest")
    _shim.TestCase, _shim.ACCEPT = unittest.TestCase, False
    sys.modules["expecttest"] = _shim


BACKEND = os.environ["BACKEND"]
if BACKEND == "gradwire":
    # The suite names gloo in many of its conditions (require_backend({"gloo"}),
    # BACKEND == "gloo"), evaluated as it is imported: it is run as "gloo",
    # and every group it asks gloo for (the default group, new_group with
    # backend "gloo" or none) is made on gradwire instead. Only what tests
    # the name itself (get_backend() == BACKEND) can tell, and is listed so.
    import torch.distributed as dist  # noqa: E402

    import gradwire.torch  # noqa: F401,E402  registers the backend in every spawned rank too

    os.environ["BACKEND"] = "gloo"

    def _as_gradwire(backend):
        return "gradwire" if backend is not None and str(backend).lower() == "gloo" else backend

    def _wrap(fn):
        def wrapped(*args, **kwargs):
            if "backend" in kwargs:
                kwargs["backend"] = _as_gradwire(kwargs["backend"])
            elif fn.__name__ == "init_process_group" and args:
                args = (_as_gradwire(args[0]),) + tuple(args[1:])
            return fn(*args, **kwargs)

        wrapped.__name__ = fn.__name__
        return wrapped

    dist.init_process_group = dist.distributed_c10d.init_process_group = _wrap(dist.init_process_group)
    dist.new_group = dist.distributed_c10d.new_group = _wrap(dist.new_group)

from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend  # noqa: E402


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


class _Recorder(unittest.TextTestResult):
    path = None  # RESULTS.tsv, written a line per test as it ends

    def _row(self, test, outcome, why=""):
        first = str(why).strip().splitlines()
        line = first[-1] if first and outcome != "skip" else (first[0] if first else "")
        with open(self.path, "a") as f:
            f.write("%s\t%s\t%s\n" % (test.id().split(".")[-1], outcome, line[:300].replace("\t", " ")))

    def addSuccess(self, test):
        super().addSuccess(test)
        self._row(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._row(test, "fail", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._row(test, "error", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._row(test, "skip", reason)


def main():
    results, patterns = sys.argv[2], sys.argv[3:]
    loader = unittest.TestLoader()
    if patterns:
        # A name is taken exactly (test_broadcast, not test_broadcast_group); a glob as it is.
        loader.testNamePatterns = ["*.%s" % p if "*" not in p else p for p in patterns]
    suite = loader.loadTestsFromTestCase(TestDistBackendWithSpawn)
    runner = unittest.TextTestRunner(resultclass=_Recorder, verbosity=2, stream=sys.stdout)
    _Recorder.path = results
    open(results, "w").close()
    runner.run(suite)


if __name__ == "__main__":
    main()
