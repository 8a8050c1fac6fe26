"""Private pools of the caching allocator, as ``torch.cuda.MemPool`` and
``torch.cuda.use_mem_pool`` (csrc/runtime/OpenRegMemPool.cpp). Exported by
``torch.openreg.memory``.
"""

import contextlib
import sys
from typing import Any

import torch

from .. import _C
from ._memory_history import memory_snapshot
from ._utils import _get_device_index


class MemPool:
    """A private pool of the caching allocator, as ``torch.cuda.MemPool``.

    Allocations inside ``use_mem_pool(pool)`` come from the pool's own blocks
    (never from the default pool's, nor serve allocations outside it). The pool
    lives on the device current when it is created; once it is deleted and no
    ``use_mem_pool`` uses it, its memory returns to the runtime as soon as the
    tensors allocated from it are freed. ``no_split=True`` gives every
    allocation a segment of its own. ``allocator`` (a pluggable allocator) and
    ``use_on_oom`` are not supported by openreg."""

    def __init__(self, allocator=None, use_on_oom: bool = False, no_split: bool = False):
        if allocator is not None:
            raise NotImplementedError(
                "openreg MemPool: pluggable allocators are not supported (allocator must be None)"
            )
        if use_on_oom:
            raise NotImplementedError("openreg MemPool: use_on_oom=True is not supported")
        self._id = _C._mempool_new_id(True)
        self._device = torch.openreg.current_device()
        _C._mempool_retain(self._device, self._id, bool(no_split))

    @property
    def id(self) -> tuple[int, int]:
        """The pool's id, as ``segment_pool_id`` shows it in snapshots."""
        return self._id

    def use_count(self) -> int:
        """How many holders the pool has: this object plus each active ``use_mem_pool``."""
        return _C._mempool_use_count(self._device, self._id)

    def snapshot(self, include_traces: bool = True) -> list[dict[str, Any]]:
        """The pool's segments (``memory_snapshot(self.id)``)."""
        return memory_snapshot(self.id, include_traces=include_traces)

    def __del__(self):
        # Not at interpreter exit, when the extension may be gone already.
        if getattr(self, "_id", None) is not None and not sys.is_finalizing():
            _C._mempool_release(self._device, self._id)


@contextlib.contextmanager
def use_mem_pool(pool: MemPool, device=None):
    """Routes this thread's allocations on ``device`` (default: the current
    device) to ``pool`` inside the ``with`` block, as ``torch.cuda.use_mem_pool``.
    Other threads (such as autograd's) keep allocating from the default pool."""
    if not isinstance(pool, MemPool):
        raise TypeError(f"use_mem_pool expects a torch.openreg.MemPool, got {type(pool).__name__}")
    index = torch.openreg.current_device() if device is None else _get_device_index(device, optional=True)
    _C._check_device_index(index)
    _C._mempool_begin(index, pool.id)
    try:
        yield
    finally:
        _C._mempool_end(index, pool.id)
