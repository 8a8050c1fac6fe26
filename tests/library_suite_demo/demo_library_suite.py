"""A library test suite in miniature, written the way timm writes its tests: the device comes from ``TORCH_DEVICE``
(cpu by default). ``libraries compare timm`` runs it on the CPU and on openreg (tests/test_library_suites.py); what
each test is for:

- ``test_conv_forward_*`` and ``test_training_step``: correct device code, passing on both;
- ``test_forward_with_host_input``: a real device bug, a CPU batch fed to a model moved to the device (as timm's
  torchscript test does): it passes on the CPU and fails on openreg as on a GPU;
- ``test_half_precision_tolerance``: a device-name table (tolerances known for cpu and cuda only, anything else held
  to 1e-7): it fails on openreg although openreg computes the CPU's numbers;
- ``test_moves_to_the_accelerator``: skipped on the CPU, runs on openreg.
"""

import os

import pytest
import torch

torch_device = os.environ.get("TORCH_DEVICE", "cpu")

TOLERANCES = {"cpu": 1e-2, "cuda": 1e-2}  # bfloat16 against float32, by device name


def conv():
    torch.manual_seed(0)
    return torch.nn.Conv2d(3, 4, 3)


@pytest.mark.parametrize("batch", [1, 2])
def test_conv_forward_matches_the_cpu(batch):
    model = conv()
    x = torch.randn(batch, 3, 8, 8)
    expected = model(x)
    actual = model.to(torch_device)(x.to(torch_device))
    assert actual.device.type == torch_device
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)


def test_training_step():
    model = conv().to(torch_device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.randn(2, 3, 8, 8, device=torch_device)).square().mean()
    loss.backward()
    optimizer.step()
    assert all(p.device.type == torch_device for p in model.parameters())


def test_forward_with_host_input():
    model = conv().to(torch_device)
    out = model(torch.randn(2, 3, 8, 8))  # the bug: the input is never moved
    assert out.shape == (2, 4, 6, 6)


def test_half_precision_tolerance():
    torch.manual_seed(0)
    a, b = torch.randn(16, 16, device=torch_device), torch.randn(16, 16, device=torch_device)
    reference = a @ b
    result = (a.bfloat16() @ b.bfloat16()).float()
    atol = TOLERANCES.get(torch_device, 1e-7)
    torch.testing.assert_close(result, reference, rtol=5e-2, atol=atol)


@pytest.mark.skipif(torch_device == "cpu", reason="needs an accelerator")
def test_moves_to_the_accelerator():
    x = torch.arange(4.0)
    assert torch.equal(x.to(torch_device).cpu(), x)
