"""The external runner on a PyTorch-style device-generic file (tests/device_generic_demo)."""

import os
import re

import pytest

from torch_openreg.testing.__main__ import main

DEMO = os.path.join(os.path.dirname(__file__), "device_generic_demo", "demo_device_generic.py")
COUNTS = re.compile(r"^(\d+) passed, (\d+) failed, (\d+) skipped$", re.MULTILINE)


def run_external(capfd, *args):
    code = main(["external", DEMO, *args])
    output = capfd.readouterr().out
    return code, tuple(map(int, COUNTS.findall(output)[-1])), output


@pytest.mark.long
@pytest.mark.parametrize(
    "args, counts",
    [
        ((), (4, 0, 2)),  # @onlyOn("cuda") and @skipIf(..., device_type="openreg") skip
        (("--bypass-device-restrictions",), (5, 0, 1)),
        (("-k", "where"), (3, 0, 0)),  # the three @dtypes variants
        (("--shard", "1/2"), (2, 0, 1)),
        (("--shard", "2/2"), (2, 0, 1)),
    ],
)
def test_counts(capfd, args, counts):
    code, got, output = run_external(capfd, *args)
    assert got == counts, output
    assert code == 0, output


@pytest.mark.long
def test_classes_are_named_openreg(capfd):
    code, _, output = run_external(capfd, "-vv")
    assert code == 0, output
    assert "TestDemoDeviceGenericOPENREG::test_where_matches_cpu_openreg_float32" in output, output
    assert "PRIVATEUSE1" not in output, output
