"""Operators where PyTorch gives PrivateUse1 a composite but the CPU has its own
kernel: each runs the CPU kernel on openreg (routed in csrc/aten/Fallback.cpp)
or keeps its composite for a listed reason, and the results are the CPU's bit
for bit, strides included. See docs/operators.md and
torch_openreg/testing/composite_routing.py."""

import itertools

import pytest
import torch
import torch.nn.functional as F
from torch.utils._pytree import tree_flatten

from conftest import DEVICE, make_cpu
from torch_openreg.testing import composite_routing
from torch_openreg.testing.checks import expect_same_outcome
from torch_openreg.testing.compare import assert_matches
from torch_openreg.testing.placement import to_device

# Operators PrivateUse1 is routed to the CPU kernel for, beyond the composite
# class (see the comment at the routing list in Fallback.cpp).
ROUTED_FOR_OTHER_REASONS = {
    "aten::addr_",
    "aten::mse_loss",
    "aten::conj_physical_",
    "aten::_conj_physical",
    "aten::mode.values",
    "aten::index.Tensor",
}

# The OpInfo entries whose samples reach each routed or kept operator.
OPINFO_NAMES = {
    "aten::addr": ["addr"],
    "aten::addr_": ["addr"],
    "aten::addr.out": ["addr"],
    "aten::all.dims_out": ["all"],
    "aten::any.dims_out": ["any"],
    "aten::mish_backward": ["nn.functional.mish"],
    "aten::native_group_norm": ["nn.functional.group_norm"],
    "aten::native_layer_norm": ["nn.functional.layer_norm"],
    "aten::pixel_shuffle": ["nn.functional.pixel_shuffle"],
    "aten::pixel_unshuffle": ["nn.functional.pixel_unshuffle"],
    "aten::silu_backward": ["nn.functional.silu"],
    "aten::mse_loss": ["nn.functional.mse_loss"],
    "aten::conj_physical_": ["conj_physical"],
    "aten::_conj_physical": ["conj_physical"],
    "aten::mode.values": ["mode"],
    "aten::index.Tensor": ["__getitem__"],
    "aten::narrow_copy": ["narrow_copy"],
}


def _channels_last(shape, dtype=torch.float32, seed=0):
    return make_cpu(shape, dtype, seed).contiguous(memory_format=torch.channels_last)


# Samples for operators no OpInfo entry reaches: (function, args) pairs.
EXTRA_SAMPLES = {
    "aten::linalg__powsum": [
        (torch.linalg._powsum, (make_cpu((6, 7), dtype), order, dim))
        for dtype in (torch.float32, torch.float64, torch.bfloat16)
        for order, dim in ((2, None), (3, [1]), (0.5, [0]), (1, None))
    ],
    "aten::native_channel_shuffle": [
        (torch.native_channel_shuffle, (x, 2))
        for x in (make_cpu((2, 8, 3, 3)), _channels_last((2, 8, 3, 3)), make_cpu((1, 6, 4), torch.float64))
    ],
    "aten::pixel_shuffle": [(F.pixel_shuffle, (_channels_last((2, 8, 3, 3)), 2))],
    "aten::pixel_unshuffle": [(F.pixel_unshuffle, (_channels_last((2, 2, 6, 6)), 3))],
    "aten::all.dims_out": [(torch.all, (make_cpu((3, 4, 5), torch.bool), (0, 2)))],
    "aten::any.dims_out": [(torch.any, (make_cpu((3, 4, 5), torch.float32), (1, 2)))],
    "aten::_stack": [
        (torch._stack, ([make_cpu((3, 4)), make_cpu((3, 4), seed=1)], 1)),
        (torch._stack, ([_channels_last((1, 2, 3, 3)), _channels_last((1, 2, 3, 3), seed=1)], 0)),
    ],
    "aten::narrow_copy": [(torch.narrow_copy, (_channels_last((4, 3, 2, 2)), dim, 1, 2)) for dim in range(4)],
    "aten::_stack.out": [
        (
            lambda tensors, dim: torch._stack(tensors, dim, out=torch.empty(0, device=tensors[0].device)),
            ([make_cpu((3, 4)), make_cpu((3, 4), seed=1)], 0),
        ),
    ],
}

OPINFO_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.complex64, torch.bool, torch.int64)
MAX_SAMPLES = 12


@pytest.fixture(scope="module")
def candidates():
    return composite_routing.candidates()


def routed_operators():
    """Operators whose PrivateUse1 kernel is a registration by name (not the backend fallback) that runs the CPU
    kernel on openreg: the routing list, less the per-operator demo (remainder.Tensor)."""
    routed = composite_routing.routed_to_the_host()
    for name in routed:
        entry = next(
            line for line in torch._C._dispatch_dump_table(name).splitlines() if line.startswith("PrivateUse1:")
        )
        assert entry.endswith("[kernel]"), entry  # registered by name, not reached through the backend fallback
    return set(routed)


def test_no_candidate_is_left_unrouted(candidates):
    unrouted = [c.name for c in candidates if c.status == "unrouted"]
    assert not unrouted, (
        f"PrivateUse1 reaches a composite where the CPU has its own kernel: {unrouted}. Route each in "
        "csrc/aten/Fallback.cpp or list it, with the reason, in KEPT_COMPOSITES "
        "(python -m torch_openreg.testing.composite_routing)"
    )


def test_kept_list_names_only_current_candidates(candidates):
    names = {c.name for c in candidates}
    assert set(composite_routing.KEPT_COMPOSITES) <= names
    assert all(c.status == "kept" for c in candidates if c.name in composite_routing.KEPT_COMPOSITES)


def test_the_known_members_of_the_class_are_found(candidates):
    names = {c.name for c in candidates}
    assert {
        "aten::silu_backward",
        "aten::mish_backward",
        "aten::addr",
        "aten::native_layer_norm",
        "aten::native_group_norm",
        "aten::pixel_shuffle",
    } <= names
    # Structured functional defaults run the `.out` kernel: not in the class.
    assert "aten::silu" not in names and "aten::mish" not in names


def test_routing_list_is_the_class_plus_the_listed_exceptions(candidates):
    in_class = {c.name for c in candidates if c.status == "routed"}
    assert routed_operators() == in_class | ROUTED_FOR_OTHER_REASONS


def test_structured_defaults_run_an_openreg_or_cpu_out_kernel():
    """The generated functional/in-place kernels call `.out`: that must itself reach the CPU kernel
    (the backend fallback, or an openreg registration), never another composite."""
    defaults = composite_routing.structured_defaults()
    assert "aten::mm" in defaults and "aten::silu_" in defaults
    wrong = {}
    for name, delegate in defaults.items():
        entry = next(
            line for line in torch._C._dispatch_dump_table(delegate).splitlines() if line.startswith("PrivateUse1:")
        )
        if not ("[backend fallback]" in entry or "/csrc/" in entry):
            wrong[name] = entry
    assert not wrong, wrong


@pytest.mark.parametrize("activation", [F.silu, F.mish], ids=["silu", "mish"])
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16], ids=lambda d: str(d).replace("torch.", "")
)
def test_activation_backward_is_bit_exact(activation, dtype):
    x = make_cpu((64, 33), dtype, low=-8, high=8).t()  # non-contiguous, with values where the tails matter
    grad = make_cpu((33, 64), dtype, seed=1)
    cpu = x.clone().requires_grad_()
    activation(cpu).backward(grad)
    device = x.to(DEVICE).requires_grad_()
    activation(device).backward(grad.to(DEVICE))
    assert device.grad.stride() == cpu.grad.stride()
    assert torch.equal(device.grad.cpu(), cpu.grad)


def _assert_same(actual, expected):
    """Values bit for bit, dtype, shape and strides."""
    assert_matches(actual, expected, exact=True)
    actual_leaves, expected_leaves = tree_flatten(actual)[0], tree_flatten(expected)[0]
    for got, want in zip(actual_leaves, expected_leaves):
        if isinstance(want, torch.Tensor) and want.layout == torch.strided:
            assert got.stride() == want.stride(), f"strides {got.stride()}, expected {want.stride()}"


def _call(fn, parts):
    return fn(parts[0], *parts[1], **parts[2])


def _grads(op, sample, parts):
    result = sample.output_process_fn_grad(op.op(parts[0], *parts[1], **parts[2]))
    outputs = [t for t in tree_flatten(result)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
    inputs = [t for t in tree_flatten(parts)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
    generator = torch.Generator().manual_seed(0)
    grad_outputs = [torch.randn(o.shape, dtype=o.dtype, generator=generator).to(o.device) for o in outputs]
    return torch.autograd.grad(outputs, inputs, grad_outputs, allow_unused=True)


def _opinfo_cases(op):
    """(CPU call, openreg call) pairs over the OpInfo's samples: forward, out=, in-place, backward."""
    supported = op.supported_dtypes("cpu")
    for dtype in (d for d in OPINFO_DTYPES if d in supported):
        for sample in itertools.islice(op.sample_inputs("cpu", dtype), MAX_SAMPLES):
            parts = (sample.input, sample.args, sample.kwargs)
            yield (lambda p=parts: _call(op.op, p), lambda p=parts: _call(op.op, to_device(p)))
            if op.inplace_variant is not None and isinstance(sample.input, torch.Tensor):

                def in_place(p, move):
                    p = to_device(p) if move else p
                    target = p[0].clone()
                    return op.inplace_variant(target, *p[1], **p[2]), target

                yield (lambda p=parts: in_place(p, False), lambda p=parts: in_place(p, True))
            if op.supports_out:

                def with_out(p, move):
                    p = to_device(p) if move else p
                    template = op.op(p[0], *p[1], **p[2])
                    out = (
                        torch.zeros_like(template)
                        if isinstance(template, torch.Tensor)
                        else tuple(torch.zeros_like(t) for t in template)
                    )
                    return op.op(p[0], *p[1], **p[2], out=out), out

                yield (lambda p=parts: with_out(p, False), lambda p=parts: with_out(p, True))
        if op.supports_autograd and dtype in (torch.float32, torch.float64):
            for sample in itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=True), MAX_SAMPLES):
                parts = (sample.input, sample.args, sample.kwargs)
                yield (
                    lambda s=sample, p=parts: _grads(op, s, p),
                    lambda s=sample, p=parts: _grads(op, s, to_device(p)),
                )


def _opinfo(name):
    from torch.testing._internal.common_methods_invocations import op_db

    return next(op for op in op_db if op.full_name == name)


def _differential_cases(name):
    for opinfo_name in OPINFO_NAMES.get(name, []):
        yield from _opinfo_cases(_opinfo(opinfo_name))
    for fn, args in EXTRA_SAMPLES.get(name, []):
        yield (lambda fn=fn, args=args: fn(*args), lambda fn=fn, args=args: fn(*to_device(args)))


ROUTED_AND_KEPT = sorted(
    {c.name for c in composite_routing.candidates() if c.status in ("routed", "kept")} | ROUTED_FOR_OTHER_REASONS
)


def test_every_routed_or_kept_operator_has_samples():
    assert not [name for name in ROUTED_AND_KEPT if name not in OPINFO_NAMES and name not in EXTRA_SAMPLES]


@pytest.mark.slow
@pytest.mark.parametrize("name", ROUTED_AND_KEPT)
def test_results_equal_the_cpu_kernels(name):
    """Every sample bit for bit (strides included), and routed operators really reach the fallback."""
    torch.openreg.reset_fallback_stats()
    cases = 0
    for cpu_call, device_call in _differential_cases(name):
        torch.manual_seed(0)
        outcome = expect_same_outcome(cpu_call, device_call)
        if outcome is not None:
            _assert_same(outcome[1], outcome[0])
        cases += 1
    assert cases > 0
    if name not in composite_routing.KEPT_COMPOSITES:
        assert torch.openreg.fallback_stats().get(name, 0) > 0, f"no sample reached {name}"


def test_functional_tensor_iterator_operators_run_the_cpu_kernel():
    """The generated functional default would run the meta function over device tensors, where a
    TensorIterator orders the result's dimensions otherwise than over CPU tensors when it promotes an input
    (csrc/aten/StructuredDefaults.cpp): every such operator has an openreg kernel, the CPU's through the
    fallback, and only in-place and non-iterator operators keep the default."""
    entries = composite_routing.native_functions()
    iterator_functionals = set()
    for name, entry in entries.items():
        delegate = entries.get(entry.get("structured_delegate") or "", {})
        if delegate.get("structured_inherits") == "TensorIteratorBase":
            qualified = "aten::" + name
            base, _, overload = name.partition(".")
            if not getattr(getattr(torch.ops.aten, base), overload or "default")._schema.is_mutable:
                iterator_functionals.add(qualified)
    assert {
        "aten::bitwise_xor.Tensor",
        "aten::fmod.Tensor",
        "aten::glu",
        "aten::smooth_l1_loss",
    } <= iterator_functionals
    defaults = composite_routing.structured_defaults()
    assert not iterator_functionals & set(defaults), sorted(iterator_functionals & set(defaults))
    torch.openreg.reset_fallback_stats()
    torch.bitwise_xor(torch.ones(2, dtype=torch.uint8, device=DEVICE), torch.ones(2, dtype=torch.int32, device=DEVICE))
    stats = torch.openreg.fallback_stats()
    assert stats.get("aten::bitwise_xor.Tensor") == 1 and "aten::bitwise_xor.Tensor_out" not in stats
