"""Lazy initialization of openreg, as ``torch.cuda`` does it: the runtime
starts at first use (PyTorch calls ``_lazy_init`` before the first device
tensor), once per process, and never in a child forked after it started."""

import atexit
import sys
import threading
import time

from .. import _C

_initialized = False
_init_lock = threading.Lock()
# Calls made before initialization that must take effect at it (seeding).
_deferred_calls = []


def _is_in_bad_fork() -> bool:
    return _C._is_in_bad_fork()


def is_initialized() -> bool:
    """True once openreg has been initialized in this process."""
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
                "Cannot re-initialize openreg in forked subprocess. To use openreg with "
                "multiprocessing, you must use the 'spawn' start method."
            )
        from . import cuda_contract

        cuda_contract._register()
        _C._init()
        atexit.register(_let_autograd_device_threads_finish)
        # Like torch.cuda.default_generators, empty until initialization.
        sys.modules[__package__].default_generators = tuple(
            _C._default_generator(index) for index in range(_C._device_count())
        )
        _initialized = True
        for call in _deferred_calls:
            call()
        _deferred_calls.clear()
        if _C._sanitizer_option():  # OPENREG_SANITIZER=1: checking starts with the first device use
            from . import sanitizer

            sanitizer.enable()


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
