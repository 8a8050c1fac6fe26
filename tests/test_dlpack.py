"""DLPack exchange of openreg tensors: the device a tensor reports
(``__dlpack_device__``), and the tensors ``from_dlpack`` makes of one, which
share its device memory. Values are checked against the CPU tensors they came
from."""

import pytest
import torch
from torch.utils.dlpack import DLDeviceType

from conftest import assert_same, make_cpu


@pytest.mark.parametrize("device", ["openreg:0", "openreg:1"])
def test_dlpack_device_is_the_extension_device_of_torchs_capsules(device):
    t = make_cpu(4).to(device)
    assert t.__dlpack_device__() == (DLDeviceType.kDLExtDev, t.device.index)
    # What torch's C++ conversion writes into the capsules of to_dlpack and __dlpack__.
    assert t.__dlpack_device__() == torch._C._torchDeviceToDLDevice(t.device)
    assert make_cpu(4).__dlpack_device__() == (DLDeviceType.kDLCPU, 0)


@pytest.mark.parametrize("source", ["tensor", "capsule"])
def test_from_dlpack_shares_the_device_memory(source):
    base = make_cpu((3, 4), seed=3).to("openreg:1")
    t = base[:, 1:]
    shared = torch.from_dlpack(t if source == "tensor" else torch.utils.dlpack.to_dlpack(t))
    assert shared.device == t.device
    assert (shared.data_ptr(), shared.stride()) == (t.data_ptr(), t.stride())
    shared.add_(1)
    expected = make_cpu((3, 4), seed=3)
    expected[:, 1:] += 1
    assert_same(base, expected)
