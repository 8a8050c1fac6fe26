"""Device memory of openreg, shaped like ``torch.cuda.memory``.

Every number comes from the caching allocator in C++ through
``torch.accelerator.memory`` (openreg being the current accelerator); these
functions only accept openreg device arguments the way ``torch.cuda`` does.
"""
from collections import OrderedDict
from typing import Any

import torch

from ._utils import _get_device_index

__all__ = [
    "empty_cache",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
]


def _index(device) -> int:
    return _get_device_index(device, optional=True)


def empty_cache() -> None:
    """Returns the cached, unused device memory of every device to the runtime."""
    torch.accelerator.memory.empty_cache()


def memory_stats(device=None) -> OrderedDict[str, Any]:
    """The allocator's statistics for ``device``, with CUDA's key names
    (``allocated_bytes.all.current``, ``reserved_bytes.large_pool.peak``, ``num_ooms``, ...)."""
    return torch.accelerator.memory.memory_stats(_index(device))


def memory_allocated(device=None) -> int:
    return torch.accelerator.memory.memory_allocated(_index(device))


def max_memory_allocated(device=None) -> int:
    return torch.accelerator.memory.max_memory_allocated(_index(device))


def memory_reserved(device=None) -> int:
    return torch.accelerator.memory.memory_reserved(_index(device))


def max_memory_reserved(device=None) -> int:
    return torch.accelerator.memory.max_memory_reserved(_index(device))


def reset_peak_memory_stats(device=None) -> None:
    torch.accelerator.memory.reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device=None) -> None:
    torch.accelerator.memory.reset_accumulated_memory_stats(_index(device))


def mem_get_info(device=None) -> tuple[int, int]:
    """(free, total) bytes of the device, as the runtime sees them."""
    return torch.accelerator.memory.get_memory_info(_index(device))
