"""``torch.openreg``: the device module, shaped like ``torch.cuda``."""
import atexit
import threading
import time

import torch

from .. import _C
from ._utils import _get_device_index
from .memory import (
    empty_cache,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
)
from .streams import Event, Stream, StreamContext, current_stream, default_stream, set_stream, stream
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

__all__ = [
    "Event",
    "Stream",
    "StreamContext",
    "current_stream",
    "default_stream",
    "set_stream",
    "stream",
    "empty_cache",
    "fallback_stats",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "reset_accumulated_memory_stats",
    "reset_fallback_stats",
    "reset_peak_memory_stats",
    "current_device",
    "device",
    "device_count",
    "device_of",
    "get_rng_state",
    "get_rng_state_all",
    "init",
    "is_available",
    "initial_seed",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "seed_all",
    "set_device",
    "set_rng_state",
    "set_rng_state_all",
    "synchronize",
]

_initialized = False
_init_lock = threading.Lock()
# Calls made before initialization that must take effect at it (seeding).
_deferred_calls = []


def is_available() -> bool:
    """True if at least one openreg device can be used (never raises)."""
    return _C._device_count_non_throwing() > 0


def device_count() -> int:
    """Number of openreg devices (``OPENREG_DEVICE_COUNT``).

    As ``torch.cuda.device_count()``: 0 with a warning giving the reason when the runtime cannot start (an invalid
    ``OPENREG_*`` value); the first device use then raises it."""
    return _C._device_count()


def _is_in_bad_fork() -> bool:
    return _C._is_in_bad_fork()


def is_initialized() -> bool:
    return _initialized and not _is_in_bad_fork()


def _lazy_init() -> None:
    """Starts the runtime once; PyTorch calls this before the first device tensor."""
    global _initialized
    if is_initialized():
        return
    with _init_lock:
        if is_initialized():
            return
        if _is_in_bad_fork():
            raise RuntimeError(
                "Cannot re-initialize openreg in a forked subprocess. To use openreg with "
                "multiprocessing, you must use the 'spawn' start method."
            )
        _C._init()
        atexit.register(_let_autograd_device_threads_finish)
        _initialized = True
        for call in _deferred_calls:
            call()
        _deferred_calls.clear()


def _run_when_initialized(call) -> None:
    """Runs ``call`` now if openreg is initialized, else at initialization."""
    with _init_lock:
        if not is_initialized():
            _deferred_calls.append(call)
            return
    call()


def _let_autograd_device_threads_finish() -> None:
    # backward() stashes a Python object in the thread-local state that the
    # autograd device thread captures, and that thread may drop it (taking the
    # GIL) just after backward() returns. If the interpreter is finalizing by
    # then, the thread is killed mid-unwind and the process aborts. Releasing
    # the GIL once at exit lets such a thread finish first.
    time.sleep(0.01)


def init() -> None:
    """Initializes openreg explicitly (it is otherwise initialized at first use)."""
    _lazy_init()


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


def fallback_stats() -> dict[str, int]:
    """How many calls of each operator ran on the CPU fallback since the last
    reset (operators without an openreg kernel; see OPENREG_FALLBACK*)."""
    return _C._fallback_stats()


def reset_fallback_stats() -> None:
    _C._reset_fallback_stats()


def _set_tensor_tag(tensor: torch.Tensor, tag: int) -> None:
    """Attaches backend-private metadata (an integer tag) to an openreg tensor;
    it survives torch.save / torch.load onto openreg."""
    _C._set_tensor_tag(tensor, int(tag))


def _get_tensor_tag(tensor: torch.Tensor) -> int:
    """The tag set by ``_set_tensor_tag`` (0 if none)."""
    return _C._get_tensor_tag(tensor)


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
