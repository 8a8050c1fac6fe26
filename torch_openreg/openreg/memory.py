"""Device memory of openreg, shaped like ``torch.cuda.memory``.

Every number comes from the caching allocator in C++ (through
``torch.accelerator.memory``, openreg being the current accelerator, or the
bindings in ``torch_openreg._C``); these functions accept openreg device
arguments the way ``torch.cuda`` does. Host (pinned) memory statistics come
from PyTorch's caching host allocator, which openreg's pinned memory uses.
Memory history and snapshots (``_memory_history.py``), private pools
(``_mem_pool.py``) and the pluggable allocator (``_pluggable_allocator.py``)
have modules of their own; this module exports their names too.
"""

import collections
import contextlib
import warnings
from typing import Any

import torch

from .. import _C
from ._mem_pool import MemPool, use_mem_pool
from ._memory_history import (
    _dump_snapshot,
    _record_memory_history,
    _route_accelerator_snapshot,
    _snapshot,
    memory_snapshot,
)
from ._pluggable_allocator import OpenRegPluggableAllocator, _OpenRegAllocator, change_current_allocator
from ._utils import _get_device_index

__all__ = [
    "MemPool",
    "OpenRegPluggableAllocator",
    "caching_allocator_alloc",
    "caching_allocator_delete",
    "caching_allocator_disabled",
    "caching_allocator_enable",
    "change_current_allocator",
    "empty_cache",
    "empty_host_cache",
    "get_allocator_backend",
    "get_per_process_memory_fraction",
    "host_memory_stats",
    "host_memory_stats_as_nested_dict",
    "max_memory_allocated",
    "max_memory_cached",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_cached",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_stats_as_nested_dict",
    "memory_summary",
    "reset_accumulated_host_memory_stats",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "reset_max_memory_cached",
    "reset_peak_host_memory_stats",
    "reset_peak_memory_stats",
    "set_per_process_memory_fraction",
    "use_mem_pool",
]


def _index(device) -> int:
    return _get_device_index(device, optional=True)


def empty_cache() -> None:
    """Returns the cached, unused device memory of every device to the runtime."""
    torch.accelerator.memory.empty_cache()


def memory_stats(device=None) -> collections.OrderedDict[str, Any]:
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
    """(free, total) bytes of the device, as the runtime sees them (``orMemGetInfo``):
    memory that the cache reserves counts as used, as with ``cudaMemGetInfo``."""
    return torch.accelerator.memory.get_memory_info(_index(device))


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    """{"a.b.c": v} -> {"a": {"b": {"c": v}}}."""
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        level = nested
        for parent in parents:
            level = level.setdefault(parent, {})
        level[leaf] = value
    return nested


def _flattened(nested: dict[str, Any], prefix: str = "") -> collections.OrderedDict[str, Any]:
    """The inverse of ``_nested``, keys sorted as ``torch.cuda`` sorts them."""
    items = []
    for key, value in nested.items():
        if isinstance(value, dict):
            items.extend(_flattened(value, prefix + key + ".").items())
        else:
            items.append((prefix + key, value))
    return collections.OrderedDict(sorted(items))


def memory_stats_as_nested_dict(device=None) -> dict[str, Any]:
    """``memory_stats`` as a nested dictionary (``stats["allocated_bytes"]["all"]["current"]``)."""
    return _nested(memory_stats(device))


def set_per_process_memory_fraction(fraction, device=None) -> None:
    """Caps the memory this process's allocator may reserve on ``device``
    (default: the current device) at ``fraction`` of its capacity; allocating
    past it raises ``torch.OutOfMemoryError``. The cap applies to memory the
    cache reserves (``memory_reserved``), as on CUDA."""
    index = _index(device)
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if not 0 < fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1 (0 excluded)")
    _C._set_memory_fraction(fraction, index)


def get_per_process_memory_fraction(device=None) -> float:
    """The fraction set by ``set_per_process_memory_fraction`` for ``device`` (1.0 if none)."""
    return _C._get_memory_fraction(_index(device))


def caching_allocator_alloc(size: int, device=None, stream=None) -> int:
    """Allocates ``size`` bytes from the caching allocator and returns the
    device address (0 for 0 bytes), for interoperability with other
    libraries; release it with ``caching_allocator_delete``. ``stream`` is a
    ``torch.openreg.Stream`` or a runtime stream handle (default: the current
    stream of ``device``); the block is cached for that stream once freed."""
    from .streams import ExternalStream, current_stream, default_stream

    index = _index(device)
    if stream is None:
        stream = current_stream(index)
    elif isinstance(stream, int):
        stream = default_stream(index) if stream == 0 else ExternalStream(stream, index)
    elif not isinstance(stream, torch.Stream) or stream.device.type != "openreg":
        raise TypeError(
            "Invalid type for stream argument, must be `torch.openreg.Stream` or `int` representing "
            f"an openreg runtime stream handle, got {stream!r}"
        )
    if stream.device_index != index:
        raise ValueError(
            f"caching_allocator_alloc: the stream is on openreg:{stream.device_index}, not openreg:{index}"
        )
    return _C._caching_allocator_alloc(size, index, stream.stream_id)


def caching_allocator_delete(mem_ptr: int) -> None:
    """Frees an address returned by ``caching_allocator_alloc``."""
    _C._caching_allocator_delete(mem_ptr)


def caching_allocator_enable(value: bool = True) -> None:
    """Turns the caching of freed device memory on (the default) or off, as
    ``torch.cuda.caching_allocator_enable``. While off, memory a tensor frees
    returns to the runtime at once (a segment as soon as none of its blocks is
    in use); turning it off empties the cache."""
    _C._set_caching_enabled(bool(value))


@contextlib.contextmanager
def caching_allocator_disabled():
    """Disables the caching allocator inside the ``with`` block (``caching_allocator_enable``)."""
    previous = _C._caching_enabled()
    caching_allocator_enable(False)
    try:
        yield
    finally:
        caching_allocator_enable(previous)


def get_allocator_backend() -> str:
    """``"native"``: openreg's own caching allocator (the only backend)."""
    return "native"


def empty_host_cache() -> None:
    """Returns the cached, unused pinned host memory to the runtime."""
    torch.accelerator.memory.empty_host_cache()


def host_memory_stats_as_nested_dict() -> dict[str, Any]:
    """``host_memory_stats`` as a nested dictionary."""
    return _C._host_memory_stats()


def host_memory_stats() -> collections.OrderedDict[str, Any]:
    """Statistics of the pinned host allocator, with ``torch.cuda``'s keys:
    ``allocations``, ``allocated_bytes``, ``active_requests``, ``active_bytes``
    (each ``.current/.peak/.allocated/.freed``), ``num_host_alloc``,
    ``num_host_free``, ``host_alloc_time`` and ``host_free_time``
    (``.total/.max/.min/.count/.avg``, microseconds)."""
    return _flattened(host_memory_stats_as_nested_dict())


def reset_accumulated_host_memory_stats() -> None:
    _C._reset_accumulated_host_memory_stats()


def reset_peak_host_memory_stats() -> None:
    _C._reset_peak_host_memory_stats()


def memory_cached(device=None) -> int:
    """Deprecated, as in ``torch.cuda``: ``memory_reserved``."""
    warnings.warn("torch.openreg.memory_cached has been renamed to torch.openreg.memory_reserved", FutureWarning)
    return memory_reserved(device)


def max_memory_cached(device=None) -> int:
    """Deprecated, as in ``torch.cuda``: ``max_memory_reserved``."""
    warnings.warn(
        "torch.openreg.max_memory_cached has been renamed to torch.openreg.max_memory_reserved", FutureWarning
    )
    return max_memory_reserved(device)


def reset_max_memory_allocated(device=None) -> None:
    """Deprecated, as in ``torch.cuda``: ``reset_peak_memory_stats`` (which resets every peak)."""
    warnings.warn(
        "torch.openreg.reset_max_memory_allocated now calls torch.openreg.reset_peak_memory_stats, "
        "which resets /all/ peak memory stats.",
        FutureWarning,
    )
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device=None) -> None:
    """Deprecated, as in ``torch.cuda``: ``reset_peak_memory_stats`` (which resets every peak)."""
    warnings.warn(
        "torch.openreg.reset_max_memory_cached now calls torch.openreg.reset_peak_memory_stats, "
        "which resets /all/ peak memory stats.",
        FutureWarning,
    )
    reset_peak_memory_stats(device)


# memory_summary's table: torch.cuda's layout (75 columns; rows per metric for
# all / large pool / small pool), labelled for openreg.
_SUMMARY_POOL_METRICS = [
    ("allocated_bytes", "Allocated memory", True),
    ("active_bytes", "Active memory", True),
    ("requested_bytes", "Requested memory", True),
    ("reserved_bytes", "Device reserved mem", True),
    ("inactive_split_bytes", "Non-releasable memory", True),
    ("allocation", "Allocations", False),
    ("active", "Active allocs", False),
    ("segment", "Device reserved segs", False),
    ("inactive_split", "Non-releasable allocs", False),
]
_SUMMARY_OVERSIZE_METRICS = [
    ("oversize_allocations", "Oversize allocations"),
    ("oversize_segments", "Oversize device segs"),
]


def _summary_size(value: int, scale_by: int) -> str:
    # The unit is chosen from the row's first value, so a row shares a unit.
    units = ["B  ", "KiB", "MiB", "GiB", "TiB", "PiB"]
    unit = 0
    while unit + 1 < len(units) and scale_by >= 768 * 1024:
        value //= 1024
        scale_by /= 1024
        unit += 1
    return f"{value:6d} {units[unit]}"


def _summary_count(value: int, scale_by: int) -> str:
    units = [" ", "K", "M"]
    unit = 0
    while unit + 1 < len(units) and scale_by >= 750 * 1000:
        value //= 1000
        scale_by /= 1000
        unit += 1
    return f"{value:7d} {units[unit]} "


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A human-readable table of the allocator's statistics for ``device``
    (default: the current device), laid out as ``torch.cuda.memory_summary``'s;
    ``abbreviated`` leaves out the per-pool rows."""
    index = _index(device)
    stats = memory_stats(index)
    rule, double_rule = "-" * 75, "=" * 75
    lines = [
        double_rule,
        f" {'':16} PyTorch openreg memory summary, device ID {index:<14d} ",
        rule,
        f"  {'':6} openreg OOMs: {stats['num_ooms']:<12d} | {'':6} orMalloc retries: {stats['num_alloc_retries']:<10d}  ",
        double_rule,
        "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ",
    ]
    pools = (
        [("all", None)]
        if abbreviated
        else [("all", None), ("large_pool", "from large pool"), ("small_pool", "from small pool")]
    )
    for key, label, is_size in _SUMMARY_POOL_METRICS:
        formatter = _summary_size if is_size else _summary_count
        lines.append(rule)
        first = None
        for pool, pool_label in pools:
            values = [stats[f"{key}.{pool}.{field}"] for field in ("current", "peak", "allocated", "freed")]
            first = first or values  # the "all" row's values pick the units of every row
            cells = " | ".join(formatter(value, scale) for value, scale in zip(values, first))
            lines.append(f" {label if pool_label is None else '      ' + pool_label:<21} | {cells} ")
    for key, label in _SUMMARY_OVERSIZE_METRICS:
        lines.append(rule)
        values = [stats[f"{key}.{field}"] for field in ("current", "peak", "allocated", "freed")]
        cells = " | ".join(_summary_count(value, value) for value in values)
        lines.append(f" {label:<21} | {cells} ")
    lines.append(double_rule)
    return "|" + "|\n|".join(lines) + "|\n"
