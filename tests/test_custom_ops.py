"""The custom operators of torch_openreg: the C++ ones (csrc/custom/,
namespace ``openreg``) and the Python ones (torch_openreg/ops/_python_ops.py,
namespace ``openreg_py``).

For each: torch.library.opcheck on openreg and on the CPU over representative
samples (empty, non-contiguous, requiring grad where the operator is
differentiable), the documented autograd behaviour, aliasing, the meta device,
FakeTensorMode, torch.compile(fullgraph=True) tracing, and values against the
CPU.
"""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.library import opcheck

from conftest import DEVICE, assert_close, assert_same, make_cpu

openreg = torch.ops.openreg
openreg_py = torch.ops.openreg_py

DEVICES = ["cpu", DEVICE]

ALL_CHECKS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


def t(shape, device, dtype=torch.float32, seed=0, requires_grad=False):
    return make_cpu(shape, dtype, seed=seed).to(device).requires_grad_(requires_grad)


def transposed(shape, device, **kwargs):
    """Non-contiguous but dense: a transposed view."""
    return t(shape, device, **kwargs).t()


def strided(shape, device, **kwargs):
    """Non-contiguous with gaps: every other column."""
    return t(shape, device, **kwargs)[:, ::2]


# op -> device -> [(sample id, args, kwargs, checks)]. A forward-only operator
# gets a requires_grad sample without the aot_dispatch check, which runs a
# backward by design.
def samples(op, device):
    f64 = torch.float64
    if op == "custom_abs":
        return [
            ("contiguous", (t((3, 4), device),), {}, ALL_CHECKS),
            ("transposed", (transposed((4, 3), device),), {}, ALL_CHECKS),
            ("strided", (strided((3, 8), device),), {}, ALL_CHECKS),
            ("empty", (t((0, 3), device),), {}, ALL_CHECKS),
            ("int64", (t((5,), device, dtype=torch.int64),), {}, ALL_CHECKS),
            ("requires_grad", (t((3, 4), device, requires_grad=True),), {}, ALL_CHECKS[:3]),
        ]
    if op == "custom_abs.out":
        return [
            ("contiguous", (t((3, 4), device),), {"out": t((3, 4), device, seed=1)}, ALL_CHECKS),
            ("transposed_out", (t((3, 4), device),), {"out": transposed((4, 3), device)}, ALL_CHECKS),
            ("strided", (strided((3, 8), device),), {"out": t((3, 4), device)}, ALL_CHECKS),
            ("empty", (t((0, 3), device),), {"out": t((0, 3), device)}, ALL_CHECKS),
        ]
    if op == "scaled_tanh":
        return [
            ("requires_grad", (t((3, 4), device, f64, requires_grad=True), 0.7), {}, ALL_CHECKS),
            ("transposed", (transposed((4, 3), device, dtype=f64, requires_grad=True), -2.0), {}, ALL_CHECKS),
            ("strided", (strided((3, 8), device), 1.5), {}, ALL_CHECKS),
            ("empty", (t((0, 3), device, requires_grad=True), 2.0), {}, ALL_CHECKS),
        ]
    if op == "scaled_tanh.out":
        return [
            ("contiguous", (t((3, 4), device), 0.5), {"out": t((3, 4), device, seed=1)}, ALL_CHECKS),
            ("transposed_out", (t((3, 4), device), 2.0), {"out": transposed((4, 3), device)}, ALL_CHECKS),
            ("strided", (strided((3, 8), device, dtype=f64), 1.0), {"out": t((3, 4), device, f64)}, ALL_CHECKS),
            ("empty", (t((0, 3), device), 1.0), {"out": t((0, 3), device)}, ALL_CHECKS),
        ]
    if op == "flat_view":
        return [
            ("requires_grad", (t((3, 4), device, f64, requires_grad=True),), {}, ALL_CHECKS),
            ("strided_1d", (t((9,), device, f64, requires_grad=True)[::3],), {}, ALL_CHECKS),
            ("strided_2d", (strided((3, 8), device),), {}, ALL_CHECKS),
            ("empty", (t((0, 3), device),), {}, ALL_CHECKS),
            ("scalar", (t((), device),), {}, ALL_CHECKS),
        ]
    if op == "smooth_clamp":
        return [
            ("requires_grad", (t((3, 4), device, f64, requires_grad=True), -0.5, 0.5), {}, ALL_CHECKS),
            ("transposed", (transposed((4, 3), device, dtype=f64, requires_grad=True), -1.0, 2.0), {}, ALL_CHECKS),
            ("strided", (strided((3, 8), device), 0.0, 1.0), {}, ALL_CHECKS),
            ("empty", (t((0, 3), device, requires_grad=True), -1.0, 1.0), {}, ALL_CHECKS),
        ]
    if op == "accumulate_":
        return [
            ("contiguous", (t((3, 4), device), t((3, 4), device, seed=1), 0.5), {}, ALL_CHECKS),
            ("transposed_acc", (transposed((4, 3), device), t((3, 4), device, seed=1), 2.0), {}, ALL_CHECKS),
            ("broadcast", (t((3, 4), device), strided((1, 8), device, seed=1), -1.0), {}, ALL_CHECKS),
            ("empty", (t((0, 3), device), t((0, 3), device, seed=1), 1.0), {}, ALL_CHECKS),
        ]
    raise AssertionError(op)


OPS = {
    "custom_abs": openreg.custom_abs.default,
    "custom_abs.out": openreg.custom_abs.out,
    "scaled_tanh": openreg.scaled_tanh.default,
    "scaled_tanh.out": openreg.scaled_tanh.out,
    "flat_view": openreg.flat_view.default,
    "smooth_clamp": openreg_py.smooth_clamp.default,
    "accumulate_": openreg_py.accumulate_.default,
}


def has_autograd_kernel(op, device):
    """opcheck's autograd registration check, for the autograd key of `device`.

    torch.library.opcheck implements it for CPU, CUDA and XPU only (it raises
    NotImplementedError for other devices), so on openreg the same rule is
    checked here: a kernel on the device's autograd key, on Autograd, or a
    CompositeImplicitAutograd decomposition.
    """
    key = "AutogradPrivateUse1" if device == DEVICE else "AutogradCPU"
    return any(
        torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), k)
        for k in (key, "Autograd", "CompositeImplicitAutograd")
    )


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(OPS))
def test_opcheck(name, device):
    op = OPS[name]
    results = {}
    for sample_id, args, kwargs, checks in samples(name, device):
        needs_grad = any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
        if device == DEVICE and needs_grad:
            assert has_autograd_kernel(op, device), f"{op}: no autograd kernel for {device}"
            checks = tuple(c for c in checks if c != "test_autograd_registration")
        results[sample_id] = opcheck(op, args, kwargs, test_utils=checks, raise_exception=False)
    failures = {s: r for s, r in results.items() if any(v != "SUCCESS" for v in r.values())}
    assert not failures, failures


# Values: the openreg kernels run the CPU kernels on host views, and the Python
# operators share their arithmetic, so openreg matches the CPU bit for bit.


@pytest.mark.parametrize("name", list(OPS))
def test_openreg_matches_cpu(name):
    for (sample_id, cpu_args, cpu_kwargs, _), (_, dev_args, dev_kwargs, _) in zip(
        samples(name, "cpu"), samples(name, DEVICE)
    ):
        expected = OPS[name](*cpu_args, **cpu_kwargs)
        actual = OPS[name](*dev_args, **dev_kwargs)
        if name == "accumulate_":
            assert actual is None and expected is None
            expected, actual = cpu_args[0], dev_args[0]
        assert_same(actual.detach(), expected.detach(), check_stride=True)


# custom_abs: forward only.


@pytest.mark.parametrize("device", DEVICES)
def test_custom_abs_backward_raises_naming_the_operator(device):
    x = t((3, 4), device, requires_grad=True)
    y = openreg.custom_abs(x)
    assert y.requires_grad  # the forward runs and records a node...
    with pytest.raises(RuntimeError, match=r"openreg::custom_abs.*not implemented"):
        y.sum().backward()  # ...whose backward raises


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", [openreg.custom_abs.out, openreg.scaled_tanh.out])
def test_out_variants_are_not_differentiable(op, device):
    x = t((3, 4), device, requires_grad=True)
    args = (x,) if op is openreg.custom_abs.out else (x, 2.0)
    y = op(*args, out=torch.empty(3, 4, device=device))
    # The fallback names the operator, not the overload.
    with pytest.raises(RuntimeError, match=rf"derivative for {op._schema.name} is not implemented"):
        y.sum().backward()


# scaled_tanh: a C++ backward.


@pytest.mark.parametrize("device", DEVICES)
def test_scaled_tanh_gradcheck(device):
    x = t((3, 5), device, torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: openreg.scaled_tanh(x, 0.8), (x,))
    assert torch.autograd.gradgradcheck(lambda x: openreg.scaled_tanh(x, 0.8), (x,))


def test_scaled_tanh_gradient_matches_cpu():
    x_cpu = make_cpu((4, 6), torch.float64).requires_grad_()
    x_dev = x_cpu.detach().to(DEVICE).requires_grad_()
    grad = make_cpu((4, 6), torch.float64, seed=1)
    openreg.scaled_tanh(x_cpu, 1.3).backward(grad)
    openreg.scaled_tanh(x_dev, 1.3).backward(grad.to(DEVICE))
    assert_same(x_dev.grad, x_cpu.grad)


# flat_view: the result aliases self.


def test_flat_view_aliases_its_input():
    x = t((3, 4), DEVICE)
    v = openreg.flat_view(x)
    assert v.shape == (12,)
    assert v._base is x
    assert v.data_ptr() == x.data_ptr()
    assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    v[5] = 100.0  # write through the view...
    assert x[1, 1].item() == 100.0  # ...is visible in the input,
    x.mul_(2)  # and the other way round
    assert v[5].item() == 200.0


def test_flat_view_of_a_strided_1d_tensor_keeps_its_stride():
    x = t((9,), DEVICE)
    v = openreg.flat_view(x[::3])
    assert v.stride() == (3,)
    assert v.storage_offset() == 0
    assert v.data_ptr() == x.data_ptr()


@pytest.mark.parametrize("device", DEVICES)
def test_flat_view_without_a_view_raises_naming_the_operator(device):
    with pytest.raises(RuntimeError, match=r"openreg::flat_view: .*no one-dimensional view"):
        openreg.flat_view(t((3, 8), device)[:, :4])


def test_flat_view_gradient_flows_to_the_input():
    x = t((3, 4), DEVICE, torch.float64, requires_grad=True)
    (openreg.flat_view(x) * torch.arange(12.0, dtype=torch.float64, device=DEVICE)).sum().backward()
    assert_same(x.grad, torch.arange(12.0, dtype=torch.float64).reshape(3, 4))


# smooth_clamp and accumulate_: Python custom operators.


@pytest.mark.parametrize("device", DEVICES)
def test_smooth_clamp_gradcheck(device):
    x = (t((4, 5), device, torch.float64) * 3).requires_grad_()
    assert torch.autograd.gradcheck(lambda x: openreg_py.smooth_clamp(x, -1.0, 2.0), (x,))
    assert torch.autograd.gradgradcheck(lambda x: openreg_py.smooth_clamp(x, -1.0, 2.0), (x,))


def test_smooth_clamp_stays_within_its_bounds():
    y = openreg_py.smooth_clamp(torch.linspace(-50, 50, 101, device=DEVICE), -1.0, 2.0).cpu()
    assert y.min() >= -1.0 and y.max() <= 2.0
    assert torch.allclose(y[[0, -1]], torch.tensor([-1.0, 2.0]))


def test_accumulate_mutates_in_place():
    acc = t((3, 4), DEVICE)
    before = acc.cpu()
    version = acc._version
    x = t((3, 4), DEVICE, seed=1)
    assert openreg_py.accumulate_(acc, x, 0.5) is None
    assert acc._version > version
    assert_same(acc, before + 0.5 * x.cpu())


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: openreg.custom_abs(t((3,), DEVICE), out=torch.empty(3)), "openreg:0 and cpu"),
        (
            lambda: openreg.custom_abs(t((3,), DEVICE), out=torch.empty(3, device=DEVICE, dtype=torch.float64)),
            "openreg::custom_abs.out: expected out to have dtype Float",
        ),
        (
            lambda: openreg.scaled_tanh(t((3,), DEVICE, torch.int64), 1.0),
            "openreg::scaled_tanh: expected a floating-point tensor, but got Long on openreg:0",
        ),
        (lambda: openreg_py.smooth_clamp(t((3,), DEVICE), 1.0, 1.0), "expected lo < hi, but got lo=1.0, hi=1.0"),
        (lambda: openreg_py.accumulate_(t((3,), DEVICE), t((3,), "cpu"), 1.0), "openreg:0 and cpu"),
        (lambda: openreg_py.accumulate_(t((3,), DEVICE), t((2, 3), DEVICE), 1.0), "does not broadcast"),
    ],
)
def test_bad_arguments_raise_clear_errors(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


# meta device, FakeTensorMode, torch.compile.


def _shapes_of(fn, make):
    x, acc = make((3, 4)), make((3, 4))
    return {
        "custom_abs": fn(openreg.custom_abs, x),
        "custom_abs.out": fn(lambda x: openreg.custom_abs(x, out=make((0,))), x),
        "scaled_tanh": fn(lambda x: openreg.scaled_tanh(x, 2.0), x),
        "scaled_tanh.out": fn(lambda x: openreg.scaled_tanh(x, 2.0, out=make((0,))), x),
        "flat_view": fn(openreg.flat_view, x),
        "smooth_clamp": fn(lambda x: openreg_py.smooth_clamp(x, 0.0, 1.0), x),
        "accumulate_": fn(lambda x: (openreg_py.accumulate_(acc, x, 1.0), acc)[1], x),
    }


EXPECTED_SHAPES = {
    "custom_abs": (3, 4),
    "custom_abs.out": (3, 4),
    "scaled_tanh": (3, 4),
    "scaled_tanh.out": (3, 4),
    "flat_view": (12,),
    "smooth_clamp": (3, 4),
    "accumulate_": (3, 4),
}


def test_every_operator_runs_on_the_meta_device():
    results = _shapes_of(lambda f, x: f(x), lambda shape: torch.empty(shape, device="meta"))
    assert {name: tuple(r.shape) for name, r in results.items()} == EXPECTED_SHAPES
    assert all(r.device.type == "meta" for r in results.values())


def test_every_operator_traces_under_fake_tensor_mode():
    with FakeTensorMode() as mode:
        results = _shapes_of(lambda f, x: f(x), lambda shape: mode.from_tensor(torch.empty(shape, device=DEVICE)))
    assert {name: tuple(r.shape) for name, r in results.items()} == EXPECTED_SHAPES
    assert all(r.device == torch.device(DEVICE, 0) for r in results.values())


def _model(x, acc):
    y = openreg.scaled_tanh(x, 0.5) + openreg.custom_abs(x)
    y = openreg_py.smooth_clamp(openreg.flat_view(y), -1.0, 1.0)
    openreg.scaled_tanh(x, 2.0, out=acc)
    openreg_py.accumulate_(acc, x, 3.0)
    return y, acc


def test_torch_compile_fullgraph_matches_eager():
    x, acc_eager, acc_compiled = t((3, 4), DEVICE), t((3, 4), DEVICE, seed=1), t((3, 4), DEVICE, seed=1)
    expected, _ = _model(x, acc_eager)
    torch._dynamo.reset()
    actual, returned = torch.compile(_model, backend="aot_eager", fullgraph=True)(x, acc_compiled)
    assert_same(actual, expected.cpu())
    assert returned is acc_compiled  # the mutation reaches the caller's tensor
    assert_same(acc_compiled, acc_eager.cpu())


def test_torch_compile_fullgraph_gradients_match_eager():
    def loss(x):
        y = openreg_py.smooth_clamp(openreg.scaled_tanh(openreg.flat_view(x), 1.5), -0.5, 0.5)
        return y.square().sum()

    x_eager = t((3, 4), DEVICE, torch.float64, requires_grad=True)
    x_compiled = x_eager.detach().clone().requires_grad_()
    loss(x_eager).backward()
    torch._dynamo.reset()
    torch.compile(loss, backend="aot_eager", fullgraph=True)(x_compiled).backward()
    assert_close(x_compiled.grad, x_eager.grad.cpu())


def test_results_stay_on_the_device_of_the_inputs():
    x = t((3, 4), f"{DEVICE}:1")
    acc = t((3, 4), f"{DEVICE}:1", seed=1)
    openreg_py.accumulate_(acc, x, 1.0)
    results = [
        openreg.custom_abs(x),
        openreg.scaled_tanh(x, 1.0),
        openreg.scaled_tanh(x, 1.0, out=torch.empty(0, device=x.device)),
        openreg.flat_view(x),
        openreg_py.smooth_clamp(x, -1.0, 1.0),
        acc,
    ]
    assert all(r.device == x.device for r in results)
    assert torch.openreg.current_device() == 0
