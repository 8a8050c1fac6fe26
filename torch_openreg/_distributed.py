"""The openreg c10d backend, ``orccl``: its registration with torch.distributed.

``orccl`` runs gloo's collectives directly on openreg memory (see
docs/distributed.md). Registering it for the ``openreg`` device makes it the
device's default backend, as NCCL is CUDA's: ``init_process_group()`` without a
backend picks it when openreg is the accelerator, and ``"orccl"`` or
``"cpu:gloo,openreg:orccl"`` name it explicitly.
"""

import functools
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d

BACKEND_NAME = "orccl"

_bound_local_rank = False


def _bind_local_rank() -> None:
    """Under a launcher that sets LOCAL_RANK (torchrun), each rank uses openreg:LOCAL_RANK.

    Done once per process, when its first orccl group is created, and only if
    the process still uses the initial device (openreg:0): a device chosen
    before ``init_process_group`` stays.
    """
    global _bound_local_rank
    if _bound_local_rank or "LOCAL_RANK" not in os.environ:
        return
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.openreg.current_device() == 0:
        count = torch.openreg.device_count()
        if local_rank >= count:
            raise RuntimeError(
                f"{BACKEND_NAME}: this process is local rank {local_rank} but only {count} openreg devices exist; "
                f"set OPENREG_DEVICE_COUNT to at least the number of ranks per host (up to 16)"
            )
        torch.openreg.set_device(local_rank)
    _bound_local_rank = True


def _create_backend(options, gloo_options):
    """The creator ``register_backend`` calls (extended API): one gloo group under the openreg backend.

    ``gloo_options`` is what ``init_process_group(pg_options=...)`` /
    ``new_group(pg_options=...)`` received: ``None``, or a
    ``ProcessGroupGloo._Options`` choosing gloo's devices and threads.
    """
    from . import _C

    if gloo_options is not None and not isinstance(gloo_options, dist.ProcessGroupGloo._Options):
        raise TypeError(
            f"{BACKEND_NAME}: pg_options must be a torch.distributed.ProcessGroupGloo._Options, "
            f"got {type(gloo_options).__name__}"
        )
    _bind_local_rank()
    if gloo_options is None:
        # As torch creates a gloo group: its default device (GLOO_SOCKET_IFNAME, else the hostname's interface).
        gloo = dist.ProcessGroupGloo(options.store, options.group_rank, options.group_size, options.timeout)
        gloo_options = gloo.options
    else:
        gloo_options._timeout = options.timeout
        gloo = dist.ProcessGroupGloo(options.store, options.group_rank, options.group_size, gloo_options)
    gloo_options.global_ranks_in_group = options.global_ranks_in_group
    gloo_options.group_name = options.group_id
    return _C.ProcessGroupOpenReg(options.store, gloo, options.group_rank, options.group_size)


def _openreg_backend(group):
    """The group's orccl backend, or None if its openreg tensors go elsewhere (or nowhere)."""
    from . import _C

    if not isinstance(group, dist.ProcessGroup):
        return None
    try:
        backend = group._get_backend(torch.device("openreg"))
    except RuntimeError:  # no backend for openreg in this group
        return None
    return backend if isinstance(backend, _C.ProcessGroupOpenReg) else None


def _with_orccl_as_default_backend(new_process_group_helper):
    """Makes orccl the default backend of every group whose openreg backend it is.

    torch 2.13 picks a group's default backend (what ``ProcessGroup.name()``,
    hooks and sequence numbers consult) from a list that knows NCCL by name
    only: ``init_process_group()`` without a backend marks the group "gloo"
    although no gloo backend was created, and ``"cpu:gloo,openreg:orccl"``
    leaves it undefined (the plugin lookup compares an upper-case name with a
    lower-case one). For NCCL the accelerator's backend is the default: here
    too.
    """

    @functools.wraps(new_process_group_helper)
    def create(*args, **kwargs):
        pg, prefix_store = new_process_group_helper(*args, **kwargs)
        if _openreg_backend(pg) is not None:
            pg._set_default_backend(dist.ProcessGroup.BackendType.CUSTOM)
        return pg, prefix_store

    return create


def _with_orccl_monitored_barrier(monitored_barrier):
    """``monitored_barrier`` on a group whose openreg backend is orccl runs gloo's.

    torch 2.13 accepts only groups named "gloo", and its C++ path looks for the
    group's CPU backend; orccl holds a gloo group that implements it (reporting
    the ranks that did not arrive).
    """

    @functools.wraps(monitored_barrier)
    def barrier(group=None, timeout=None, wait_all_ranks=False):
        backend = None if distributed_c10d._rank_not_in_group(group) else _openreg_backend(group or dist.group.WORLD)
        if backend is None:
            return monitored_barrier(group, timeout, wait_all_ranks)
        if timeout is None:
            timeout = distributed_c10d.default_pg_timeout
        elif isinstance(timeout, float):
            timeout = timedelta(seconds=timeout)
        return backend.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)

    return barrier


def register() -> None:
    """Registers ``orccl`` for the ``openreg`` device; called when the package is imported."""
    if not dist.is_available() or BACKEND_NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True, devices=["openreg"])
    distributed_c10d._new_process_group_helper = _with_orccl_as_default_backend(
        distributed_c10d._new_process_group_helper
    )
    dist.monitored_barrier = distributed_c10d.monitored_barrier = _with_orccl_monitored_barrier(
        distributed_c10d.monitored_barrier
    )
