"""Operators that reach the openreg CPU fallback.

The fallback runs the CPU kernel on host views of device memory, so every
result must equal the same CPU computation bit for bit (except where an op is
only defined up to tolerance, e.g. decompositions and FFTs).
"""

import re
import warnings

import pytest
import torch
import torch.nn.functional as F

from conftest import (
    ALL_DTYPES,
    DEVICE,
    assert_close,
    assert_same,
    check_ok,
    dtype_id,
    make_cpu,
    run_python,
)


def dev(t):
    return t.to(DEVICE)


# --------------------------------------------------------------------------
# Elementwise
# --------------------------------------------------------------------------

FLOAT_UNARY = {
    "neg": torch.neg,
    "abs": torch.abs,
    "exp": torch.exp,
    "log_abs": lambda x: torch.log(x.abs() + 1),
    "sqrt_abs": lambda x: torch.sqrt(x.abs()),
    "sin": torch.sin,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "floor": torch.floor,
    "round": torch.round,
    "reciprocal": torch.reciprocal,
    "relu": torch.relu,
    "gelu": F.gelu,
    "clamp": lambda x: x.clamp(-0.5, 0.5),
    "sign": torch.sign,
    "isfinite": torch.isfinite,
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64], ids=dtype_id)
@pytest.mark.parametrize("name", list(FLOAT_UNARY))
def test_unary_float(name, dtype):
    fn = FLOAT_UNARY[name]
    cpu = make_cpu((5, 7), dtype)
    assert_same(fn(dev(cpu)), fn(cpu))
    # non-contiguous input
    assert_same(fn(dev(cpu).t()), fn(cpu.t()))
    assert_same(fn(dev(cpu)[:, ::3]), fn(cpu[:, ::3]))
    # zero-size input
    assert_same(fn(dev(cpu)[:0]), fn(cpu[:0]))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64], ids=dtype_id)
def test_unary_integer(dtype):
    cpu = make_cpu((4, 6), dtype)
    for fn in (torch.abs, torch.bitwise_not, torch.square, lambda x: x.clamp(0, 50), torch.sign):
        assert_same(fn(dev(cpu)), fn(cpu))
        assert_same(fn(dev(cpu).t()), fn(cpu.t()))
    if dtype != torch.uint8:
        assert_same(torch.neg(dev(cpu)), torch.neg(cpu))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=dtype_id)
def test_unary_complex(dtype):
    cpu = make_cpu((3, 5), dtype)
    for fn in (torch.abs, torch.angle, torch.exp, torch.sqrt, torch.conj_physical, torch.neg):
        assert_same(fn(dev(cpu)), fn(cpu))
    assert_same(dev(cpu).real, cpu.real)
    assert_same(dev(cpu).imag, cpu.imag)


def test_unary_bool():
    cpu = make_cpu((3, 5), torch.bool)
    assert_same(torch.logical_not(dev(cpu)), torch.logical_not(cpu))
    assert_same(~dev(cpu), ~cpu)


BINARY = {
    "add": torch.add,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=2),
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "maximum": torch.maximum,
    "atan2": torch.atan2,
    "pow": lambda a, b: torch.pow(a.abs() + 0.5, b),
    "remainder": lambda a, b: torch.remainder(a, b.abs() + 1),
    "lt": torch.lt,
    "eq": torch.eq,
    "where": lambda a, b: torch.where(a > b, a, b),
    "lerp": lambda a, b: torch.lerp(a, b, 0.25),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64], ids=dtype_id)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_float(name, dtype):
    fn = BINARY[name]
    a = make_cpu((4, 5), dtype, seed=1)
    b = make_cpu((4, 5), dtype, seed=2)
    assert_same(fn(dev(a), dev(b)), fn(a, b))
    # broadcasting and non-contiguous operands
    col = make_cpu((4, 1), dtype, seed=3)
    row = make_cpu((1, 5), dtype, seed=4)
    assert_same(fn(dev(col), dev(row)), fn(col, row))
    assert_same(fn(dev(a).t(), dev(b).t()), fn(a.t(), b.t()))
    assert_same(fn(dev(a)[:, ::2], dev(row)[:, ::2]), fn(a[:, ::2], row[:, ::2]))


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64, torch.uint8], ids=dtype_id)
def test_binary_integer(dtype):
    a = make_cpu((3, 4), dtype, seed=1, low=0, high=50)
    b = make_cpu((3, 4), dtype, seed=2, low=1, high=9)
    for fn in (
        torch.add,
        torch.sub,
        torch.mul,
        torch.floor_divide,
        torch.remainder,
        torch.bitwise_and,
        torch.bitwise_xor,
        torch.div,
        torch.ge,
        torch.minimum,
    ):
        assert_same(fn(dev(a), dev(b)), fn(a, b))


@pytest.mark.parametrize(
    "dtype_a,dtype_b",
    [
        (torch.int32, torch.float32),
        (torch.uint8, torch.int8),
        (torch.float16, torch.float64),
        (torch.bool, torch.int16),
        (torch.bfloat16, torch.float16),
        (torch.int64, torch.complex64),
        (torch.float32, torch.complex128),
        (torch.bool, torch.bool),
    ],
    ids=str,
)
def test_binary_type_promotion(dtype_a, dtype_b):
    a = make_cpu((3, 1, 4), dtype_a, seed=1)
    b = make_cpu((2, 4), dtype_b, seed=2)
    for fn in (torch.add, torch.mul, torch.eq):
        expected = fn(a, b)
        got = fn(dev(a), dev(b))
        assert got.dtype == expected.dtype
        assert_same(got, expected)


def test_binary_with_python_scalar_and_cpu_scalar_tensor():
    a = make_cpu((3, 4), torch.float32)
    ai = make_cpu((3, 4), torch.int32)
    # Python scalars
    assert_same(dev(a) + 2.5, a + 2.5)
    assert_same(3 * dev(ai), 3 * ai)
    assert_same(dev(ai) / 2, ai / 2)
    assert_same(dev(ai) + 1.5, ai + 1.5)
    # 0-dim CPU tensors are allowed as scalars (like CUDA), with promotion rules
    s = torch.tensor(1.75)
    assert_same(dev(a) * s, a * s)
    assert_same(s - dev(a), s - a)
    assert_same(dev(ai) + torch.tensor(2), ai + torch.tensor(2))
    assert_same(dev(ai) * torch.tensor(0.5, dtype=torch.float64), ai * torch.tensor(0.5, dtype=torch.float64))
    assert_same(torch.where(dev(a) > 0, dev(a), torch.tensor(0.0)), torch.where(a > 0, a, torch.tensor(0.0)))
    # 0-dim openreg tensor with a larger openreg tensor
    assert_same(dev(a) + dev(torch.tensor(3.0)), a + torch.tensor(3.0))


def test_remainder_has_per_operator_fallback_kernel_and_equals_cpu():
    # The per-operator form of the fallback: an explicit PrivateUse1 kernel
    # that is the same boxed host fallback (so its calls are counted).
    assert torch._C._dispatch_has_kernel_for_dispatch_key("aten::remainder.Tensor", "PrivateUse1")
    assert not torch._C._dispatch_kernel_for_dispatch_key_is_fallthrough("aten::remainder.Tensor", "PrivateUse1")
    a = make_cpu((4, 5), torch.float32, seed=1)
    b = make_cpu((5,), torch.float32, seed=2, low=0.5, high=3.0)
    torch.openreg.reset_fallback_stats()
    assert_same(torch.remainder(dev(a), dev(b)), torch.remainder(a, b))
    assert torch.openreg.fallback_stats() == {"aten::remainder.Tensor": 1}
    ai = make_cpu((4, 5), torch.int64)
    bi = make_cpu((4, 5), torch.int64, seed=3, low=1, high=9)
    assert_same(torch.remainder(dev(ai), dev(bi)), torch.remainder(ai, bi))
    assert_same(torch.remainder(dev(a), torch.tensor(1.5)), torch.remainder(a, torch.tensor(1.5)))


def test_atan2_out_uses_global_fallback():
    # The functional atan2 is a per-operator fallback kernel (a TensorIterator operator: the CPU's own kernel
    # decides the result's layout); its out= overload reaches the backend fallback.
    assert torch._C._dispatch_has_kernel_for_dispatch_key("aten::atan2", "PrivateUse1")
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("aten::atan2.out", "PrivateUse1")
    table = torch._C._dispatch_dump_table("aten::atan2.out")
    line = next(l for l in table.splitlines() if l.startswith("PrivateUse1:"))
    assert line.endswith("[backend fallback]"), line
    a = make_cpu((4, 5), torch.float32, seed=1)
    b = make_cpu((4, 5), torch.float32, seed=2)
    torch.openreg.reset_fallback_stats()
    assert_same(torch.atan2(dev(a), dev(b)), torch.atan2(a, b))
    assert torch.openreg.fallback_stats() == {"aten::atan2": 1}
    out = torch.empty(0, device=DEVICE)
    assert_same(torch.atan2(dev(a), dev(b), out=out), torch.atan2(a, b))
    assert torch.openreg.fallback_stats() == {"aten::atan2": 1, "aten::atan2.out": 1}


# --------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------

REDUCTIONS = {
    "sum": lambda x: x.sum(),
    "sum_dim": lambda x: x.sum(dim=1),
    "sum_keepdim": lambda x: x.sum(dim=0, keepdim=True),
    "sum_dims": lambda x: x.sum(dim=(0, 2)),
    "mean_dim": lambda x: x.mean(dim=-1),
    "max": lambda x: x.max(),
    "amax_dim": lambda x: x.amax(dim=1),
    "argmax": lambda x: x.argmax(),
    "argmax_dim": lambda x: x.argmax(dim=2),
    "std": lambda x: x.std(),
    "std_dim": lambda x: x.std(dim=1, unbiased=False),
    "var_mean": lambda x: torch.var_mean(x, dim=0)[0],
    "prod_dim": lambda x: x.prod(dim=1),
    "cumsum": lambda x: x.cumsum(dim=1),
    "cumprod": lambda x: x.cumprod(dim=2),
    "logsumexp": lambda x: x.logsumexp(dim=1),
    "norm": lambda x: x.norm(),
    "all": lambda x: (x > -1).all(dim=1),
    "any": lambda x: (x > 2).any(),
    "count_nonzero": lambda x: torch.count_nonzero(x > 0, dim=0),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction(name, dtype):
    fn = REDUCTIONS[name]
    cpu = make_cpu((3, 4, 5), dtype)
    assert_same(fn(dev(cpu)), fn(cpu))
    # non-contiguous input
    assert_same(fn(dev(cpu).transpose(0, 2)), fn(cpu.transpose(0, 2)))


def test_reduction_integer_and_empty():
    ci = make_cpu((4, 6), torch.int32)
    assert_same(dev(ci).sum(), ci.sum())
    assert_same(dev(ci).sum(dim=0), ci.sum(dim=0))
    assert_same(dev(ci).cumsum(0), ci.cumsum(0))
    assert_same(dev(ci).max(dim=1).values, ci.max(dim=1).values)
    empty = torch.empty(0, 3)
    assert_same(dev(empty).sum(dim=0), empty.sum(dim=0))
    assert_same(dev(empty).sum(), empty.sum())
    with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
        dev(empty).max(dim=0)


# --------------------------------------------------------------------------
# Linear algebra
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64], ids=dtype_id)
def test_matmul_family(dtype):
    a = make_cpu((4, 6), dtype, seed=1)
    b = make_cpu((6, 3), dtype, seed=2)
    c = make_cpu((4, 3), dtype, seed=3)
    v = make_cpu((6,), dtype, seed=4)
    ba = make_cpu((2, 4, 6), dtype, seed=5)
    bb = make_cpu((2, 6, 3), dtype, seed=6)
    assert_same(torch.mm(dev(a), dev(b)), torch.mm(a, b))
    assert_same(dev(a) @ dev(b), a @ b)
    assert_same(torch.matmul(dev(a), dev(v)), torch.matmul(a, v))
    assert_same(torch.bmm(dev(ba), dev(bb)), torch.bmm(ba, bb))
    assert_same(torch.matmul(dev(ba), dev(b)), torch.matmul(ba, b))
    assert_same(torch.addmm(dev(c), dev(a), dev(b)), torch.addmm(c, a, b))
    assert_same(torch.addmm(dev(c), dev(a), dev(b), beta=0.5, alpha=2), torch.addmm(c, a, b, beta=0.5, alpha=2))
    # transposed operands
    assert_same(torch.mm(dev(b).t(), dev(a).t()), torch.mm(b.t(), a.t()))
    # linear = addmm / matmul with a transposed weight
    w = make_cpu((3, 6), dtype, seed=7)
    bias = make_cpu((3,), dtype, seed=8)
    assert_same(F.linear(dev(a), dev(w), dev(bias)), F.linear(a, w, bias))
    # empty inner dimension
    assert_same(torch.mm(dev(a)[:, :0], dev(b)[:0]), torch.mm(a[:, :0], b[:0]))


def test_matmul_integer_as_cuda_or_with_the_cpu_contract():
    a = make_cpu((3, 5), torch.int64, seed=1)
    b = make_cpu((5, 2), torch.int64, seed=2)
    with pytest.raises(NotImplementedError, match="addmm_cuda"):
        dev(a) @ dev(b)  # CUDA has no integer matrix product
    with torch.openreg.cuda_contract.enabled(False):
        assert_same(dev(a) @ dev(b), a @ b)


def test_linalg_decompositions():
    a = make_cpu((5, 4), torch.float64, seed=1)
    q, r = torch.linalg.qr(dev(a))
    qc, rc = torch.linalg.qr(a)
    assert_close(q, qc)
    assert_close(r, rc)
    s = torch.linalg.svdvals(dev(a))
    assert_close(s, torch.linalg.svdvals(a))
    u, s2, vh = torch.linalg.svd(dev(a), full_matrices=False)
    uc, sc, vhc = torch.linalg.svd(a, full_matrices=False)
    assert_close(s2, sc)
    # singular vectors are defined up to sign: compare the reconstruction
    assert_close(u @ torch.diag(s2) @ vh, a.clone())
    sq = make_cpu((4, 4), torch.float64, seed=2) + 4 * torch.eye(4, dtype=torch.float64)
    assert_close(torch.linalg.inv(dev(sq)), torch.linalg.inv(sq))
    assert_close(torch.linalg.det(dev(sq)), torch.linalg.det(sq))
    assert_close(torch.linalg.solve(dev(sq), dev(a[:4])), torch.linalg.solve(sq, a[:4]))


# --------------------------------------------------------------------------
# Indexing
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.int64, torch.bool, torch.complex64, torch.float16], ids=dtype_id
)
def test_advanced_indexing(dtype):
    cpu = make_cpu((5, 6), dtype)
    xd = dev(cpu)
    idx = torch.tensor([4, 0, 2, 2])
    # index on the device and on the CPU (CUDA allows both)
    assert_same(xd[dev(idx)], cpu[idx])
    assert_same(xd[idx], cpu[idx])
    assert_same(xd[:, idx], cpu[:, idx])
    assert_same(xd[idx, idx], cpu[idx, idx])
    assert_same(xd[dev(idx), 1:4], cpu[idx, 1:4])
    mask = make_cpu((5, 6), torch.bool, seed=3)
    assert_same(xd[dev(mask)], cpu[mask])
    assert_same(xd[mask], cpu[mask])
    row_mask = torch.tensor([True, False, True, True, False])
    assert_same(xd[dev(row_mask)], cpu[row_mask])
    # basic indexing keeps aliasing
    assert_same(xd[1], cpu[1])
    assert_same(xd[..., -1], cpu[..., -1])
    assert_same(xd[None, 1:3], cpu[None, 1:3])


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool, torch.complex128], ids=dtype_id)
def test_index_put(dtype):
    cpu = make_cpu((5, 4), dtype)
    xd = dev(cpu)
    idx = torch.tensor([0, 3])
    vals = make_cpu((2, 4), dtype, seed=5)
    cpu.index_put_((idx,), vals)
    xd.index_put_((dev(idx),), dev(vals))
    assert_same(xd, cpu)
    # CPU indices, CPU 0-dim value
    v0 = make_cpu((), dtype, seed=6)
    cpu[idx, 1] = v0
    xd[idx, 1] = v0
    assert_same(xd, cpu)
    # boolean mask assignment with a Python scalar
    mask = make_cpu((5, 4), torch.bool, seed=7)
    scalar = v0.item()
    cpu[mask] = scalar
    xd[dev(mask)] = scalar
    assert_same(xd, cpu)
    xd2 = dev(make_cpu((5, 4), dtype))
    cpu2 = make_cpu((5, 4), dtype)
    cpu2[mask] = scalar
    xd2[mask] = scalar  # a CPU mask
    assert_same(xd2, cpu2)
    # accumulate
    if dtype != torch.bool:
        dup = torch.tensor([1, 1, 2])
        add = make_cpu((3, 4), dtype, seed=8)
        cpu.index_put_((dup,), add, accumulate=True)
        xd.index_put_((dev(dup),), dev(add), accumulate=True)
        assert_same(xd, cpu)


def test_index_select_gather_scatter():
    cpu = make_cpu((4, 5), torch.float32)
    xd = dev(cpu)
    idx = torch.tensor([3, 0, 1])
    assert_same(torch.index_select(xd, 0, dev(idx)), torch.index_select(cpu, 0, idx))
    assert_same(torch.index_select(xd, 1, dev(idx)), torch.index_select(cpu, 1, idx))
    gidx = make_cpu((4, 3), torch.int64, low=0, high=4)
    assert_same(torch.gather(xd, 1, dev(gidx)), torch.gather(cpu, 1, gidx))
    # scatter_add_ with integers (exact whatever the summation order)
    target = make_cpu((3, 5), torch.int64)
    src = make_cpu((4, 5), torch.int64, seed=2)
    sidx = make_cpu((4, 5), torch.int64, seed=3, low=0, high=2)
    td = dev(target)
    r = td.scatter_add_(0, dev(sidx), dev(src))
    assert r is td
    target.scatter_add_(0, sidx, src)
    assert_same(td, target)
    # and with floats
    ft = make_cpu((3, 5), torch.float32)
    fs = make_cpu((4, 5), torch.float32, seed=4)
    fd = dev(ft).scatter_add(0, dev(sidx), dev(fs))
    assert_close(fd, ft.scatter_add(0, sidx, fs))
    assert_same(dev(ft).scatter(0, dev(sidx[:1]), dev(fs[:1])), ft.scatter(0, sidx[:1], fs[:1]))
    assert_same(torch.take(xd, dev(idx)), torch.take(cpu, idx))
    assert_same(xd.masked_fill(dev(cpu > 0), -1.0), cpu.masked_fill(cpu > 0, -1.0))


# --------------------------------------------------------------------------
# In-place and out=
# --------------------------------------------------------------------------


def test_inplace_returns_self():
    cpu = make_cpu((3, 4), torch.float32)
    xd = dev(cpu)
    ptr = xd.data_ptr()
    y = xd.add_(1)
    assert y is xd
    assert xd.data_ptr() == ptr
    cpu.add_(1)
    assert_same(xd, cpu)
    for op in ("mul_", "sub_", "div_"):
        y = getattr(xd, op)(2)
        getattr(cpu, op)(2)
        assert y is xd
    assert_same(xd, cpu)
    assert xd.clamp_(min=0) is xd
    assert xd.zero_() is xd
    assert xd.fill_(3.5) is xd
    cpu.clamp_(min=0).zero_().fill_(3.5)
    assert_same(xd, cpu)
    # in-place with type promotion into an int tensor fails like on the CPU
    xi = dev(make_cpu((3,), torch.int32))
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Int"):
        xi.add_(1.5 * torch.ones(3, device=DEVICE))
    # in-place on a view writes through to the base
    base = make_cpu((4, 4), torch.float32)
    bd = dev(base)
    bd[1:3].mul_(2)
    base[1:3].mul_(2)
    bd.t().add_(1)
    base.t().add_(1)
    assert_same(bd, base)
    # in-place with a broadcast operand
    bd.add_(bd[0].clone())
    base.add_(base[0].clone())
    assert_same(bd, base)
    # an operand overlapping the output is rejected, as on the CPU (the
    # fallback must keep the two host views over one storage)
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        base.add_(base[0])
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        bd.add_(bd[0])
    assert_same(bd, base)


_write_back_lib = torch.library.Library("fallback_write_back_test", "DEF")
_write_back_lib.define("grow_(Tensor(a!) self, Tensor other) -> ()")


def _grow(self, other):
    self.resize_(2 * other.numel())


_write_back_lib.impl("grow_", _grow, "CPU")


def test_written_argument_passed_again_as_an_input_is_written_back():
    # The write-back looks only at the arguments the schema writes; a tensor that is also passed as an input is one.
    x = torch.arange(3.0, device=DEVICE)
    torch.ops.fallback_write_back_test.grow_(x, x)
    assert x.shape == (6,)
    assert_same(x[:3], torch.arange(3.0))
    y = torch.arange(2.0, device=DEVICE)
    torch.ops.fallback_write_back_test.grow_(y, x)
    assert y.shape == (12,) and x.shape == (6,)
    assert_same(y[:2], torch.arange(2.0))


def test_out_variants():
    a = make_cpu((3, 4), torch.float32, seed=1)
    b = make_cpu((3, 4), torch.float32, seed=2)
    # right size: written in place
    out = torch.empty(3, 4, device=DEVICE)
    ptr = out.data_ptr()
    r = torch.add(dev(a), dev(b), out=out)
    assert r is out and out.data_ptr() == ptr
    assert_same(out, a + b)
    # shape (0,): resized silently
    out0 = torch.empty(0, device=DEVICE)
    r = torch.mul(dev(a), dev(b), out=out0)
    assert r is out0
    assert_same(out0, a * b)
    # wrong non-empty size: resized (with the CPU's warning)
    outw = torch.empty(5, device=DEVICE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.sub(dev(a), dev(b), out=outw)
    assert any("resized" in str(w.message) for w in caught)
    assert_same(outw, a - b)
    # growing beyond the original storage
    outg = torch.empty(2, device=DEVICE)
    big = make_cpu((20, 30), torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.exp(dev(big), out=outg)
    assert_same(outg, torch.exp(big))
    # reductions and matmul with out=
    outs = torch.empty(0, device=DEVICE)
    torch.sum(dev(a), dim=1, out=outs)
    assert_same(outs, a.sum(dim=1))
    outm = torch.empty(0, device=DEVICE)
    torch.mm(dev(a), dev(b).t(), out=outm)
    assert_same(outm, a @ b.t())
    # a non-contiguous out is written through
    base = torch.zeros(4, 8, device=DEVICE)
    ref = torch.zeros(4, 8)
    torch.add(dev(a), dev(b), out=base[:3, ::2])
    torch.add(a, b, out=ref[:3, ::2])
    assert_same(base, ref)
    # tuple out=
    vals = torch.empty(0, device=DEVICE)
    idxs = torch.empty(0, dtype=torch.int64, device=DEVICE)
    rv, ri = torch.max(dev(a), dim=1, out=(vals, idxs))
    assert rv is vals and ri is idxs
    mv, mi = torch.max(a, dim=1)
    assert_same(vals, mv)
    assert_same(idxs, mi)
    # out= with a mismatched dtype follows the CPU rules
    outi = torch.empty(3, 4, dtype=torch.int64, device=DEVICE)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        torch.add(dev(a), dev(b), out=outi)
    # a CPU out tensor for openreg inputs is a device mismatch
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.add(dev(a), dev(b), out=torch.empty(3, 4))


# --------------------------------------------------------------------------
# Ops returning tuples / lists
# --------------------------------------------------------------------------


def test_tuple_returning_ops():
    cpu = make_cpu((4, 7), torch.float32)
    xd = dev(cpu)
    for got, want in [
        (xd.max(dim=1), cpu.max(dim=1)),
        (xd.min(dim=0, keepdim=True), cpu.min(dim=0, keepdim=True)),
        (torch.sort(xd, dim=1), torch.sort(cpu, dim=1)),
        (torch.sort(xd, dim=0, descending=True, stable=True), torch.sort(cpu, dim=0, descending=True, stable=True)),
        (torch.topk(xd, 3, dim=1), torch.topk(cpu, 3, dim=1)),
        (torch.kthvalue(xd, 2, dim=1), torch.kthvalue(cpu, 2, dim=1)),
        (torch.median(xd, dim=1), torch.median(cpu, dim=1)),
        (torch.var_mean(xd, dim=1), torch.var_mean(cpu, dim=1)),
        (torch.aminmax(xd, dim=0), torch.aminmax(cpu, dim=0)),
        (torch.cummax(xd, dim=1), torch.cummax(cpu, dim=1)),
    ]:
        assert type(got) is type(want)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
    ints = make_cpu((20,), torch.int64, low=0, high=5)
    got = torch.unique(dev(ints), return_counts=True, return_inverse=True)
    want = torch.unique(ints, return_counts=True, return_inverse=True)
    for g, w in zip(got, want):
        assert_same(g, w)
    got = torch.unique_consecutive(dev(ints), return_counts=True)
    want = torch.unique_consecutive(ints, return_counts=True)
    for g, w in zip(got, want):
        assert_same(g, w)
    # lists of tensors
    for g, w in zip(torch.split(xd, [1, 3], dim=0), torch.split(cpu, [1, 3], dim=0)):
        assert_same(g, w)
    for g, w in zip(torch.unbind(xd, 1), torch.unbind(cpu, 1)):
        assert_same(g, w)
    for g, w in zip(torch.nonzero(dev(cpu > 0), as_tuple=True), torch.nonzero(cpu > 0, as_tuple=True)):
        assert_same(g, w)
    gm = torch.meshgrid(dev(cpu[0]), dev(cpu[1]), indexing="ij")
    wm = torch.meshgrid(cpu[0], cpu[1], indexing="ij")
    for g, w in zip(gm, wm):
        assert_same(g, w)


def test_cat_stack_and_friends():
    a = make_cpu((2, 3), torch.float32, seed=1)
    b = make_cpu((4, 3), torch.float32, seed=2)
    assert_same(torch.cat([dev(a), dev(b)]), torch.cat([a, b]))
    assert_same(torch.cat([dev(a), dev(b)[:0]]), torch.cat([a, b[:0]]))
    assert_same(torch.stack([dev(a), dev(a) * 2], dim=1), torch.stack([a, a * 2], dim=1))
    assert_same(dev(a).repeat(2, 3), a.repeat(2, 3))
    assert_same(dev(b).flip(0), b.flip(0))
    assert_same(dev(b).roll(1, 0), b.roll(1, 0))
    assert_same(torch.tril(dev(b)), torch.tril(b))
    assert_same(F.pad(dev(a), (1, 2)), F.pad(a, (1, 2)))
    assert_same(dev(a).to(torch.float64), a.to(torch.float64))
    assert_same(dev(b).clone(memory_format=torch.contiguous_format).t(), b.t())


# --------------------------------------------------------------------------
# View ops that go through the fallback keep aliasing
# --------------------------------------------------------------------------


def test_unfold_aliases_base():
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("aten::unfold", "PrivateUse1")
    cpu = make_cpu((8,), torch.float32)
    xd = dev(cpu)
    u = xd.unfold(0, 3, 2)
    uc = cpu.unfold(0, 3, 2)
    assert_same(u, uc)
    assert u.storage_offset() == uc.storage_offset()
    assert u.untyped_storage().data_ptr() == xd.untyped_storage().data_ptr()
    # writing into the view changes the base
    u[1, 0] = 100.0
    uc[1, 0] = 100.0
    assert_same(xd, cpu)
    u.mul_(2)
    uc.mul_(2)
    assert_same(xd, cpu)
    # writing into the base changes the view
    xd[5] = -7.0
    cpu[5] = -7.0
    assert_same(u, uc)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=dtype_id)
def test_view_as_real_aliases_base(dtype):
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("aten::view_as_real", "PrivateUse1")
    cpu = make_cpu((2, 3), dtype)
    xd = dev(cpu)
    r = torch.view_as_real(xd)
    rc = torch.view_as_real(cpu)
    assert_same(r, rc)
    assert r.untyped_storage().data_ptr() == xd.untyped_storage().data_ptr()
    r[0, 1, 1] = 42.0
    rc[0, 1, 1] = 42.0
    assert_same(xd, cpu)
    r[1].zero_()
    rc[1].zero_()
    assert_same(xd, cpu)
    xd[0, 0] = 3 - 4j
    cpu[0, 0] = 3 - 4j
    assert_same(r, rc)
    # and back: view_as_complex of the real view
    c = torch.view_as_complex(r)
    assert c.untyped_storage().data_ptr() == xd.untyped_storage().data_ptr()
    assert_same(c, cpu)
    # .real / .imag are views too
    xd.imag.fill_(1.5)
    cpu.imag.fill_(1.5)
    assert_same(xd, cpu)


def test_fallback_results_are_independent_of_inputs():
    cpu = make_cpu((3, 4), torch.float32)
    xd = dev(cpu)
    y = xd + 1
    assert y.untyped_storage().data_ptr() != xd.untyped_storage().data_ptr()
    xd.zero_()
    assert_same(y, cpu + 1)
    # contiguous() of a non-contiguous device tensor is a copy
    t = dev(cpu).t()
    c = t.contiguous()
    assert c.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()
    assert_same(c, cpu.t().contiguous())


# --------------------------------------------------------------------------
# Random ops: same seed via torch.manual_seed -> same numbers as the CPU
# --------------------------------------------------------------------------

RANDOM_OPS = {
    "rand": lambda d: torch.rand(3, 5, device=d),
    "randn": lambda d: torch.randn(4, 3, device=d, dtype=torch.float64),
    "randint": lambda d: torch.randint(0, 100, (7,), device=d),
    "normal_": lambda d: torch.empty(10, device=d).normal_(2.0, 0.5),
    "uniform_": lambda d: torch.empty(2, 8, device=d).uniform_(-1, 1),
    "bernoulli": lambda d: torch.bernoulli(torch.full((12,), 0.3, device=d)),
    "bernoulli_p": lambda d: torch.empty(12, device=d).bernoulli_(0.7),
    "randperm": lambda d: torch.randperm(20, device=d),
    "multinomial": lambda d: torch.multinomial(torch.tensor([0.1, 0.2, 0.3, 0.4], device=d), 6, replacement=True),
    "multinomial_noreplace": lambda d: torch.multinomial(torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], device=d), 3),
    "dropout": lambda d: F.dropout(torch.ones(4, 6, device=d), p=0.4, training=True),
    "normal_fn": lambda d: torch.normal(torch.zeros(5, device=d), torch.ones(5, device=d)),
    "randn_like": lambda d: torch.randn_like(torch.zeros(3, 3, device=d)),
    "exponential_": lambda d: torch.empty(6, device=d).exponential_(),
}


@pytest.mark.parametrize("name", list(RANDOM_OPS))
def test_random_same_seed_same_numbers_as_cpu(name):
    fn = RANDOM_OPS[name]
    torch.manual_seed(0)
    got = fn(DEVICE)
    torch.manual_seed(0)
    want = fn("cpu")
    assert_same(got, want)
    # torch.manual_seed seeds every openreg device
    torch.manual_seed(0)
    got_1 = fn("openreg:1")
    assert got_1.device == torch.device("openreg:1")
    assert torch.equal(got_1.cpu(), want)
    # a second draw continues the same stream
    torch.manual_seed(123)
    got1, got2 = fn(DEVICE), fn(DEVICE)
    torch.manual_seed(123)
    want1, want2 = fn("cpu"), fn("cpu")
    assert_same(got1, want1)
    assert_same(got2, want2)
    if want1.numel() > 4 and name not in ("bernoulli", "bernoulli_p", "dropout"):
        assert not torch.equal(got1.cpu(), got2.cpu())


# --------------------------------------------------------------------------
# Factories with device=
# --------------------------------------------------------------------------

FACTORIES = {
    "arange": lambda d: torch.arange(10, device=d),
    "arange_float": lambda d: torch.arange(0.5, 3.0, 0.25, device=d),
    "eye": lambda d: torch.eye(4, 3, device=d),
    "full": lambda d: torch.full((2, 3), 7.5, device=d),
    "full_int": lambda d: torch.full((2, 3), 7, device=d, dtype=torch.int16),
    "zeros": lambda d: torch.zeros(3, 2, dtype=torch.complex64, device=d),
    "ones": lambda d: torch.ones(2, 2, dtype=torch.bool, device=d),
    "zeros_like": lambda d: torch.zeros_like(torch.empty(3, 4, device=d).t()),
    "ones_like": lambda d: torch.ones_like(torch.empty(2, 3, device=d, dtype=torch.bfloat16)),
    "full_like": lambda d: torch.full_like(torch.empty(2, 2, device=d), -1.0),
    "linspace": lambda d: torch.linspace(-1, 1, 9, device=d),
    "logspace": lambda d: torch.logspace(0, 2, 5, device=d),
    "tril_indices": lambda d: torch.tril_indices(4, 3, device=d),
    "triu_indices": lambda d: torch.triu_indices(3, 5, 1, device=d),
    "tensor": lambda d: torch.tensor([[1.5, -2.0], [3.0, 4.25]], device=d),
    "tensor_int": lambda d: torch.tensor([1, 2, 3], dtype=torch.uint8, device=d),
    "scalar_tensor": lambda d: torch.scalar_tensor(2.5, device=d),
    "as_tensor": lambda d: torch.as_tensor([True, False], device=d),
    "empty_zero": lambda d: torch.zeros(0, 5, device=d),
}


@pytest.mark.parametrize("name", list(FACTORIES))
def test_factory(name):
    fn = FACTORIES[name]
    got = fn(DEVICE)
    want = fn("cpu")
    assert_same(got, want)
    explicit = fn("openreg:1")
    assert explicit.device == torch.device("openreg:1")
    assert torch.equal(explicit.cpu(), want)


# --------------------------------------------------------------------------
# FFT
# --------------------------------------------------------------------------


def test_fft():
    x = make_cpu((8,), torch.float32)
    xc = make_cpu((4, 8), torch.complex64)
    assert_close(torch.fft.fft(dev(x)), torch.fft.fft(x))
    assert_close(torch.fft.rfft(dev(x)), torch.fft.rfft(x))
    assert_close(torch.fft.ifft(dev(xc)), torch.fft.ifft(xc))
    assert_close(torch.fft.fft2(dev(xc)), torch.fft.fft2(xc))
    assert_close(torch.fft.irfft(dev(torch.fft.rfft(x)), n=8), torch.fft.irfft(torch.fft.rfft(x), n=8))
    assert_close(torch.fft.fft(dev(xc).t(), dim=0), torch.fft.fft(xc.t(), dim=0))
    assert_close(torch.fft.rfft(dev(x.double()), norm="ortho"), torch.fft.rfft(x.double(), norm="ortho"))


# --------------------------------------------------------------------------
# Printing
# --------------------------------------------------------------------------


def _strip_device(s, device="openreg:0"):
    s = re.sub(r",\s*device='" + re.escape(device) + "'", "", s)
    return " ".join(s.split())


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_repr_matches_cpu(dtype):
    for shape in [(5,), (3, 4), (), (0,), (2, 0, 3)]:
        cpu = make_cpu(shape, dtype)
        text = repr(dev(cpu))
        assert "device='openreg:0'" in text
        assert _strip_device(text) == " ".join(repr(cpu).split())
    # a non-contiguous tensor and one on device 1
    cpu = make_cpu((4, 3), dtype)
    assert _strip_device(repr(dev(cpu).t())) == " ".join(repr(cpu.t()).split())
    text1 = repr(cpu.to("openreg:1"))
    assert "device='openreg:1'" in text1
    assert _strip_device(text1, "openreg:1") == " ".join(repr(cpu).split())


def test_repr_summarized_and_grad():
    big = make_cpu((2000,), torch.float32)
    text = repr(dev(big))
    assert "..." in text
    assert _strip_device(text) == " ".join(repr(big).split())
    w = make_cpu((3,), torch.float32).requires_grad_()
    wd = dev(w.detach()).requires_grad_()
    assert _strip_device(repr(wd)) == " ".join(repr(w).split())
    assert _strip_device(repr(wd * 2)) == " ".join(repr(w * 2).split())
    assert _strip_device(str(dev(big[:7]))) == " ".join(str(big[:7]).split())


# --------------------------------------------------------------------------
# Errors of the fallback
# --------------------------------------------------------------------------


def test_pin_memory_op_is_blocked():
    x = torch.ones(2, device=DEVICE)
    with pytest.raises(NotImplementedError) as info:
        torch.ops.aten._pin_memory(x)
    message = str(info.value)
    assert "aten::_pin_memory" in message
    assert "openreg" in message


def test_pin_memory_method_raises():
    x = torch.ones(2, device=DEVICE)
    with pytest.raises((NotImplementedError, RuntimeError)) as info:
        x.pin_memory()
    message = str(info.value)
    assert "_pin_memory" in message
    assert "openreg" in message
    # the process still works
    assert_same(x + 1, torch.ones(2) + 1)


def test_mixed_openreg_devices_raise():
    a = torch.ones(3, device="openreg:0")
    b = torch.ones(3, device="openreg:1")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + b
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.mm(a.view(3, 1), b.view(1, 3))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a.add_(b)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.cat([a, b])
    # a 0-dim tensor on the other openreg device is not a scalar exception
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a * torch.tensor(2.0, device="openreg:1")
    # same-device ops on device 1 run and stay there
    c = b * 2 + b
    assert c.device == torch.device("openreg:1")
    assert_same(c, torch.full((3,), 3.0), device_type=DEVICE)


def test_fallback_op_on_device_1_allocates_there():
    cpu = make_cpu((3, 3), torch.float32)
    x1 = cpu.to("openreg:1")
    for y in (x1 + 1, x1 @ x1, x1.sum(dim=0), torch.sort(x1)[0], x1[torch.tensor([0, 2])]):
        assert y.device == torch.device("openreg:1")
        assert y.untyped_storage().device == torch.device("openreg:1")
    assert torch.openreg.current_device() == 0
    assert_same(x1 @ x1, cpu @ cpu)


# --------------------------------------------------------------------------
# OPENREG_FALLBACK_MODE
# --------------------------------------------------------------------------

_INPUTS = """
import torch
g = torch.Generator().manual_seed(7)
a = torch.randn(4, 5, generator=g)
b = torch.randn(5, 3, generator=g)
c = torch.randn(4, 5, generator=g)
idx = torch.tensor([3, 1, 1])
"""

_COPY_MODE_CHILD = (
    _INPUTS
    + """
import sys
d = "openreg"
ad, bd, cd = a.to(d), b.to(d), c.to(d)
res = {}
res["add"] = (ad + cd).cpu()
res["sum"] = ad.sum(dim=1).cpu()
res["matmul"] = (ad @ bd).cpu()
res["index"] = ad[idx.to(d)].cpu()
res["index_cpu"] = ad[idx].cpu()
y = ad.add_(1)
res["inplace_is_self"] = torch.tensor(y is ad)
res["inplace"] = ad.cpu()
out = torch.empty(0, device=d)
r = torch.mul(cd, 2, out=out)
res["out_is_out"] = torch.tensor(r is out)
res["out"] = out.cpu()
res["max_dim"] = torch.stack([t.cpu().double() for t in cd.max(dim=0)])
torch.save(res, sys.argv[1] if len(sys.argv) > 1 else OUT)
"""
)


@pytest.mark.slow
def test_copy_fallback_mode(tmp_path):
    out_file = tmp_path / "res.pt"
    code = f"OUT = {str(out_file)!r}\n" + _COPY_MODE_CHILD
    check_ok(run_python(code, OPENREG_FALLBACK_MODE="copy"))
    res = torch.load(out_file)
    ns = {}
    exec(_INPUTS, ns)
    a, b, c, idx = ns["a"], ns["b"], ns["c"], ns["idx"]
    assert torch.equal(res["add"], a + c)
    assert torch.equal(res["sum"], a.sum(dim=1))
    assert torch.equal(res["matmul"], a @ b)
    assert torch.equal(res["index"], a[idx])
    assert torch.equal(res["index_cpu"], a[idx])
    assert bool(res["inplace_is_self"])
    assert torch.equal(res["inplace"], a + 1)
    assert bool(res["out_is_out"])
    assert torch.equal(res["out"], c * 2)
    assert torch.equal(res["max_dim"], torch.stack([t.double() for t in c.max(dim=0)]))
