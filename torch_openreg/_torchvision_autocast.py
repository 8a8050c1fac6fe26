"""torchvision's operators under ``torch.autocast("openreg")``, as under ``autocast("cuda")``.

torchvision gives its operators autocast kernels for CUDA, the CPU and XPU (in
C++ up to 0.28, in Python from 0.29), never for PrivateUse1: under openreg's
autocast they would run on mixed dtypes (``roi_align`` on bfloat16 features and
float32 boxes raises). openreg registers CUDA's policy for all six: floating
inputs other than float64 run in float32 (``at::autocast::cached_cast(kFloat,
...)``), and every result comes back in the first input's dtype, except
``nms``'s indices.

Registered at import when torchvision is installed, usually before torchvision
itself is imported: the dispatcher keeps kernels for operators whose schema is
defined later.
"""

import importlib.util

import torch

_DEVICE = torch._C._get_privateuse1_backend_name()
_AUTOCAST = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)

# operator -> whether its results come back in the input's dtype
_OPERATORS = {
    "nms": False,
    "roi_align": True,
    "roi_pool": True,
    "ps_roi_align": True,
    "ps_roi_pool": True,
    "deform_conv2d": True,
}

_library = None  # the registrations live as long as this object


def _float32(value):
    """What ``cached_cast(at::kFloat, value, PrivateUse1)`` does to one argument."""
    eligible = (
        isinstance(value, torch.Tensor)
        and value.is_floating_point()
        and value.dtype != torch.float64
        and value.device.type == _DEVICE
    )
    return value.float() if eligible else value


def _autocast_kernel(name, cast_back):
    def kernel(*args):
        with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST):
            result = getattr(torch.ops.torchvision, name)(*map(_float32, args))
        if not cast_back:
            return result
        dtype = args[0].dtype
        return tuple(r.to(dtype) for r in result) if isinstance(result, tuple) else result.to(dtype)

    kernel.__name__ = f"{name}_autocast_{_DEVICE}"
    return kernel


def register() -> None:
    global _library
    if _library is not None or importlib.util.find_spec("torchvision") is None:
        return
    _library = torch.library.Library("torchvision", "IMPL")
    for name, cast_back in _OPERATORS.items():
        _library.impl(name, _autocast_kernel(name, cast_back), "AutocastPrivateUse1")
