"""The stream-order sanitizer: every missing synchronization reported, every run (docs/sanitizer.md).

While it is on:

- every operator on openreg tensors is checked against the streams that last used its tensors: reading what another
  stream wrote, or writing what another stream used, without an event wait, ``wait_stream`` or synchronization in
  between raises ``SynchronizationErrors`` naming the operator, both streams, the tensor and both stack traces
  (PyTorch's CUDA sanitizer, reused);
- a block freed while another stream may still use it (no ``record_stream``, no synchronization) is reported when
  the allocator hands any of its memory out again;
- a wait on an event that was never recorded raises;
- an operator that reads a tensor allocated uninitialized (``torch.empty``, ``empty_like``, ``new_empty``) before
  anything wrote it raises ``UninitializedReads`` naming the operator, the argument and the allocation's stack; every
  block the allocator hands out holds poison (NaN, or -1 for integers) until written;
- asynchronous copies complete only when the host synchronizes with them (stream, event or device synchronization,
  or work that depends on them; a query answers False once, then completes them and answers True): until then the destination of a ``non_blocking``
  device-to-host copy holds poison (NaN, or -1 for integers), and a host write into the source of a ``non_blocking``
  host-to-device copy before it completed makes that synchronization raise.

Turn it on with ``OPENREG_SANITIZER=1`` (from the first use of the device), ``enable()``, or ``with enabled():``. The
sanitizer is one per process, and so are its completion checks; its operator checks cover each thread that turned it on
(a dispatch mode is per thread; backward passes of openreg tensors run on that thread too). ``disable()``, from any
thread, turns every part off. Off, it costs nothing: each trace point in C++ is one relaxed atomic load.
"""

import contextlib
import threading

from torch.utils._python_dispatch import _get_current_dispatch_mode

from .. import _C

__all__ = [
    "SanitizerErrors",
    "SynchronizationErrors",
    "UninitializedReads",
    "disable",
    "enable",
    "enabled",
    "is_enabled",
]

_lock = threading.Lock()  # enable() and disable() from several threads
_checker = None  # the process's checker while the sanitizer is on
_this_thread = threading.local()  # .mode: the dispatch mode this thread entered, once it has


class SanitizerErrors(RuntimeError):
    """What the sanitizer found at one operator; ``errors`` lists each, the message shows each."""

    _what = "error(s)"

    def __init__(self, errors) -> None:
        self.errors = list(errors)
        super().__init__(f"openreg sanitizer: {len(self.errors)} {self._what}")

    def __str__(self) -> str:  # formatted when shown: each error carries stack traces
        return "\n".join([super().__str__(), *map(str, self.errors)])


class SynchronizationErrors(SanitizerErrors):
    """The synchronization errors an operator ran into."""

    _what = "synchronization error(s)"


class UninitializedReads(SanitizerErrors):
    """An operator read memory that nothing had written since it was allocated, one error per storage."""

    _what = "read(s) of uninitialized memory"


def _raise_errors(synchronization: list, uninitialized: list) -> None:
    """Raises what one operator ran into, as the kind it is (SanitizerErrors if both)."""
    if synchronization and uninitialized:
        raise SanitizerErrors(synchronization + uninitialized)
    if synchronization:
        raise SynchronizationErrors(synchronization)
    if uninitialized:
        raise UninitializedReads(uninitialized)


def is_enabled() -> bool:
    """Whether the sanitizer checks the calling thread's operators."""
    mode = getattr(_this_thread, "mode", None)
    return mode is not None and mode.checker is _checker


def enable() -> None:
    """Checks the calling thread's operators from now on, turning the sanitizer on if it is off (see the module's
    documentation); a no-op if they already are."""
    global _checker
    with _lock:
        if is_enabled():
            return
        # A mode left by a disable() from another thread passes operators through; it goes once this thread can pop it.
        _leave_mode()
        # Imported here: PyTorch's CUDA sanitizer module switches PyTorch's GPU trace on when imported.
        from ._stream_order import StreamOrderChecker, StreamOrderMode

        if _checker is None:
            _C._set_sanitizer_enabled(True)
            _checker = StreamOrderChecker()
            _checker.listen()
        mode = StreamOrderMode(_checker)
        mode.__enter__()
        _this_thread.mode = mode


def disable() -> None:
    """Turns the sanitizer off, in every thread, whichever thread calls it; asynchronous work pending under it is
    released. A thread checked apart from the caller keeps its dispatch mode, which passes operators through from then on
    (a thread's mode stack is its own)."""
    global _checker
    with _lock:
        _check_mode_on_top()
        checker, _checker = _checker, None
        if checker is not None:
            _C._set_sanitizer_enabled(False)
            checker.stop_listening()
        _leave_mode()


@contextlib.contextmanager
def enabled():
    """Checks the calling thread's operators inside the ``with`` block; after it, what was on before is on again and
    nothing else: the sanitizer goes off if it was off, else this thread's checks go if it was not checked."""
    was_on = _checker is not None
    was_checked = is_enabled()
    enable()
    try:
        yield
    finally:
        if not was_on:
            disable()
        elif not was_checked:
            with _lock:
                _check_mode_on_top()
                _leave_mode()


def _check_mode_on_top() -> None:
    """Refuses, before anything changes, to pop this thread's mode from under another one."""
    mode = getattr(_this_thread, "mode", None)
    top = _get_current_dispatch_mode()
    if mode is not None and mode.checker is _checker and top is not mode:
        raise RuntimeError(
            f"torch.openreg.sanitizer: this thread entered the dispatch mode {type(top).__name__} after enabling the "
            "sanitizer and is still in it; exit that mode before turning the sanitizer off"
        )


def _leave_mode() -> None:
    """Pops this thread's mode if it is on top of the thread's mode stack (else it stays there, passing through)."""
    mode = getattr(_this_thread, "mode", None)
    if mode is not None and _get_current_dispatch_mode() is mode:
        mode.__exit__(None, None, None)
        _this_thread.mode = None
