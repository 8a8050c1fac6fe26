"""How ``torch.multiprocessing`` sends openreg storages to another process: through device memory, as CUDA IPC does.

``torch.multiprocessing`` pickles a tensor (``Process`` arguments, queues) by pickling its storage with
``ForkingPickler``. torch's own reducers share CUDA memory through CUDA IPC and everything else as CPU shared
memory (which fails for openreg with ``_share_fd_: only available on CPU``), and torch 2.13 gives PrivateUse1
backends no IPC entry point. So the reducer registered here handles openreg storages and hands every other
storage to torch's. Tensors, parameters, typed storages, sparse and nested tensors all pickle an untyped storage,
so this one hook covers them.

What is sent is what CUDA's ``_share_cuda_`` sends: the runtime's IPC handle of the allocation holding the
storage, the storage's place in it, and the producer's reference counter for the storage
(``csrc/runtime/OpenRegIpc.cpp`` does both ends). The receiver keeps torch's ``shared_cache``: the same storage
received twice is one storage, over one mapping. docs/multiprocessing.md has the rules.
"""

import torch
from multiprocessing.reduction import ForkingPickler
from torch.multiprocessing import reductions as _torch_reductions

from . import _C


def _rebuild_empty_storage(device_index):
    return torch.UntypedStorage(0, device=torch.device("openreg", device_index))


def _rebuild_storage(device_index, memory, offset, nbytes, counter, counter_offset):
    key = (memory, offset)
    storage = _torch_reductions.storage_from_cache(torch.UntypedStorage, key)
    if storage is not None:
        # This process already holds the storage (and its reference); return the one this send counted.
        _C._ipc_release_reference(counter, counter_offset)
        return storage
    torch.openreg._lazy_init()
    storage = _C._ipc_open_storage(device_index, memory, offset, nbytes, counter, counter_offset)
    _torch_reductions.shared_cache[key] = _torch_reductions.StorageWeakRef(storage)
    return storage


def _reduce_storage(storage):
    if storage.device.type != "openreg":
        return _torch_reductions.reduce_storage(storage)
    if storage.nbytes() == 0:
        return (_rebuild_empty_storage, (storage.device.index,))
    torch.openreg._lazy_init()  # in a forked child: CUDA's "Cannot re-initialize" error
    shared = _C._ipc_share_storage(storage)
    device_index, memory, offset = shared[:3]
    # The producer is a receiver too when a storage comes back to it (a queue it reads itself).
    _torch_reductions.shared_cache[(memory, offset)] = _torch_reductions.StorageWeakRef(storage)
    return (_rebuild_storage, shared)


def register() -> None:
    # torch registered its reducers when torch.multiprocessing was imported; this replaces the one
    # for UntypedStorage, delegating to it.
    ForkingPickler.register(torch.UntypedStorage, _reduce_storage)
