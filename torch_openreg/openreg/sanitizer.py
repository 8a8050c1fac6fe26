"""The stream-order sanitizer: every missing synchronization reported, every run (docs/sanitizer.md).

While it is on:

- every operator on openreg tensors is checked against the streams that last used its tensors: reading what another
  stream wrote, or writing what another stream used, without an event wait, ``wait_stream`` or synchronization in
  between raises ``SynchronizationErrors`` naming the operator, both streams, the tensor and both stack traces
  (PyTorch's CUDA sanitizer, reused);
- a block freed while another stream may still use it (no ``record_stream``, no synchronization) is reported when
  the allocator hands it out again;
- a wait on an event that was never recorded raises;
- asynchronous copies complete only when the host synchronizes with them (stream, event or device synchronization,
  or work that depends on them; a query answers False once, then completes them and answers True): until then the destination of a ``non_blocking``
  device-to-host copy holds poison (NaN, or -1 for integers), and a host write into the source of a ``non_blocking``
  host-to-device copy before it completed makes that synchronization raise.

Turn it on with ``OPENREG_SANITIZER=1`` (from the first use of the device), ``enable()``, or ``with enabled():``. Checking
covers the thread that turned it on (a dispatch mode is per thread; backward passes of openreg tensors run on it too).
Off, it costs nothing: each trace point in C++ is one relaxed atomic load.
"""

import contextlib

from .. import _C

__all__ = ["SynchronizationErrors", "disable", "enable", "enabled", "is_enabled"]

_checking = None  # (checker, dispatch mode) while on


class SynchronizationErrors(RuntimeError):
    """The synchronization errors an operator ran into; ``errors`` lists them, the message shows each."""

    def __init__(self, errors) -> None:
        self.errors = list(errors)
        super().__init__(f"openreg sanitizer: {len(self.errors)} synchronization error(s)")

    def __str__(self) -> str:  # formatted when shown: each error carries stack traces
        return "\n".join([super().__str__(), *map(str, self.errors)])


def is_enabled() -> bool:
    """Whether the sanitizer is checking."""
    return _checking is not None


def enable() -> None:
    """Starts checking (see the module's documentation); a no-op if it already is."""
    global _checking
    if _checking is not None:
        return
    # Imported here: PyTorch's CUDA sanitizer module switches PyTorch's GPU trace on when imported.
    from ._stream_order import StreamOrderChecker, StreamOrderMode

    checker = StreamOrderChecker()
    mode = StreamOrderMode(checker)
    checker.listen()
    _C._set_sanitizer_enabled(True)
    mode.__enter__()
    _checking = (checker, mode)


def disable() -> None:
    """Stops checking; asynchronous work pending under it is released."""
    global _checking
    if _checking is None:
        return
    checker, mode = _checking
    _checking = None
    mode.__exit__(None, None, None)
    _C._set_sanitizer_enabled(False)
    checker.stop_listening()


@contextlib.contextmanager
def enabled():
    """Checks the code inside the ``with`` block (and restores the previous state after it)."""
    was_enabled = is_enabled()
    enable()
    try:
        yield
    finally:
        if not was_enabled:
            disable()
