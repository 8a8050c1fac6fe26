"""The layout fake tensors predict for an openreg convolution: the CPU's.

FakeTensor's rule for convolutions (``conv`` in
``torch/_subclasses/fake_impls.py``) predicts the output memory format from
the backend ``torch._C._select_conv_backend`` picks and
``torch._C._conv_determine_backend_memory_format``. For a PrivateUse1 tensor
the backend is ``Overrideable``, whose format is channels-last only for XPU
tensors, so the prediction is always contiguous. openreg's
``convolution_overrideable`` and ``convolution_backward_overrideable``
(``csrc/aten/Convolution.cpp``) run the CPU's convolution on host views and
return its layout: channels-last outputs (and gradients) for channels-last
inputs or weights, exactly as on the CPU. A compiled graph's stride checks
compare the two, and Inductor's layout optimization (channels-last
convolutions, ``overrides.py``) depends on them agreeing.

So for openreg tensors the rule runs on CPU fake tensors of the same sizes,
strides and dtype, and the openreg results take the strides it predicts.
Every other device keeps FakeTensor's own rule.

Installed once, when torch_openreg is imported (registration.py).
"""

import functools

import torch
from torch._subclasses import fake_impls
from torch.utils._pytree import tree_map

_DEVICE = "openreg"

_aten = torch.ops.aten
_CONVOLUTIONS = (
    _aten.convolution.default,
    _aten._convolution.default,
    _aten._convolution.deprecated,
    _aten.convolution_backward.default,
)


def _openreg_device(args, kwargs):
    for value in (*args, *kwargs.values()):
        device = getattr(value, "fake_device", None)  # FakeTensor arguments
        if device is not None and device.type == _DEVICE:
            return device
    return None


def _cpu_layout_for_openreg(fake_rule):
    @functools.wraps(fake_rule)
    def fake_rule_openreg(fake_mode, func, *args, **kwargs):
        device = _openreg_device(args, kwargs)
        if device is None:
            return fake_rule(fake_mode, func, *args, **kwargs)

        def like(tensor, on):
            if not isinstance(tensor, torch.Tensor):
                return tensor
            # Fake tensors (no storage) of the same metadata: the layout rules
            # read sizes, strides and dtype, not the storage offset.
            with fake_mode:
                return torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype, device=on)

        cpu_args, cpu_kwargs = tree_map(lambda value: like(value, "cpu"), (args, kwargs))
        on_cpu = fake_rule(fake_mode, func, *cpu_args, **cpu_kwargs)
        return tree_map(lambda value: like(value, device), on_cpu)

    return fake_rule_openreg


@functools.cache
def install() -> None:
    for op in _CONVOLUTIONS:
        fake_impls.op_implementations_dict[op] = _cpu_layout_for_openreg(fake_impls.op_implementations_dict[op])
