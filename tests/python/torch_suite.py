"""torch's own distributed test base (torch.testing._internal.distributed.
distributed_test.DistributedTest._DistTestBase, shipped with python3-torch)
run against a backend, as torch's test/distributed/test_distributed_spawn.py
runs it against gloo: one process per rank, spawned for each test, the
default group on BACKEND through a file:// init method.

    torch_suite.py BACKEND RESULTS.tsv [NAME_OR_GLOB ...]

BACKEND is "gloo" or "gradwire". Each test's outcome (pass, fail, error,
skip) and its first line of reason go to RESULTS.tsv; NAMEs (exact)
or globs pick tests. For "gradwire", the backend is named in the
suite's feature tables as gloo is (ddp, subgroup, plugin), so that the tests
gloo runs run on gradwire too instead of being skipped for an unknown name.
Not part of the default suite (minutes per dozen tests on 2 cores):
tests/python/run.sh suite runs a chosen list, torch_suite_compare.sh the lot.
"""

import os
import sys
import tempfile

if __name__ == "__main__" or "BACKEND" not in os.environ:
    os.environ["BACKEND"] = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("BACKEND", "gloo")
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

import torch  # noqa: E402
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

BACKEND = os.environ["BACKEND"]
if BACKEND == "gradwire":
    import gradwire.torch  # noqa: F401,E402  registers the backend in every spawned rank too

    for feature in ("ddp", "subgroup", "plugin"):
        DistTestCases.backend_feature[feature].add("gradwire")

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
