"""Divergences from the CPU found by the differential fuzzer (torch_openreg/testing/fuzz_known.py), each compared
with the same computation on the CPU."""
import contextlib

import pytest
import torch
import torch.nn.functional as F

from conftest import DEVICE, assert_same

# --------------------------------------------------------------------------
# max_pool1d: the CPU's composite picks its own kernel (contiguous output) when no gradient is recorded
# --------------------------------------------------------------------------

GRAD_CONTEXTS = {"grad": contextlib.nullcontext, "no_grad": torch.no_grad, "inference_mode": torch.inference_mode}


@pytest.mark.parametrize("context", sorted(GRAD_CONTEXTS))
@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("shape,view,args", [
    ((7, 7, 2), lambda base: base.transpose(1, 2), (2,)),
    ((3, 9), lambda base: base[:, ::2], (2, 1, 1, 1, True)),
    ((2, 4, 6), lambda base: base.permute(2, 0, 1), (3, 2, 1, 2)),
])
def test_max_pool1d_output_layout_matches_cpu(shape, view, args, requires_grad, context):
    base = torch.randn(shape)
    cpu = view(base).requires_grad_(requires_grad)
    dev = view(base.to(DEVICE)).requires_grad_(requires_grad)
    assert dev.stride() == cpu.stride()
    with GRAD_CONTEXTS[context]():
        expected = F.max_pool1d(cpu, *args)
        actual = F.max_pool1d(dev, *args)
    assert_same(actual, expected)
    assert actual.requires_grad == expected.requires_grad
    if expected.requires_grad:
        grad = torch.randn(expected.shape)
        expected.backward(grad)
        actual.backward(grad.to(DEVICE))
        assert_same(dev.grad, cpu.grad)


def test_max_pool1d_bad_arguments_raise_the_cpu_error():
    x = torch.randn(2, 3, 8)
    for kwargs in ({"kernel_size": 0}, {"kernel_size": 2, "stride": 0}, {"kernel_size": 2, "padding": 2}):
        with pytest.raises(RuntimeError) as cpu_error:
            F.max_pool1d(x, **kwargs)
        with pytest.raises(RuntimeError) as dev_error:
            F.max_pool1d(x.to(DEVICE), **kwargs)
        assert str(dev_error.value) == str(cpu_error.value)


# --------------------------------------------------------------------------
# median / nanmedian along an expanded dimension: the CPU kernel reads past the input there, openreg reads the
# values themselves and gives the CPU's answer for the same values laid out densely
# --------------------------------------------------------------------------


@pytest.mark.parametrize("operator", [torch.median, torch.nanmedian])
@pytest.mark.parametrize("shape,expanded,dim", [((1, 2), (7, 2), 0), ((3, 1), (3, 6), 1), ((1, 5), (4, 5), -2),
                                                ((1, 1), (300000, 1), 0)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_median_along_an_expanded_dim_matches_cpu_on_the_same_values(operator, shape, expanded, dim, keepdim):
    base = torch.randn(shape)
    expected = operator(base.expand(expanded).contiguous(), dim, keepdim)
    actual = operator(base.to(DEVICE).expand(expanded), dim, keepdim)
    assert_same(actual.values, expected.values)
    assert_same(actual.indices, expected.indices)


def test_median_along_an_expanded_dim_backward_and_out_match_cpu():
    base = torch.randn(1, 3)
    cpu = base.clone().requires_grad_()
    dev = base.to(DEVICE).requires_grad_()
    expected = torch.median(cpu.expand(5, 3).contiguous(), 0)
    actual = torch.median(dev.expand(5, 3), 0)
    expected.values.sum().backward()
    actual.values.sum().backward()
    assert_same(dev.grad, cpu.grad)
    values, indices = torch.empty(0, device=DEVICE), torch.empty(0, dtype=torch.long, device=DEVICE)
    torch.median(base.to(DEVICE).expand(5, 3), 0, out=(values, indices))
    assert_same(values, expected.values.detach())
    assert_same(indices, expected.indices)


def test_median_along_an_expanded_dim_bad_arguments_raise_the_cpu_error():
    cpu = torch.randn(1, 3).expand(5, 3)
    dev = torch.randn(1, 3, device=DEVICE).expand(5, 3)
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.median(cpu, 2)
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.median(dev, 2)
    with pytest.raises(RuntimeError, match="same device|openreg"):
        torch.median(dev, 0, out=(torch.empty(0), torch.empty(0, dtype=torch.long)))


# --------------------------------------------------------------------------
# F.dropout: openreg takes the CPU's unfused path in float16/bfloat16, whose gradient the fused kernel rounds
# differently; the other dtypes keep the fused kernel, bit-exact either way
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("transposed", [False, True])
def test_dropout_forward_and_backward_match_cpu(dtype, p, transposed):
    base = torch.randn(64, 33).to(dtype)
    view = (lambda t: t.t()) if transposed else (lambda t: t)
    cpu = view(base.clone()).requires_grad_()
    dev = view(base.to(DEVICE)).requires_grad_()
    torch.manual_seed(0)
    expected = F.dropout(cpu, p)
    torch.manual_seed(0)
    actual = F.dropout(dev, p)
    assert_same(actual.detach(), expected.detach())
    grad = torch.randn(expected.shape).to(dtype)
    expected.backward(grad)
    actual.backward(grad.to(DEVICE))
    assert_same(dev.grad, cpu.grad)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_dropout_in_eval_and_inference_mode_matches_cpu(dtype):
    base = torch.randn(8, 8).to(dtype)
    assert_same(F.dropout(base.to(DEVICE), 0.5, training=False), F.dropout(base, 0.5, training=False))
    with torch.inference_mode():
        torch.manual_seed(0)
        expected = F.dropout(base, 0.5)
        torch.manual_seed(0)
        actual = F.dropout(base.to(DEVICE), 0.5)
    assert_same(actual, expected)


def test_dropout_bad_probability_raises_the_cpu_error():
    x = torch.randn(4).half()
    with pytest.raises(RuntimeError) as cpu_error:
        torch.dropout(x, 1.5, True)
    with pytest.raises(RuntimeError) as dev_error:
        torch.dropout(x.to(DEVICE), 1.5, True)
    assert str(dev_error.value) == str(cpu_error.value)
