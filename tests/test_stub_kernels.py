"""Operators whose ATen implementation calls a DispatchStub: their
functional, in-place and `.out` overloads are openreg kernels that run
libtorch's structured impl, which calls the CPU kernel of the stub on device
memory, so they never use the CPU fallback, and they equal the CPU bit for bit
(same CPU loops on the same memory), on the direct path (operands in the
common dtype, CPU scalars) as on the host path (casts)."""

import pathlib
import struct

import pytest
import torch
import torch_openreg

from conftest import ALL_DTYPES, DEVICE, assert_same, dtype_id, make_cpu

DEV = "openreg"

UNARY = {
    "abs": torch.abs,
    "neg": torch.neg,
    "exp": torch.exp,
    "log": torch.log,
    "sqrt": torch.sqrt,
    "sin": torch.sin,
    "cos": torch.cos,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
}
BINARY = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "eq": torch.eq,
}
STUB_OUT_OPS = [f"aten::{name}.out" for name in list(UNARY) + list(BINARY) if name != "eq"] + [
    "aten::eq.Tensor_out",
    "aten::sum.IntList_out",
]


def cpu_result(fn, *args, **kwargs):
    """The CPU result, or the exception type the CPU raises."""
    try:
        return fn(*args, **kwargs)
    except (RuntimeError, TypeError) as error:
        return type(error)


def check_against_cpu(fn, cpu_args, view=None, **kwargs):
    """``view`` (e.g. a transpose) is applied on each side after the move, so
    both sides compute on the same memory layout."""
    device_args = [a.to(DEV) if isinstance(a, torch.Tensor) and a.dim() > 0 else a for a in cpu_args]
    if view is not None:
        cpu_args = [view(a) for a in cpu_args]
        device_args = [view(a) for a in device_args]
    expected = cpu_result(fn, *cpu_args, **kwargs)
    if isinstance(expected, type):
        # The CPU's refusal, under the CPU's contract: a dtype CUDA computes (abs of bool) is computed wider by
        # openreg's default, which tests/test_cuda_contract.py checks.
        with torch.openreg.cuda_contract.enabled(False), pytest.raises(expected):
            fn(*device_args, **kwargs)
        return
    actual = fn(*device_args, **kwargs)
    assert actual.device.type == DEV
    assert (actual.dtype, actual.shape, actual.stride()) == (expected.dtype, expected.shape, expected.stride())
    # Bit-exact, NaN equal to NaN (log/sqrt of negative inputs).
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)


def assert_openreg_kernel(op):
    """``op`` has a PrivateUse1 kernel of its own: not a fallthrough, not the backend fallback."""
    assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "PrivateUse1"), op
    assert not torch._C._dispatch_kernel_for_dispatch_key_is_fallthrough(op, "PrivateUse1"), op


def call_overload(op):
    """Calls the overload ``op`` (one of STUB_OUT_OPS / STUB_OVERLOADS) on openreg tensors."""
    name, _, overload = op.removeprefix("aten::").partition(".")
    x = make_cpu((3, 4), torch.float32, seed=1).to(DEV)
    base = name.rstrip("_")
    function = getattr(torch, base)
    args = (x, x) if base in BINARY else (x,)
    if base == "sum":
        args = (x, [0])
    if base in ("addcmul", "addcdiv"):
        args = (x, x, x.abs() + 1)
    if base == "lerp":
        args = (x, x.neg(), 0.25 if overload.startswith("Scalar") else x.sigmoid())
    if overload.endswith("out"):
        return function(*args, out=torch.empty(0, dtype=torch.bool if base == "eq" else x.dtype, device=DEV))
    if name.endswith("_"):
        return getattr(x.clone(), name)(*args[1:])
    return function(*args)


@pytest.mark.parametrize("op", sorted(STUB_OUT_OPS))
def test_out_overload_is_an_openreg_kernel_not_the_fallback(op):
    assert_openreg_kernel(op)
    torch.openreg.reset_fallback_stats()
    call_overload(op)
    assert torch.openreg.fallback_stats() == {}


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_equals_cpu(name, dtype):
    fn = UNARY[name]
    x = make_cpu((6, 7), dtype, seed=3)
    check_against_cpu(fn, [x])
    check_against_cpu(fn, [x], view=lambda t: t.t())  # non-contiguous
    check_against_cpu(fn, [x], view=lambda t: t[:, ::2])
    check_against_cpu(fn, [make_cpu((0, 3), dtype)])  # zero-size


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_equals_cpu(name, dtype):
    fn = BINARY[name]
    a = make_cpu((4, 5), dtype, seed=1)
    b = make_cpu((5,), dtype, seed=2, low=1 if not dtype.is_floating_point else None)
    check_against_cpu(fn, [a, b])  # broadcasting
    check_against_cpu(fn, [a, make_cpu((5, 4), dtype, seed=4)], view=lambda t: t.t())  # non-contiguous
    check_against_cpu(fn, [a, make_cpu((4, 5), torch.float64, seed=5)])  # type promotion
    check_against_cpu(fn, [a, torch.tensor(3)])  # 0-dim CPU scalar operand
    if name in ("add", "sub") and dtype != torch.bool:
        check_against_cpu(fn, [a, b], alpha=2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=dtype_id)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_empty_broadcast_operands_equal_cpu(name, dtype):
    # Empty views with a storage offset and a stride-0 empty operand: the CPU's
    # half-precision mul kernel reads such an operand as a scalar (found by the
    # fuzzer as a crash); an empty result computes nothing on either device.
    def operands(device):
        a = torch.zeros(6, dtype=dtype, device=device)[3:3].unsqueeze(1)
        b = torch.zeros(1, dtype=dtype, device=device).as_strided((0,), (0,))
        return a, b

    fn = BINARY[name]
    assert_same(fn(*operands(DEVICE)), fn(*operands("cpu")))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_sum_equals_cpu(dtype):
    x = make_cpu((8, 9, 3), dtype, seed=7)
    check_against_cpu(torch.sum, [x])
    check_against_cpu(lambda t: t.sum(1), [x])
    check_against_cpu(lambda t: t.sum((0, 2), keepdim=True), [x])
    check_against_cpu(lambda t: t.sum(1), [x], view=lambda t: t.permute(2, 0, 1))
    check_against_cpu(lambda t: t.sum(0), [make_cpu((0, 4), dtype)])
    if dtype.is_floating_point:
        check_against_cpu(lambda t: t.sum(1, dtype=torch.float64), [x])


def test_large_sum_is_bit_exact():
    x = make_cpu((1 << 20,), torch.float32, seed=11)
    assert torch.equal(x.to(DEV).sum().cpu(), x.sum())


def test_out_and_inplace_variants():
    a = make_cpu((3, 4), torch.float32, seed=1)
    b = make_cpu((3, 4), torch.float32, seed=2)
    out = torch.empty(0, device=DEV)
    torch.mul(a.to(DEV), b.to(DEV), out=out)  # resized
    assert_same(out, a * b)
    wrong_dtype = torch.empty(3, 4, dtype=torch.int64, device=DEV)
    with pytest.raises(RuntimeError):
        torch.mul(a.to(DEV), b.to(DEV), out=wrong_dtype)
    x = a.to(DEV)
    assert x.sin_() is x
    assert_same(x, a.sin())
    y = a.to(DEV)
    y.add_(b.to(DEV), alpha=-1.5)
    assert_same(y, a.add(b, alpha=-1.5))


STUB_OVERLOADS = (
    [
        f"aten::{name}{overload}"
        for name in ["neg", "exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid"]
        for overload in ["", "_"]
    ]
    + [f"aten::{name}{overload}.Tensor" for name in ["add", "sub", "mul", "div", "eq"] for overload in ["", "_"]]
    + ["aten::sum.dim_IntList"]
    + [f"aten::{name}{overload}" for name in ["addcmul", "addcdiv"] for overload in ["", "_", ".out"]]
    + [
        f"aten::lerp{overload}"
        for overload in [".Scalar", "_.Scalar", ".Scalar_out", ".Tensor", "_.Tensor", ".Tensor_out"]
    ]
)


@pytest.mark.parametrize("op", STUB_OVERLOADS)
def test_functional_and_inplace_overloads_are_openreg_kernels(op):
    assert_openreg_kernel(op)
    torch.openreg.reset_fallback_stats()
    call_overload(op)
    assert torch.openreg.fallback_stats() == {}


IN_PLACE = {"add": "add_", "sub": "sub_", "mul": "mul_", "div": "div_", "eq": "eq_"}


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_inplace_and_out_equal_cpu(name, dtype):
    """Same-dtype operands and CPU scalars take the direct path, a float64
    operand the host path; results, errors and identity match the CPU."""
    a = make_cpu((4, 5), dtype, seed=1)
    for other in [
        make_cpu((5,), dtype, seed=2, low=1 if not dtype.is_floating_point else None),
        make_cpu((4, 5), torch.float64, seed=3),
        torch.tensor(2),
        2.5,
    ]:
        other_dev = other.to(DEV) if isinstance(other, torch.Tensor) and other.dim() > 0 else other
        expected = cpu_result(lambda: getattr(a.clone(), IN_PLACE[name])(other))
        x = a.to(DEV)
        if isinstance(expected, type):
            with pytest.raises(expected):
                getattr(x, IN_PLACE[name])(other_dev)
        else:
            assert getattr(x, IN_PLACE[name])(other_dev) is x
            torch.testing.assert_close(x.cpu(), expected, rtol=0, atol=0, equal_nan=True)
            assert x.dtype == expected.dtype
        expected = cpu_result(lambda: getattr(torch, name)(a, other))
        if isinstance(expected, type):
            continue
        out = torch.empty(0, dtype=expected.dtype, device=DEV)
        assert getattr(torch, name)(a.to(DEV), other_dev, out=out) is out
        torch.testing.assert_close(out.cpu(), expected, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_python_scalar_operands_equal_cpu(dtype):
    """A Python number arrives as a wrapped CPU scalar of another dtype, cast
    to the common dtype as the CPU's iterator casts it; half and bfloat16 CPU
    loops read the uncast value (float precision), which the cast keeps."""
    a = make_cpu((33,), dtype, seed=5)
    for fn in [
        lambda t: t * 0.1,
        lambda t: t + 1.7,
        lambda t: t - 3,
        lambda t: t / 0.3,
        lambda t: t.mul_(0.1),
        lambda t: t.add_(True),
        lambda t: t.sub_(2),
        lambda t: t.div_(7),
        lambda t: t == 1,
        lambda t: t * (2 + 1j),
        lambda t: t.lerp_(t.flip(0), 0.3),
        lambda t: t.mul_(torch.tensor(0.1, dtype=torch.float64)),
        lambda t: t + torch.tensor(3, dtype=torch.int8),
    ]:
        expected = cpu_result(fn, a.clone())
        if isinstance(expected, type):  # int64.mul_(0.1)
            with pytest.raises(expected):
                fn(a.to(DEV))
            continue
        torch.testing.assert_close(fn(a.to(DEV)).cpu(), expected, rtol=0, atol=0, equal_nan=True)


def test_inplace_errors_match_cpu():
    x = torch.ones(3, dtype=torch.int64, device=DEV)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        x.add_(torch.ones(3, device=DEV))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        torch.ones(3, device=DEV).add_(torch.ones(2, 3, device=DEV))
    y = torch.ones(4, device=DEV)
    with pytest.raises(RuntimeError, match="unsupported operation"):
        y[1:].add_(y[:-1])  # partial overlap, as the CPU refuses it


def test_mixed_devices_raise_like_cuda():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(3, device=DEV) + torch.ones(3)


def test_stub_operators_never_use_the_fallback():
    a = make_cpu((4, 5), torch.float32, seed=1).to(DEV)
    b = make_cpu((4, 5), torch.float32, seed=2).abs().add(0.5).to(DEV)
    torch.openreg.reset_fallback_stats()
    for fn in UNARY.values():
        fn(b)
    for fn in BINARY.values():
        fn(a, b)
    a.sum(), a.sum(0)
    a.clone().add_(b), a.clone().mul_(b)
    stats = torch.openreg.fallback_stats()
    served = {
        "abs",
        "neg",
        "exp",
        "log",
        "sqrt",
        "sin",
        "cos",
        "tanh",
        "sigmoid",
        "add",
        "sub",
        "mul",
        "div",
        "eq",
        "sum",
    }
    used = {name.split("::")[1].split(".")[0].rstrip("_") for name in stats}
    assert not used & served, stats


def _dynamic_symbol_names(library):
    """The .dynstr section of an ELF64 little-endian shared library: the names of every symbol it imports and
    exports."""
    data = pathlib.Path(library).read_bytes()
    (section_offset,) = struct.unpack_from("<Q", data, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", data, 0x3A)

    def section(i):
        name, _, _, _, offset, size = struct.unpack_from("<IIQQQQ", data, section_offset + i * entry_size)
        return name, data[offset : offset + size]

    section_names = section(names_index)[1]
    for i in range(count):
        name, body = section(i)
        if section_names[name : section_names.index(b"\0", name)] == b".dynstr":
            return body
    raise AssertionError(f"no .dynstr in {library}")


def test_extension_links_no_dispatch_stub_member():
    # A DispatchStub's members (its per-CPU-capability kernel pointers, DispatchStubImpl::get_call_ptr) change
    # with build macros that differ between CPU architectures; an extension that references one fails to load on
    # another architecture's libtorch. Only the stub objects themselves may be referenced.
    names = _dynamic_symbol_names(torch_openreg._C.__file__)
    assert b"_ZN2at6native" in names  # the parser found the imported ATen symbols
    assert b"DispatchStub" not in names


# Optimizers' pointwise updates (Adam: lerp_, addcmul_, addcdiv_), registered so
# that one call per parameter does not pay the boxed fallback.
OPTIMIZER_OPS = {
    "addcmul": lambda a, b, c, **kw: torch.addcmul(a, b, c, value=-0.3, **kw),
    "addcdiv": lambda a, b, c, **kw: torch.addcdiv(a, b, c, value=0.7, **kw),
    "lerp.Scalar": lambda a, b, c, **kw: torch.lerp(a, b, 0.25, **kw),
    "lerp.Tensor": lambda a, b, c, **kw: torch.lerp(a, b, c.sigmoid(), **kw),
}
OPTIMIZER_IN_PLACE = {
    "addcmul": lambda a, b, c: a.addcmul_(b, c, value=-0.3),
    "addcdiv": lambda a, b, c: a.addcdiv_(b, c, value=0.7),
    "lerp.Scalar": lambda a, b, c: a.lerp_(b, 0.25),
    "lerp.Tensor": lambda a, b, c: a.lerp_(b, c.sigmoid()),
}


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("name", sorted(OPTIMIZER_OPS))
def test_optimizer_pointwise_ops_equal_cpu(name, dtype):
    """Functional, in-place and out=, on the direct path (one dtype), with a broadcast operand, and on the host
    path (a float64 operand, mixed into the common dtype); errors (integer addcdiv, lerp of integers) as the
    CPU raises them."""
    a = make_cpu((4, 5), dtype, seed=1)
    b = make_cpu((4, 5), dtype, seed=2)
    c = make_cpu((5,), dtype, seed=3)
    if dtype.is_floating_point or dtype.is_complex:
        c = c.abs() + 1  # addcdiv's divisor
    for operands in [(a, b, c), (a, make_cpu((4, 5), torch.float64, seed=4), c)]:
        device_operands = [t.to(DEV) for t in operands]
        check_against_cpu(OPTIMIZER_OPS[name], list(operands))
        expected = cpu_result(lambda: OPTIMIZER_IN_PLACE[name](*[t.clone() for t in operands]))
        x = device_operands[0].clone()
        if isinstance(expected, type):
            with pytest.raises(expected):
                OPTIMIZER_IN_PLACE[name](x, *device_operands[1:])
            continue
        assert OPTIMIZER_IN_PLACE[name](x, *device_operands[1:]) is x
        assert_same(x, expected)
        expected = OPTIMIZER_OPS[name](*operands)
        out = torch.empty(0, dtype=expected.dtype, device=DEV)
        assert OPTIMIZER_OPS[name](*device_operands, out=out) is out
        assert_same(out, expected)


def test_adam_step_takes_no_fallback_and_equals_cpu():
    """One Adam step per implementation (for-loop and foreach) over small parameters, as in benchmarks/run.py's
    optimizer group: the same parameters as on the CPU, bit for bit, without the fallback."""
    for foreach in (False, True):
        params = {
            device: [torch.nn.Parameter(make_cpu((16,), seed=i).to(device)) for i in range(3)]
            for device in ("cpu", DEV)
        }
        for device, group in params.items():
            for i, param in enumerate(group):
                param.grad = make_cpu((16,), seed=10 + i).to(device)
        optimizers = {device: torch.optim.Adam(group, lr=0.01, foreach=foreach) for device, group in params.items()}
        optimizers["cpu"].step()
        torch.openreg.reset_fallback_stats()
        optimizers[DEV].step()
        assert torch.openreg.fallback_stats() == {}, foreach
        for param, expected in zip(params[DEV], params["cpu"]):
            assert_same(param.detach(), expected.detach())


def test_direct_path_operands_sharing_memory_equal_cpu_and_release_it():
    # The direct path opens one scoped access per storage for a call, in one
    # batch; operands that share a storage, or lie in one device allocation,
    # must still each see their own bytes, and every access must be closed
    # afterwards, or the runtime refuses to free the memory (empty_cache raises).
    n = 1 << 19  # 4 MiB of float32: a segment of its own
    cpu = torch.randn(2 * n)
    dev = cpu.to(DEVICE)
    separate = torch.randn(n)
    dev_separate = separate.to(DEVICE)
    assert_same(dev[:n] + dev[n:], cpu[:n] + cpu[n:])
    assert_same(dev[:n] * dev_separate, cpu[:n] * separate)
    dev[:n].add_(dev[n:])
    cpu[:n].add_(cpu[n:])
    assert_same(dev, cpu)
    torch.add(dev[:n], dev[:n], out=dev[n:])
    torch.add(cpu[:n], cpu[:n], out=cpu[n:])
    assert_same(dev, cpu)
    reserved = torch.openreg.memory_reserved()
    del dev, dev_separate
    torch.openreg.empty_cache()
    assert torch.openreg.memory_reserved() <= reserved - 3 * n * 4


# Operators whose DispatchStub openreg fills itself (REGISTER_PRIVATEUSE1_DISPATCH, DeviceStubKernels.cpp): ATen's
# own implementation builds the iterator over the openreg tensors and calls openreg's kernel, CPU loops compiled
# into the extension running on device memory. A unary operator, one with a scalar operand, an activation (a
# reduction below).
DEVICE_STUB = {
    "abs": (lambda t, **kw: torch.abs(t, **kw), lambda t: t.abs_()),
    "clamp_min": (lambda t, **kw: torch.clamp_min(t, -0.5, **kw), lambda t: t.clamp_min_(-0.5)),
    "leaky_relu": (lambda t, **kw: torch._C._nn.leaky_relu(t, 0.3, **kw), lambda t: torch._C._nn.leaky_relu_(t, 0.3)),
}


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("name", sorted(DEVICE_STUB))
def test_device_stub_kernels_equal_cpu(name, dtype):
    """Functional, in-place and out= results bit for bit the CPU's (NaN
    included), on contiguous, transposed and strided inputs; an unsupported
    dtype raises as on the CPU."""
    functional, in_place = DEVICE_STUB[name]
    x = make_cpu((9, 7), dtype, seed=6)
    if dtype.is_floating_point:
        x[0, 0] = float("nan")
    for view in (None, lambda t: t.t(), lambda t: t[:, ::2]):
        check_against_cpu(functional, [x], view=view)
    check_against_cpu(functional, [make_cpu((0, 3), dtype)])
    expected = cpu_result(lambda: in_place(x.clone()))
    device_x = x.to(DEV)
    if isinstance(expected, type):
        with torch.openreg.cuda_contract.enabled(False), pytest.raises(expected):
            in_place(device_x)
        return
    assert in_place(device_x) is device_x
    torch.testing.assert_close(device_x.cpu(), expected, rtol=0, atol=0, equal_nan=True)
    out = torch.empty(0, dtype=dtype, device=DEV)  # resized as on the CPU
    assert functional(x.to(DEV), out=out) is out
    torch.testing.assert_close(out.cpu(), functional(x), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("name", sorted(DEVICE_STUB))
def test_device_stub_operators_are_openreg_kernels_not_the_fallback(name):
    overloads = {"abs": ["aten::abs.out"]}.get(name, [f"aten::{name}", f"aten::{name}_", f"aten::{name}.out"])
    for op in overloads:
        assert_openreg_kernel(op)
    functional, in_place = DEVICE_STUB[name]
    x = make_cpu((4, 5), torch.float32, seed=1).to(DEV)
    torch.openreg.reset_fallback_stats()
    functional(x), in_place(x.clone()), functional(x, out=torch.empty(0, device=DEV))
    assert torch.openreg.fallback_stats() == {}


# A reduction whose stub openreg fills: argmax / argmin (argmax_stub, argmin_stub). dims: None (the whole
# tensor), a dimension, a dimension kept.
INDEX_REDUCTIONS = {"argmax": torch.argmax, "argmin": torch.argmin}
REDUCTION_DIMS = [{}, {"dim": 0}, {"dim": 1, "keepdim": True}]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("name", sorted(INDEX_REDUCTIONS))
def test_index_reduction_stub_kernels_equal_cpu(name, dtype):
    """Functional and out= results the CPU's, on contiguous, transposed and
    strided inputs with NaNs and ties; an unsupported dtype (bool, complex)
    and an empty whole-tensor reduction raise as on the CPU."""
    reduce = INDEX_REDUCTIONS[name]
    x = make_cpu((9, 7), dtype, seed=6)
    if dtype.is_floating_point:
        x[3, 2] = float("nan")
    for kwargs in REDUCTION_DIMS:
        for view in (None, lambda t: t.t(), lambda t: t[:, ::2]):
            check_against_cpu(reduce, [x], view=view, **kwargs)
    empty = make_cpu((0, 3), dtype)
    for kwargs in ({}, {"dim": 1}):  # the whole of an empty tensor raises IndexError
        try:
            expected = reduce(empty, **kwargs)
        except (RuntimeError, IndexError, TypeError) as error:
            with pytest.raises(type(error)):
                reduce(empty.to(DEV), **kwargs)
            continue
        assert_same(reduce(empty.to(DEV), **kwargs), expected)
    expected = cpu_result(lambda: reduce(x, dim=1))
    if isinstance(expected, type):
        return
    out = torch.empty(0, dtype=torch.long, device=DEV)  # resized as on the CPU
    assert reduce(x.to(DEV), dim=1, out=out) is out
    assert_same(out, expected)


@pytest.mark.parametrize("name", sorted(INDEX_REDUCTIONS))
def test_index_reductions_across_threads_equal_cpu(name):
    """Large enough that ATen's loop splits the reduction across threads
    (whole tensor) and the outputs across threads (one dimension), with a
    NaN and with ties between the threads' parts."""
    reduce = INDEX_REDUCTIONS[name]
    x = make_cpu((300_000,), torch.float32, seed=3)
    x[123_456] = float("nan")
    check_against_cpu(reduce, [x])
    check_against_cpu(reduce, [torch.arange(200_000) % 3], view=lambda t: t.float())
    check_against_cpu(reduce, [make_cpu((64, 4096), torch.float32, seed=4)], dim=1)
    check_against_cpu(reduce, [make_cpu((64, 4096), torch.float32, seed=4)], dim=0)


@pytest.mark.parametrize("name", sorted(INDEX_REDUCTIONS))
def test_index_reductions_are_openreg_kernels_not_the_fallback(name):
    for op in (f"aten::{name}", f"aten::{name}.out"):
        assert_openreg_kernel(op)
    x = make_cpu((4, 5), torch.float32, seed=1).to(DEV)
    torch.openreg.reset_fallback_stats()
    INDEX_REDUCTIONS[name](x), INDEX_REDUCTIONS[name](x, dim=0, out=torch.empty(0, dtype=torch.long, device=DEV))
    assert torch.openreg.fallback_stats() == {}


def test_complex_abs_takes_the_cpus_kernel():
    z = make_cpu((5, 3), torch.complex64, seed=2)
    check_against_cpu(torch.abs, [z])
    out = torch.empty(0, device=DEV)
    torch.abs(z.to(DEV), out=out)
    assert_same(out, torch.abs(z))
