"""``torch.openreg``: the device module, shaped like ``torch.cuda``.

Public names are exactly ``__all__``; docs/cuda-parity.md maps every public
name of ``torch.cuda`` to its openreg counterpart or says why there is none.
"""

from .. import _C
from . import _gpu_trace, amp, cuda_contract, graphs, memory, profiler, random, sanitizer, streams  # noqa: F401 (_gpu_trace: see there)
from ._device_properties import get_device_capability, get_device_name, get_device_properties
from ._initialization import _is_in_bad_fork, _lazy_init, _run_when_initialized, init, is_initialized
from .amp import get_amp_supported_dtype, is_bf16_supported
from .graphs import OpenRegGraph, graph, graph_pool_handle, is_current_stream_capturing, make_graphed_callables
from ._utils import _get_device_index
from .memory import (
    MemPool,
    OpenRegPluggableAllocator,
    caching_allocator_alloc,
    caching_allocator_delete,
    caching_allocator_disabled,
    caching_allocator_enable,
    change_current_allocator,
    empty_cache,
    empty_host_cache,
    get_allocator_backend,
    get_per_process_memory_fraction,
    host_memory_stats,
    host_memory_stats_as_nested_dict,
    max_memory_allocated,
    max_memory_cached,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_cached,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_stats_as_nested_dict,
    memory_summary,
    reset_accumulated_host_memory_stats,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_max_memory_cached,
    reset_peak_host_memory_stats,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
    use_mem_pool,
)
from .random import (
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from ._typed_storages import STORAGE_CLASSES as _STORAGE_CLASSES
from .streams import (
    Event,
    ExternalStream,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    get_stream_from_external,
    set_stream,
    stream,
)

__all__ = [
    # device management
    "current_device",
    "device",
    "device_count",
    "device_of",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "init",
    "ipc_collect",
    "is_available",
    "is_initialized",
    "is_tf32_supported",
    "set_device",
    "synchronize",
    "get_sync_debug_mode",
    "set_sync_debug_mode",
    # streams and events
    *streams.__all__,
    # memory
    *memory.__all__,
    # graphs
    *graphs.__all__,
    # random numbers
    *random.__all__,
    "default_generators",
    # mixed precision
    "get_amp_supported_dtype",
    "is_bf16_supported",
    # CPU fallback accounting
    "fallback_stats",
    "reset_fallback_stats",
    # legacy typed storages (FloatStorage, ...)
    *_STORAGE_CLASSES,
    # submodules
    "amp",
    "cuda_contract",
    "graphs",
    "memory",
    "profiler",
    "random",
    "sanitizer",
    "streams",
]

globals().update(_STORAGE_CLASSES)

# The default torch.Generator of each device; filled at initialization, as
# torch.cuda.default_generators is.
default_generators: tuple = ()


def is_available() -> bool:
    """True if at least one openreg device can be used (never raises)."""
    return _C._device_count_non_throwing() > 0


def device_count() -> int:
    """Number of openreg devices (``OPENREG_DEVICE_COUNT``).

    As ``torch.cuda.device_count()``: 0 with a warning giving the reason when the runtime cannot start (an invalid
    ``OPENREG_*`` value); the first device use then raises it."""
    return _C._device_count()


def current_device() -> int:
    _lazy_init()
    return _C._current_device()


def set_device(device) -> None:
    """Sets the current device of this thread; a negative index is ignored, as in torch.cuda."""
    index = _get_device_index(device)
    if index >= 0:
        _lazy_init()
        _C._set_device(index)


def synchronize(device=None) -> None:
    """Waits for all work queued on ``device`` (default: the current device)."""
    _lazy_init()
    _C._synchronize(_get_device_index(device, optional=True))


def set_sync_debug_mode(debug_mode) -> None:
    """Reports calls that make the host wait for the device, as
    ``torch.cuda.set_sync_debug_mode``: ``"default"``/0 (off), ``"warn"``/1 (a
    warning each time) or ``"error"``/2 (a RuntimeError). Reported: ``item()``
    and other reads into host memory (``.cpu()``, synchronous copies to the
    CPU), operators whose result size depends on device data (``nonzero``,
    ``masked_select``, ``unique``, ``repeat_interleave``), and explicit
    synchronization (``synchronize()``, ``Stream.synchronize()``)."""
    if isinstance(debug_mode, str):
        modes = {"default": 0, "warn": 1, "error": 2}
        if debug_mode not in modes:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
        debug_mode = modes[debug_mode]
    _C._set_sync_debug_mode(debug_mode)


def get_sync_debug_mode() -> int:
    """The mode set by ``set_sync_debug_mode``: 0 (off), 1 (warn) or 2 (error)."""
    return _C._get_sync_debug_mode()


def ipc_collect() -> None:
    """Frees the device memory of openreg tensors this process sent to other
    processes, freed here, and since released by every receiver (as
    ``torch.cuda.ipc_collect``). It also happens whenever such a tensor is
    freed; see docs/multiprocessing.md."""
    if is_initialized():
        _C._ipc_collect()


def is_tf32_supported() -> bool:
    """False: openreg computes float32 matrix products in full float32 on the
    host; there is no TensorFloat-32 mode to switch to."""
    return False


def fallback_stats() -> dict[str, int]:
    """How many calls of each operator ran on the CPU fallback since the last
    reset (operators without an openreg kernel; see OPENREG_FALLBACK*)."""
    return _C._fallback_stats()


def reset_fallback_stats() -> None:
    _C._reset_fallback_stats()


class device:
    """Context manager that makes ``device`` current, then restores the previous one."""

    def __init__(self, device):
        self.idx = _get_device_index(device, optional=True)
        self.prev_idx = -1

    def __enter__(self):
        _lazy_init()
        self.prev_idx = _C._exchange_device(self.idx)

    def __exit__(self, *exc_info):
        self.idx = _C._exchange_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the device of ``obj`` (a tensor) current."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_openreg else -1)


def __getattr__(name):
    # torch.utils.checkpoint decides whether to save and replay the device's RNG
    # state from getattr(device_module, "_initialized", False), a module global
    # in torch.cuda; here the flag lives in _initialization.
    if name == "_initialized":
        return is_initialized()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
