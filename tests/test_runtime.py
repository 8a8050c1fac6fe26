"""Builds and runs the openreg runtime's own C++ test program (no torch)."""

import os
import pathlib
import subprocess

import pytest

OPENREG = pathlib.Path(__file__).resolve().parents[1] / "third_party" / "openreg"


@pytest.mark.long
def test_runtime(tmp_path):
    result = subprocess.run(
        # One object per runtime source and per test topic: compile them in parallel.
        ["make", f"-j{os.cpu_count() or 1}", "-C", str(OPENREG), "test", f"BUILD={tmp_path}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert " 0 failed" in result.stdout, output
