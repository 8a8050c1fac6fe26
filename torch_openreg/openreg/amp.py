"""``torch.openreg.amp``: automatic mixed precision, shaped like ``torch.cuda.amp``.

The operator policy (which operators run in float16/bfloat16, which in float32)
is CUDA's, registered in C++ for the AutocastPrivateUse1 dispatch key (see
docs/amp.md). Use ``torch.autocast("openreg")`` and ``torch.amp.GradScaler("openreg")``;
the names below are the deprecated ``torch.cuda.amp`` spellings, kept for code
written against them: they warn as ``torch.cuda.amp`` does and forward to
``torch.amp`` with ``device_type="openreg"``.
"""

import functools

import torch
from typing_extensions import deprecated

__all__ = ["GradScaler", "amp_definitely_not_available", "autocast", "custom_bwd", "custom_fwd"]


def get_amp_supported_dtype() -> list[torch.dtype]:
    """The lower-precision dtypes ``torch.autocast("openreg")`` accepts."""
    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """True if openreg is available: every openreg kernel supports bfloat16
    natively (``including_emulation`` is accepted for torch.cuda parity)."""
    from . import is_available

    return is_available()


def amp_definitely_not_available() -> bool:
    """True if no openreg device can be used (``torch.cuda.amp.amp_definitely_not_available`` for openreg)."""
    from . import is_available

    return not is_available()


@deprecated(
    "`torch.openreg.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('openreg', args...)` instead.",
    category=FutureWarning,
)
class autocast(torch.amp.autocast_mode.autocast):
    """See :class:`torch.autocast`; ``torch.autocast("openreg", ...)`` is the supported spelling."""

    def __init__(self, enabled: bool = True, dtype: torch.dtype = torch.float16, cache_enabled: bool = True):
        super().__init__("openreg", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


@deprecated(
    "`torch.openreg.amp.GradScaler(args...)` is deprecated. "
    "Please use `torch.amp.GradScaler('openreg', args...)` instead.",
    category=FutureWarning,
)
class GradScaler(torch.amp.GradScaler):
    """See :class:`torch.amp.GradScaler`; ``torch.amp.GradScaler("openreg", ...)`` is the supported spelling."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        super().__init__(
            "openreg",
            init_scale=init_scale,
            growth_factor=growth_factor,
            backoff_factor=backoff_factor,
            growth_interval=growth_interval,
            enabled=enabled,
        )


@deprecated(
    "`torch.openreg.amp.custom_fwd(args...)` is deprecated. "
    "Please use `torch.amp.custom_fwd(args..., device_type='openreg')` instead.",
    category=FutureWarning,
)
def custom_fwd(fwd=None, *, cast_inputs=None):
    """See :func:`torch.amp.custom_fwd`, with ``device_type="openreg"``."""
    return functools.partial(torch.amp.custom_fwd, device_type="openreg")(fwd=fwd, cast_inputs=cast_inputs)


@deprecated(
    "`torch.openreg.amp.custom_bwd(args...)` is deprecated. "
    "Please use `torch.amp.custom_bwd(args..., device_type='openreg')` instead.",
    category=FutureWarning,
)
def custom_bwd(bwd):
    """See :func:`torch.amp.custom_bwd`, with ``device_type="openreg"``."""
    return functools.partial(torch.amp.custom_bwd, device_type="openreg")(bwd)
