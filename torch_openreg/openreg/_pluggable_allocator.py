"""The pluggable allocator, as ``torch.cuda.memory.CUDAPluggableAllocator``
and ``change_current_allocator`` (csrc/runtime/OpenRegPluggableAllocator.cpp).
Exported by ``torch.openreg.memory``.
"""

import ctypes

from .. import _C


class _OpenRegAllocator:
    """An allocator change_current_allocator can install (torch.cuda's
    ``_CUDAAllocator``)."""


class OpenRegPluggableAllocator(_OpenRegAllocator):
    """torch.cuda.memory.CUDAPluggableAllocator for openreg: device memory
    from two functions of a shared library, loaded with ctypes::

        void* alloc_fn_name(ssize_t size, int device, orStream_t stream);
        void free_fn_name(void* ptr, ssize_t size, int device, orStream_t stream);

    ``alloc`` returns runtime memory (from ``orMalloc``, so memory protection
    applies) or NULL when out of memory; ``free`` gets back the size, device
    and stream of the allocation. Install it with change_current_allocator."""

    def __init__(self, path_to_so_file: str, alloc_fn_name: str, free_fn_name: str):
        # As CUDA's: OSError for a library that does not load, AttributeError
        # naming a missing function.
        self._library = ctypes.CDLL(path_to_so_file)
        self._alloc_fn = ctypes.cast(getattr(self._library, alloc_fn_name), ctypes.c_void_p).value
        self._free_fn = ctypes.cast(getattr(self._library, free_fn_name), ctypes.c_void_p).value
        if self._alloc_fn is None:
            raise AssertionError(f"alloc_fn '{alloc_fn_name}' is None")
        if self._free_fn is None:
            raise AssertionError(f"free_fn '{free_fn_name}' is None")


def change_current_allocator(allocator: _OpenRegAllocator) -> None:
    """Makes ``allocator`` serve every openreg allocation from now on. As in
    CUDA, only before the current allocator has allocated anything (else
    RuntimeError "Can't swap an already initialized allocator"), and once: the
    statistics, snapshot, history, MemPool, memory fraction, caching toggle
    and IPC functions then raise, since they describe the caching allocator."""
    if not isinstance(allocator, OpenRegPluggableAllocator):
        raise TypeError(
            f"change_current_allocator: expected an OpenRegPluggableAllocator, got {type(allocator).__name__}"
        )
    _C._change_current_allocator(allocator._alloc_fn, allocator._free_fn)
