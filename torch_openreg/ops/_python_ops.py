"""The kernels of the custom operators written in Python, namespace
``openreg_py``.

operators.yaml declares each operator (schema, tags) and names its functions
here; ``_registration`` makes them a ``torch.library.custom_op`` at import.
Each has a CPU kernel and an openreg kernel (the dispatcher picks one by the
device of the tensors), a fake kernel for tracing, and accurate aliasing: the
functional operator returns a fresh tensor; the mutable one declares what it
mutates with ``(a0!)`` in its schema, which is what lets torch.compile
functionalize it.

The openreg kernels call PyTorch operators on the openreg tensors, which the
backend runs on the device; a vendor's kernel would call its device library
there. Both kernels of an operator share their arithmetic so that the devices
agree bit for bit.
"""

import torch
from torch import Tensor
from ._device_check import check_same_device


def _check_floating(op: str, x: Tensor) -> None:
    torch._check(
        x.dtype.is_floating_point, lambda: f"{op}: expected a floating-point tensor, but got {x.dtype} on {x.device}"
    )


# smooth_clamp: a differentiable clamp to [lo, hi],
#   lo + softplus(x - lo) - softplus(x - hi),
# close to clamp(x, lo, hi) away from the bounds, smooth at them.


def _check_smooth_clamp(x: Tensor, lo: float, hi: float) -> None:
    _check_floating("openreg_py::smooth_clamp", x)
    torch._check(lo < hi, lambda: f"openreg_py::smooth_clamp: expected lo < hi, but got lo={lo}, hi={hi}")


def _smooth_clamp(x: Tensor, lo: float, hi: float) -> Tensor:
    _check_smooth_clamp(x, lo, hi)
    return lo + torch.nn.functional.softplus(x - lo) - torch.nn.functional.softplus(x - hi)


def smooth_clamp_cpu(x: Tensor, lo: float, hi: float) -> Tensor:
    return _smooth_clamp(x, lo, hi)


def smooth_clamp_openreg(x: Tensor, lo: float, hi: float) -> Tensor:
    # A device kernel runs with its tensors' device current, as CUDA kernels do:
    # whatever it allocates without naming a device lands there, not on openreg:0.
    with torch.openreg.device(x.device):
        return _smooth_clamp(x, lo, hi)


def smooth_clamp_fake(x: Tensor, lo: float, hi: float) -> Tensor:
    _check_smooth_clamp(x, lo, hi)
    return torch.empty_like(x)


def smooth_clamp_setup_context(ctx, inputs, output) -> None:
    x, lo, hi = inputs
    ctx.save_for_backward(x)
    ctx.lo, ctx.hi = lo, hi


def smooth_clamp_backward(ctx, grad: Tensor):
    # d/dx [softplus(x - lo) - softplus(x - hi)] = sigmoid(x - lo) - sigmoid(x - hi)
    (x,) = ctx.saved_tensors
    return grad * (torch.sigmoid(x - ctx.lo) - torch.sigmoid(x - ctx.hi)), None, None


# accumulate_: acc += alpha * x, in place. Mutates acc, returns nothing.


def _check_accumulate(acc: Tensor, x: Tensor) -> None:
    op = "openreg_py::accumulate_"
    check_same_device(op, acc, x)
    torch._check(
        acc.dtype == x.dtype, lambda: f"{op}: expected acc and x of one dtype, but got {acc.dtype} and {x.dtype}"
    )
    torch._check(
        torch.broadcast_shapes(acc.shape, x.shape) == acc.shape,
        lambda: f"{op}: x of shape {tuple(x.shape)} does not broadcast to acc of shape {tuple(acc.shape)}",
    )


def accumulate_cpu(acc: Tensor, x: Tensor, alpha: float) -> None:
    _check_accumulate(acc, x)
    acc.add_(x, alpha=alpha)


def accumulate_openreg(acc: Tensor, x: Tensor, alpha: float) -> None:
    _check_accumulate(acc, x)
    with torch.openreg.device(acc.device):
        acc.add_(x, alpha=alpha)


def accumulate_fake(acc: Tensor, x: Tensor, alpha: float) -> None:
    _check_accumulate(acc, x)
