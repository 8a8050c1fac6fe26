"""Run with ``-p torch_openreg.testing.library_plugin --openreg-library transformers``: transformers' testing_utils
found the device and openreg's device spec (tests/test_library_suites.py)."""

import os

import torch
from transformers import testing_utils


def test_the_device_and_its_spec_functions():
    assert testing_utils.torch_device == "openreg"
    assert testing_utils.backend_device_count("openreg") == torch.openreg.device_count() == 2
    testing_utils.backend_manual_seed("openreg", 7)
    assert torch.equal(torch.rand(5, device="openreg").cpu(), torch.rand(5, generator=torch.Generator().manual_seed(7)))
    testing_utils.backend_empty_cache("openreg")
    # the spec file is in the working directory for the run (the processes tests start read it too)
    assert os.path.isfile(os.environ["TRANSFORMERS_TEST_DEVICE_SPEC"])
    assert os.environ["TRANSFORMERS_TEST_DEVICE"] == "openreg"
