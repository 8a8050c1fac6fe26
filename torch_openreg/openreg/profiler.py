"""Device range markers, the openreg counterpart of ``torch.cuda.nvtx``.

A range is a named interval of a stream's timeline: it opens when the current
stream of ``device`` reaches ``range_push`` and closes when that stream reaches
the matching ``range_pop`` (at once when nothing is queued on it). While
``torch.profiler`` records openreg activity (``ProfilerActivity.PrivateUse1``),
each range shows in the trace on that stream's row, above the kernels and
copies it spans, and in ``key_averages()`` as a device event. Without a
profiler recording, ranges cost a push and a pop on a per-thread stack.

Ranges nest per thread: ``range_pop`` closes the innermost range this thread
opened, on the stream it was opened on.
"""

import contextlib

from .. import _C
from ._initialization import _lazy_init
from ._utils import _get_device_index

__all__ = ["mark", "range", "range_pop", "range_push"]


def range_push(msg: str, device=None) -> None:
    """Opens a range named ``msg`` on the current stream of ``device`` (default: the current device)."""
    _lazy_init()
    _C._range_push(msg, _get_device_index(device, optional=True))


def range_pop() -> None:
    """Closes the innermost range this thread opened; raises RuntimeError if none is open."""
    _C._range_pop()


def mark(msg: str, device=None) -> None:
    """A range closed as soon as it opens: a point on the current stream of ``device``."""
    range_push(msg, device)
    range_pop()


@contextlib.contextmanager
def range(msg: str, device=None):  # noqa: A001 (torch.cuda.nvtx's name)
    """``with range(msg):`` brackets the block with ``range_push`` / ``range_pop``."""
    range_push(msg, device)
    try:
        yield
    finally:
        range_pop()
