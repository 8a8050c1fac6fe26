"""Strided nested tensors (torch.nested, layout=torch.strided) on openreg, compared with the CPU.

Every nested operator runs its NestedTensorCPU kernel on host views of the device buffer, so results must equal the
CPU's exactly.
"""

import warnings

import pytest
import torch
from torch import nn

from conftest import DEVICE

pytestmark = pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype stage")


def components(*shapes, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g, dtype=dtype) for shape in shapes]


def both(parts):
    """The same nested tensor on the CPU and on openreg."""
    cpu = torch.nested.nested_tensor(parts)
    return cpu, torch.nested.nested_tensor([p.to(DEVICE) for p in parts])


def assert_nested_equal(device_result, cpu_result):
    assert device_result.is_nested and device_result.device.type == DEVICE
    assert device_result.dtype == cpu_result.dtype
    device_parts = device_result.cpu().unbind()
    cpu_parts = cpu_result.unbind()
    assert len(device_parts) == len(cpu_parts)
    for d, c in zip(device_parts, cpu_parts):
        assert d.shape == c.shape
        torch.testing.assert_close(d, c, rtol=0, atol=0)


def test_construction_and_transfer_round_trip():
    parts = components((2, 3), (4, 3), (1, 3))
    cpu, device = both(parts)
    assert device.device == torch.device(DEVICE, 0)
    assert_nested_equal(device, cpu)
    moved = cpu.to(DEVICE)
    assert_nested_equal(moved, cpu)
    assert_nested_equal(moved.to(torch.float64), cpu.to(torch.float64))
    assert torch.nested.nested_tensor(parts, device=DEVICE).device.type == DEVICE


@pytest.mark.parametrize("op", [torch.sin, torch.cos, torch.abs, torch.neg, torch.relu, torch.nn.functional.gelu])
def test_unary(op):
    cpu, device = both(components((2, 3), (4, 3)))
    assert_nested_equal(op(device), op(cpu))


def test_operator_without_a_nested_cpu_kernel_raises_as_on_cpu():
    cpu, device = both(components((2, 3), (4, 3)))
    with pytest.raises(NotImplementedError):
        torch.exp(cpu)
    with pytest.raises(NotImplementedError, match="aten::exp.*openreg.*NestedTensorCPU"):
        torch.exp(device)


def test_binary_and_in_place():
    cpu_a, dev_a = both(components((2, 3), (4, 3), seed=1))
    cpu_b, dev_b = both(components((2, 3), (4, 3), seed=2))
    assert_nested_equal(dev_a + dev_b, cpu_a + cpu_b)
    assert_nested_equal(dev_a * dev_b, cpu_a * cpu_b)
    assert_nested_equal(dev_a * 2.5, cpu_a * 2.5)
    buffer_address = dev_a.values().data_ptr() if hasattr(dev_a, "values") else None
    result = dev_a.mul_(3)
    cpu_a.mul_(3)
    assert result is dev_a
    assert_nested_equal(dev_a, cpu_a)
    if buffer_address is not None:
        assert dev_a.values().data_ptr() == buffer_address


def test_to_padded_tensor_and_back():
    cpu, device = both(components((2, 3), (4, 3)))
    padded = torch.nested.to_padded_tensor(device, -1.0)
    assert padded.device.type == DEVICE and not padded.is_nested
    torch.testing.assert_close(padded.cpu(), torch.nested.to_padded_tensor(cpu, -1.0), rtol=0, atol=0)


def test_matmul_bmm_softmax():
    cpu_a, dev_a = both(components((2, 3), (4, 3), seed=3))
    cpu_b, dev_b = both(components((3, 5), (3, 2), seed=4))
    assert_nested_equal(torch.matmul(dev_a, dev_b), torch.matmul(cpu_a, cpu_b))
    assert_nested_equal(dev_a.bmm(dev_b), cpu_a.bmm(cpu_b))
    assert_nested_equal(torch.softmax(dev_a, -1), torch.softmax(cpu_a, -1))
    assert_nested_equal(dev_a.transpose(1, 2).contiguous(), cpu_a.transpose(1, 2).contiguous())


def test_autograd_through_nested_ops():
    parts = components((2, 3), (4, 3), seed=5)
    grads = {}
    for device in ("cpu", DEVICE):
        leaves = [p.detach().to(device).requires_grad_() for p in parts]
        nt = torch.nested.as_nested_tensor(leaves)
        torch.nested.to_padded_tensor(nt.sin() * 2, 0.0).sum().backward()
        grads[device] = [leaf.grad.cpu() for leaf in leaves]
    for d, c in zip(grads[DEVICE], grads["cpu"]):
        torch.testing.assert_close(d, c, rtol=0, atol=0)


def test_mixed_devices_raise():
    cpu, device = both(components((2, 3), (4, 3)))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        device + cpu


def transformer_inputs():
    g = torch.Generator().manual_seed(6)
    src = torch.randn(3, 5, 8, generator=g)
    mask = torch.tensor([[False] * 5, [False, False, False, True, True], [False, True, True, True, True]])
    return src, mask


def test_transformer_encoder_fast_path_with_padding_mask():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, batch_first=True)
    cpu_model = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=True).eval()
    device_model = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, batch_first=True),
        num_layers=2,
        enable_nested_tensor=True,
    )
    device_model.load_state_dict(cpu_model.state_dict())
    device_model = device_model.to(DEVICE).eval()
    src, mask = transformer_inputs()
    torch.openreg.reset_fallback_stats()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = cpu_model(src, src_key_padding_mask=mask)
        actual = device_model(src.to(DEVICE), src_key_padding_mask=mask.to(DEVICE))
    # The fast path ran: the padded batch became a nested tensor on the device.
    assert torch.openreg.fallback_stats().get("aten::_transformer_encoder_layer_fwd") == 2
    assert actual.device.type == DEVICE
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)


def test_multihead_attention_with_nested_inputs():
    torch.manual_seed(0)
    cpu_attention = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    device_attention = nn.MultiheadAttention(8, 2, batch_first=True)
    device_attention.load_state_dict(cpu_attention.state_dict())
    device_attention = device_attention.to(DEVICE).eval()
    cpu_q, dev_q = both(components((2, 8), (4, 8), seed=7))
    with torch.no_grad():
        expected, _ = cpu_attention(cpu_q, cpu_q, cpu_q, need_weights=False)
        actual, _ = device_attention(dev_q, dev_q, dev_q, need_weights=False)
    assert_nested_equal(actual, expected)


@pytest.mark.slow
def test_no_nested_cpu_kernel_is_shadowed_by_a_composite():
    """Every operator with a NestedTensorCPU kernel reaches it on openreg.

    A CompositeImplicitAutograd entry for NestedTensorPrivateUse1 is chosen before the backend fallback, so such an
    operator must be registered to the nested fallback by name; this lists any that are not.
    """
    import re

    shadowed = []
    for name in torch._C._dispatch_get_all_op_names():
        if name.startswith("aten::_test_"):
            continue
        table = torch._C._dispatch_dump_table(name)
        cpu = re.search(r"^NestedTensorCPU: .*\[kernel\]$", table, re.M)
        device = re.search(r"^NestedTensorPrivateUse1: .*\[math kernel\]$", table, re.M)
        if cpu and device:
            shadowed.append(name)
    assert shadowed == []
