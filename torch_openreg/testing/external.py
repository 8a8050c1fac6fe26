"""Runs a PyTorch device-generic test file (from a PyTorch checkout) for openreg only.

pytest runs in a child interpreter that imports torch first (so the backend is
registered before any test module imports ``common_device_type``), with
``PYTORCH_TESTING_DEVICE_ONLY_FOR=openreg`` and ``pytest_plugin`` loaded; the
plugin names the classes ``...OPENREG``, applies the shard and writes the counts.
"""

import json
import os
import subprocess
import sys
import tempfile

from .placement import DEVICE
from .pytest_plugin import BYPASS_ENV, COUNTS_ENV, SHARD_ENV

PYTEST_MAIN = "import sys, torch, pytest; sys.exit(pytest.main(sys.argv[1:]))"


def run(path, keyword=None, shard=None, pytest_args=(), bypass_device_restrictions=False):
    """Runs the tests; prints pytest's output, then ``N passed, N failed, N skipped``. Returns the exit code."""
    with tempfile.TemporaryDirectory() as scratch:
        counts_path = os.path.join(scratch, "counts.json")
        env = {**os.environ, "PYTORCH_TESTING_DEVICE_ONLY_FOR": DEVICE, COUNTS_ENV: counts_path}
        if shard is not None:
            env[SHARD_ENV] = f"{shard[0]}/{shard[1]}"
        if bypass_device_restrictions:
            env[BYPASS_ENV] = "1"
        # -P: the working directory must not shadow the installed torch_openreg.
        command = [
            sys.executable,
            "-P",
            "-c",
            PYTEST_MAIN,
            os.path.abspath(path),
            "-p",
            "torch_openreg.testing.pytest_plugin",
            "-p",
            "no:cacheprovider",
            "-q",
        ]
        if keyword:
            command += ["-k", keyword]
        command += list(pytest_args)
        returncode = subprocess.run(command, env=env).returncode
        if not os.path.exists(counts_path):
            print("pytest did not run the tests (see its output above)")
            return returncode or 1
        with open(counts_path) as file:
            counts = json.load(file)
    if counts["xfail"]:
        print(f"xfail: {counts['xfail']}")
    print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    if counts["passed"] + counts["failed"] == 0:
        print(f"no test ran on {DEVICE}: check that the file instantiates device-type tests")
        return 1
    return 0 if counts["failed"] == 0 and returncode in (0, 5) else 1
