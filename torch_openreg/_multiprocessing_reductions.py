"""How ``torch.multiprocessing`` pickles openreg storages: it refuses, with a clear error.

``torch.multiprocessing`` sends tensors to other processes (``Process`` arguments, queues) by pickling
their storage with ``ForkingPickler``; its storage reducer shares CUDA memory through CUDA IPC and
everything else as CPU shared memory, so an openreg storage fails deep inside with
``_share_fd_: only available on CPU``. openreg device memory cannot be shared between processes
yet, so the reducer registered here names the device and the way around it, and hands every other
storage to torch's own reducer. Tensors, typed storages and parameters all pickle their untyped
storage, so this one hook covers them.
"""

import torch
from multiprocessing.reduction import ForkingPickler
from torch.multiprocessing import reductions as _torch_reductions


def _reduce_storage(storage):
    if storage.device.type == "openreg":
        raise RuntimeError(
            f"Cannot send an {storage.device} tensor or storage to another process: openreg device memory "
            "cannot be shared between processes (there is no device-memory IPC yet). Send a CPU copy "
            "instead (tensor.cpu()) and move it with .to('openreg') in the receiving process."
        )
    return _torch_reductions.reduce_storage(storage)


def register() -> None:
    # torch registered its reducers when torch.multiprocessing was imported; this replaces the one
    # for UntypedStorage, delegating to it.
    ForkingPickler.register(torch.UntypedStorage, _reduce_storage)
