"""The device check of the package's Python kernels and fake kernels, with PyTorch's message (the one CUDA raises
and the C++ kernels raise through ``device_mismatch`` in csrc/aten/DeviceCheck.h)."""

import torch


def check_same_device(op: str, tensor: torch.Tensor, other: torch.Tensor) -> None:
    torch._check(
        tensor.device == other.device,
        lambda: (
            f"Expected all tensors to be on the same device, but found at least two devices, {tensor.device} "
            f"and {other.device}! (when checking the arguments of {op})"
        ),
    )
