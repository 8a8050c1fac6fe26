"""torch.utils.checkpoint on openreg: gradients equal the uncheckpointed run bit for bit.

Checkpointing enters torch.autocast(device_type) for the recomputation and
saves/restores the openreg generator through the device module, so dropout
replays the same mask.
"""

import copy
from functools import partial

import pytest
import torch
import torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import (
    CheckpointPolicy,
    DefaultDeviceType,
    checkpoint,
    checkpoint_sequential,
    create_selective_checkpoint_contexts,
)

from conftest import DEVICE, make_cpu

REENTRANT = pytest.mark.parametrize("use_reentrant", [True, False], ids=["reentrant", "non_reentrant"])


def _model(dropout=0.5):
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(8, 16), nn.Dropout(dropout), nn.Tanh(), nn.Linear(16, 16), nn.Dropout(dropout), nn.Linear(16, 4)
    ).to(DEVICE)


def _grads(model, run, seed=7):
    """Output and gradients (input's, then parameters') of ``run(model, x)``."""
    model.zero_grad()
    x = make_cpu((5, 8)).to(DEVICE).requires_grad_()
    torch.manual_seed(seed)
    out = run(model, x)
    out.float().square().sum().backward()
    return [out.detach().cpu(), x.grad.cpu()] + [p.grad.cpu() for p in model.parameters()]


def _assert_bitwise_equal(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype and torch.equal(a, e)


@REENTRANT
def test_dropout_is_replayed_exactly(use_reentrant):
    model = _model()
    plain = _grads(model, lambda m, x: m(x))
    ckpt = _grads(model, lambda m, x: checkpoint(m, x, use_reentrant=use_reentrant, preserve_rng_state=True))
    _assert_bitwise_equal(ckpt, plain)


@REENTRANT
def test_matches_the_same_run_on_cpu(use_reentrant):
    # Same seed -> same dropout masks on both devices (openreg's generator
    # draws as the CPU's does), so the checkpointed run equals the CPU's.
    model = _model()
    cpu_model = copy.deepcopy(model).cpu()
    dev = _grads(model, lambda m, x: checkpoint(m, x, use_reentrant=use_reentrant))
    cpu_model.zero_grad()
    x = make_cpu((5, 8)).requires_grad_()
    torch.manual_seed(7)
    out = checkpoint(cpu_model, x, use_reentrant=use_reentrant)
    out.square().sum().backward()
    _assert_bitwise_equal(dev, [out.detach(), x.grad] + [p.grad for p in cpu_model.parameters()])


@REENTRANT
def test_rng_state_is_saved_through_the_device_module(use_reentrant):
    # The forward pass draws, then the generator moves on before backward; the
    # recomputation must still see the forward pass's state.
    model = _model()

    def run(m, x):
        out = checkpoint(m, x, use_reentrant=use_reentrant)
        torch.rand(100, device=DEVICE)
        return out

    _assert_bitwise_equal(_grads(model, run), _grads(model, lambda m, x: m(x)))


def test_default_device_type_is_openreg():
    assert DefaultDeviceType.get_device_type() == DEVICE


@REENTRANT
def test_function_of_cpu_tensors_only(use_reentrant):
    # No input on a device: checkpoint uses the default device type (openreg)
    # for its autocast region; this failed before openreg had autocast.
    x = make_cpu((4,)).requires_grad_()
    checkpoint(lambda t: t.sin() * 2, x, use_reentrant=use_reentrant).sum().backward()
    assert torch.equal(x.grad, x.detach().cos() * 2)


@REENTRANT
def test_checkpoint_sequential(use_reentrant):
    model = _model()
    plain = _grads(model, lambda m, x: m(x))
    seq = _grads(model, lambda m, x: checkpoint_sequential(m, 3, x, use_reentrant=use_reentrant))
    _assert_bitwise_equal(seq, plain)


class _CountMatmuls(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default):
            self.count += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("save_matmuls", [True, False])
def test_selective_checkpointing(save_matmuls):
    model = _model()
    plain = _grads(model, lambda m, x: m(x))

    def policy(ctx, op, *args, **kwargs):
        if save_matmuls and op in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default):
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    counter = _CountMatmuls()

    def run(m, x):
        out = checkpoint(m, x, use_reentrant=False, context_fn=partial(create_selective_checkpoint_contexts, policy))
        counter.__enter__()
        return out

    try:
        selective = _grads(model, run)
    finally:
        counter.__exit__(None, None, None)
    _assert_bitwise_equal(selective, plain)
    # Backward of the three linears alone takes 6 matmuls (input and weight
    # gradients); saved matmuls are not recomputed, others are.
    if save_matmuls:
        assert counter.count == 6
    else:
        assert counter.count > 6


@REENTRANT
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_autocast_inside_the_checkpointed_function(use_reentrant, dtype):
    model = _model()

    def forward(x):
        with torch.autocast(DEVICE, dtype=dtype):
            return model(x)

    plain = _grads(model, lambda m, x: forward(x))
    ckpt = _grads(model, lambda m, x: checkpoint(forward, x, use_reentrant=use_reentrant))
    assert plain[0].dtype == dtype
    _assert_bitwise_equal(ckpt, plain)


@REENTRANT
def test_checkpoint_under_autocast_recomputes_with_the_same_casts(use_reentrant):
    model = _model()

    def run(m, x):
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            return checkpoint(m, x, use_reentrant=use_reentrant)

    def plain_run(m, x):
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            return m(x)

    ckpt, plain = _grads(model, run), _grads(model, plain_run)
    assert ckpt[0].dtype == torch.bfloat16
    _assert_bitwise_equal(ckpt, plain)


def _outcome(device, fn, use_reentrant):
    """What checkpointing ``fn`` does, with tensors reduced to dtype and shape."""
    x = make_cpu((3,)).to(device).requires_grad_()
    try:
        out = checkpoint(fn, x, use_reentrant=use_reentrant)
        outputs = out if isinstance(out, tuple) else (out,)
        tensors = [o for o in outputs if isinstance(o, torch.Tensor)]
        if tensors:
            torch.autograd.backward(tensors, [torch.ones_like(t) for t in tensors])
        return [(o.dtype, o.shape) if isinstance(o, torch.Tensor) else o for o in outputs]
    except Exception as e:  # the comparison is the point
        return (type(e), str(e))


@REENTRANT
@pytest.mark.parametrize(
    "fn",
    [
        lambda t: 3,  # a non-tensor result
        lambda t: (t.sin(), "label"),  # a non-tensor next to a tensor
        lambda t: t.detach() * 2,  # nothing to differentiate in the recomputation
    ],
    ids=["non_tensor", "mixed", "detached"],
)
def test_unusual_results_behave_as_on_cpu(fn, use_reentrant):
    expected = _outcome("cpu", fn, use_reentrant)
    assert _outcome(DEVICE, fn, use_reentrant) == expected


def test_detached_result_with_reentrant_checkpoint_is_pytorchs_error():
    x = make_cpu((3,)).to(DEVICE).requires_grad_()
    out = checkpoint(lambda t: t.detach() * 2, x, use_reentrant=True)
    with pytest.raises(RuntimeError, match="none of output has requires_grad=True"):
        out.sum().backward()
