"""Memory history and snapshots of the caching allocator, in torch.cuda's
format (``torch.cuda.memory._record_memory_history``, ``_snapshot``,
``_dump_snapshot``, ``memory_snapshot``); the recording itself is
csrc/runtime/OpenRegMemoryHistory.cpp, the snapshot dictionary
csrc/python/MemorySnapshot.cpp. Exported by ``torch.openreg.memory``.
"""

import functools
import inspect
import pickle
import sys
from typing import Any

import torch
from torch._utils import _augment_memory_snapshot_stack_traces

from .. import _C
from ._utils import _get_device_index


def _check_device(device) -> None:
    if device is not None:
        _C._check_device_index(_get_device_index(device, optional=True))


def _record_memory_history(enabled="all", *args, **kwargs) -> None:
    """Records the caching allocator's actions and the stacks behind them, as
    ``torch.cuda.memory._record_memory_history`` does, for every openreg device.

    ``enabled``: ``"all"`` (history of every alloc/free/segment action, up to
    ``max_entries``, oldest dropped first), ``"state"`` (only the stacks of live
    blocks) or ``None`` (stop; drops the history). ``context``: which stacks to
    keep, ``"state"`` (live blocks), ``"alloc"`` (also allocation entries),
    ``"all"`` (also frees) or ``None``. ``stacks``: ``"python"`` (Python and
    TorchScript frames) or ``"all"`` (also C++ frames). ``clear_history`` drops
    the entries recorded so far; ``skip_actions`` lists actions not to record.
    A bool ``enabled`` takes torch.cuda's legacy arguments. Read the result
    with ``_snapshot()``.
    """
    if isinstance(enabled, bool):
        return _record_memory_history_legacy(enabled, *args, **kwargs)
    return _record_memory_history_impl(enabled, *args, **kwargs)


def _record_memory_history_impl(
    enabled: str | None = "all",
    context: str | None = "all",
    stacks: str = "all",
    max_entries: int = sys.maxsize,
    device=None,
    clear_history: bool = False,
    compile_context: bool = False,
    global_record_annotations: bool = False,
    skip_actions: list[str] | None = None,
) -> None:
    _check_device(device)  # like CUDA, recording covers every device
    if compile_context or global_record_annotations:
        raise NotImplementedError(
            "openreg memory history does not record compile contexts or record_function annotations yet "
            "(compile_context=True, global_record_annotations=True)"
        )
    _C._record_memory_history(enabled, context, stacks, max_entries, clear_history, list(skip_actions or []))


_record_memory_history.__signature__ = inspect.signature(_record_memory_history_impl)


def _record_memory_history_legacy(
    enabled: bool,
    record_context: bool = True,
    trace_alloc_max_entries: int = 1,
    trace_alloc_record_context: bool = False,
    device=None,
    record_context_cpp: bool = False,
    clear_history: bool = False,
    compile_context: bool = False,
    global_record_annotations: bool = False,
    skip_actions: list[str] | None = None,
) -> None:
    """torch.cuda's older boolean form, mapped onto the current one."""
    context = "alloc" if trace_alloc_record_context else "state" if record_context else None
    _record_memory_history_impl(
        "all" if enabled else None,
        context,
        "all" if record_context_cpp else "python",
        max(1, trace_alloc_max_entries),
        device,
        clear_history,
        compile_context,
        global_record_annotations,
        skip_actions,
    )


def _snapshot(device=None, augment_with_fx_traces: bool = False) -> dict[str, Any]:
    """The allocator's state on every openreg device, in the dictionary
    ``torch.cuda.memory._snapshot()`` returns: ``segments`` (each with its
    ``blocks``, their ``state`` and, while history is recorded, the ``frames``
    that allocated them), ``device_traces`` (one list of actions per device),
    ``allocator_settings``. ``torch.cuda._memory_viz`` and
    https://pytorch.org/memory_viz read it. ``device``, as in torch.cuda, only
    has to be valid: the snapshot covers every device."""
    _check_device(device)
    snapshot = _C._memory_snapshot(True)
    if augment_with_fx_traces:
        snapshot = _augment_memory_snapshot_stack_traces(snapshot)
    return snapshot


def _dump_snapshot(filename: str = "dump_snapshot.pickle", augment_with_fx_traces: bool = False) -> None:
    """Pickles ``_snapshot()`` to ``filename``, for ``python -m torch.cuda._memory_viz``
    or https://pytorch.org/memory_viz."""
    snapshot = _snapshot(augment_with_fx_traces=augment_with_fx_traces)
    with open(filename, "wb") as f:
        pickle.dump(snapshot, f)


def memory_snapshot(mempool_id=None, include_traces: bool = True) -> list[dict[str, Any]]:
    """The segments of ``_snapshot()`` (every device's), as ``torch.cuda.memory_snapshot``;
    with ``mempool_id``, only that pool's (``(0, 0)``: the default pool)."""
    segments = _C._memory_snapshot(include_traces)["segments"]
    if mempool_id is None:
        return segments
    pool = tuple(mempool_id)
    return [segment for segment in segments if segment["segment_pool_id"] == pool]


def _route_accelerator_snapshot() -> None:
    """``torch.accelerator.memory._snapshot()`` sends every accelerator but XPU
    to torch.cuda in torch 2.13; this routes openreg to ``_snapshot`` above and
    leaves every other accelerator where torch sends it."""
    generic = torch.accelerator.memory._snapshot

    @functools.wraps(generic)
    def snapshot(device=None, augment_with_fx_traces: bool = False):
        accelerator = torch.accelerator.current_accelerator()
        if accelerator is not None and accelerator.type == "openreg":
            return _snapshot(device, augment_with_fx_traces=augment_with_fx_traces)
        return generic(device, augment_with_fx_traces=augment_with_fx_traces)

    torch.accelerator.memory._snapshot = snapshot
