"""The stream-order checker behind ``torch.openreg.sanitizer``: PyTorch's CUDA sanitizer (CSAN) on openreg.

CSAN (``torch.cuda._sanitizer``) keeps, per stream, the position of every other stream it is ordered after (through
event records and waits, and synchronizations), and per tensor the last write and the reads since; an operator that
reads what another stream wrote, or writes what another stream read or wrote, without being ordered after that
access, is a race. That bookkeeping (``EventHandler``, ``StreamSynchronizations``, the schema-driven reading of an
operator's arguments, the race report with both stack traces) knows nothing of CUDA and is reused as it is. What is
openreg's here:

- the trace it listens to: ``torch.openreg._gpu_trace``, which openreg's C++ feeds while the sanitizer is on;
- the tensors it looks at: openreg ones, keyed by their storage, so that a view and its base are one tensor (CSAN
  keys CUDA tensors by ``data_ptr()``, which tells a view apart from its base) and an allocation is found again when
  it is freed;
- the stream an operator runs on: the current stream of the device of the openreg tensor it writes (a copy between
  devices is ordered on the destination's current stream, as on CUDA), else of its first openreg input;
- a check CSAN does not make: memory freed while an operator on another stream may still use it (no
  ``record_stream``, no synchronization), reported when the allocator hands any of it out again, which on a GPU is
  when the new owner's kernels could overwrite what the old stream is still reading.
"""

import bisect
import dataclasses
import inspect
import io
import re
import threading
import traceback

import torch
import torch.cuda._sanitizer as csan
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from .. import _C
from . import _gpu_trace, sanitizer
from ._initcheck import InitCheck


# Operators that only allocate: their output holds no data yet, so using it on another stream reads nothing written
# (freeing it while that stream still uses it is checked apart). CSAN counts their output as written.
_ALLOCATIONS = re.compile(r"aten::(new_)?empty(_strided|_like)?$")


def _stack() -> traceback.StackSummary:
    stack = traceback.StackSummary.extract(traceback.walk_stack(inspect.currentframe()), lookup_lines=False)
    stack.reverse()  # walk_stack goes from the innermost frame out
    return stack


def _stream_id(device_index: int, stream_id: int) -> int:
    return _C._sanitizer_stream_id(device_index, stream_id)


def _current_stream_id(device_index: int) -> int:
    return _stream_id(device_index, torch.openreg.current_stream(device_index).stream_id)


def _traced(tensor: torch.Tensor) -> bool:
    """A tensor of a tracer (fake, functional, proxy tensors of torch.compile and torch.export): no device memory."""
    return torch._C._dispatch_keys(tensor).has(torch._C.DispatchKey.Python)


def _storage_key(tensor: torch.Tensor) -> int:
    """The tensor's storage address (its allocation's), or its identity for one without storage bytes."""
    if tensor.layout == torch.strided and not tensor.is_nested and tensor.data_ptr():
        return tensor.data_ptr() - tensor.storage_offset() * tensor.element_size()
    return id(tensor)


class _Arguments(csan.ArgumentHandler):
    """CSAN's reading of an operator's schema (what it reads, writes and returns), for openreg tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.written_device = None
        self.read_device = None
        self.fresh = set()  # the storages of results that alias no argument

    def parse_outputs(self, schema, outputs, *, is_factory: bool) -> None:
        super().parse_outputs(schema, outputs, is_factory=is_factory)
        for result, value in zip(schema.returns, outputs if isinstance(outputs, tuple) else (outputs,)):
            if result.alias_info is None:
                for t in pytree.tree_leaves(value):
                    # (A result without bytes, torch.empty(0), holds nothing to read.)
                    if isinstance(t, torch.Tensor) and t.device.type == "openreg" and not _traced(t):
                        key = _storage_key(t)
                        if key != id(t):
                            self.fresh.add(key)

    @property
    def device_index(self):
        """The device whose current stream runs the operator: its output's (a copy between devices is ordered on the
        destination's current stream, as on CUDA), else its inputs'; None if it touches no openreg tensor."""
        return self.written_device if self.written_device is not None else self.read_device

    def _handle_argument(self, value, is_write, metadata_only, name=None, is_output=False) -> None:
        if not isinstance(value, torch.Tensor) or value.device.type != "openreg" or _traced(value):
            return
        if is_write:
            if self.written_device is None:
                self.written_device = value.device.index
        elif self.read_device is None:
            self.read_device = value.device.index
        key = _storage_key(value)
        if is_write:
            self.dataptrs_written.add(key)
        elif not metadata_only:
            self.dataptrs_read.add(key)
        aliases = self.tensor_aliases.setdefault(key, [])
        if name is not None:
            aliases.append(name)
        if is_output:
            self.outputs.add(key)


@dataclasses.dataclass
class FreedBlock:
    """A freed block's accesses by other streams that its stream is not yet ordered after. They matter until the
    allocator hands any of its bytes out again, on that stream (a cached block is reused only on its own), or until
    that stream is ordered after them."""

    end: int  # one past its last byte
    stream: int | None  # the stream it was allocated on (None: handed out before the checker listened)
    accesses: list
    free_stack: traceback.StackSummary


class UseAfterFreeError(csan.SynchronizationError):
    """Memory handed out again while another stream's access to the tensor freed there may still be running."""

    def __init__(self, address, block, stream, access, free_stack, allocation_stack):
        self.address = address
        self.block = block
        self.stream = stream
        self.access = access
        self.free_stack = free_stack
        self.allocation_stack = allocation_stack

    def __str__(self) -> str:
        access = self.access
        within = "" if self.block == self.address else f" (within the block at {self.block:#x})"
        with io.StringIO() as message:
            message.write(
                "============================\n"
                f"openreg sanitizer: memory at {self.address:#x} is handed out again on stream {self.stream}{within} "
                f"while stream {access.stream} may still be using the tensor freed there: nothing ordered the new "
                f"owner's stream after that stream's last access (call tensor.record_stream() with the stream that "
                f"used it, or synchronize, before freeing it)\n"
                f"Last access by stream {access.stream} during kernel:\n{access.operator}\n{access.type}"
            )
            if access.aliases:
                message.write(" argument(s) " + ", ".join(access.aliases))
            message.write(f"\nWith stack trace:\n{''.join(access.stack_trace.format())}\n")
            message.write(f"Freed with stack trace:\n{''.join(self.free_stack.format())}\n")
            message.write(f"Handed out again with stack trace:\n{''.join(self.allocation_stack.format())}")
            return message.getvalue()


class StreamOrderChecker(csan.EventHandler):
    """CSAN's event handler, plus the accesses of freed blocks, checked when their memory is handed out again. One per
    process; its trace callbacks and the operators of every checked thread reach it under its lock."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.RLock()
        self.listening = False
        self.blocks = {}  # address -> (end, stream) of each block handed out while listening
        self.recorded_streams = {}  # address -> the streams given to record_stream for its tensor
        # Freed blocks by address, disjoint (a record goes as soon as any of its bytes is handed out again), and their
        # addresses in order, to find those a new block overlaps.
        self.freed = {}
        self.freed_addresses = []
        # Per thread: errors found in a trace callback, which cannot raise into its caller; the thread's next operator
        # raises them.
        self.pending = threading.local()
        self.initcheck = InitCheck()

    def take_pending_errors(self) -> list:
        errors = self.pending.__dict__.get("errors", [])
        self.pending.errors = []
        return errors

    def _handle_memory_allocation(self, data_ptr: int) -> None:
        size, stream = _C._sanitizer_block(data_ptr)
        end = data_ptr + size
        self.blocks[data_ptr] = (end, stream)
        for address in self._freed_within(data_ptr, end):
            freed = self._forget_freed(address)
            if sanitizer.is_enabled():  # else no operator of this thread would raise the error
                self._check_reuse(address, data_ptr, stream, freed)
        super()._handle_memory_allocation(data_ptr)

    def _handle_memory_deallocation(self, data_ptr: int) -> None:
        self.tensors_accessed.ensure_tensor_exists(data_ptr)
        info = self.tensors_accessed.accesses[data_ptr]
        recorded = self.recorded_streams.pop(data_ptr, set())
        # A block handed out before the checker listened: its extent and stream are unknown; it is known by its first
        # byte, and every access it had is kept.
        end, stream = self.blocks.pop(data_ptr, (data_ptr + 1, None))
        # record_stream: the allocator itself waits for that stream before handing the block out again.
        accesses = [
            a for a in ([info.write] if info.write is not None else []) + info.reads if a.stream not in recorded
        ]
        self.initcheck.freed(data_ptr)
        freed = FreedBlock(end, stream, self._unordered(accesses, stream), _stack())
        if freed.accesses:
            for address in self._freed_within(data_ptr, end):  # none, unless a free went untraced
                self._forget_freed(address)
            self.freed[data_ptr] = freed
            bisect.insort(self.freed_addresses, data_ptr)
        super()._handle_memory_deallocation(data_ptr)

    def _unordered(self, accesses: list, stream: int | None) -> list:
        """The accesses by other streams that `stream` is not ordered after yet (the order only grows)."""
        if stream is None:
            return accesses
        return [
            a for a in accesses if a.stream != stream and not self.syncs.is_ordered_after(stream, a.seq_num, a.stream)
        ]

    def _after_ordering(self, handler):
        """`handler`, which orders streams after others, followed by _forget_ordered_accesses."""

        def handle(*args) -> None:
            handler(*args)
            self._forget_ordered_accesses()

        return handle

    def _forget_ordered_accesses(self) -> None:
        """Drops the freed blocks' accesses that their streams are now ordered after, and the blocks left with none (a
        device synchronization, including the one of memory returned to the runtime, drops them all)."""
        for freed in self.freed.values():
            freed.accesses = self._unordered(freed.accesses, freed.stream)
        if not all(freed.accesses for freed in self.freed.values()):
            self.freed = {address: freed for address, freed in self.freed.items() if freed.accesses}
            self.freed_addresses = sorted(self.freed)

    def _freed_within(self, start: int, end: int) -> list:
        """The addresses of the freed blocks that overlap [start, end)."""
        last = bisect.bisect_left(self.freed_addresses, end)
        first = last
        while first > 0 and self.freed[self.freed_addresses[first - 1]].end > start:
            first -= 1
        return self.freed_addresses[first:last]

    def _forget_freed(self, address: int) -> FreedBlock:
        del self.freed_addresses[bisect.bisect_left(self.freed_addresses, address)]
        return self.freed.pop(address)

    def _check_reuse(self, address: int, block: int, stream: int, freed: FreedBlock) -> None:
        unordered = self._unordered(freed.accesses, stream)
        if unordered:
            error = UseAfterFreeError(address, block, stream, unordered[0], freed.free_stack, _stack())
            self.pending.__dict__.setdefault("errors", []).append(error)

    def order_after(self, stream: int, other: int) -> None:
        """Orders `stream` after everything `other` has run so far, as an event recorded on `other` and waited on by
        `stream` would."""
        for s in (stream, other):
            self.syncs._ensure_stream_exists(s)
        self.syncs._state_wait_for_other(self.syncs.current_sync_states[stream], self.syncs.current_sync_states[other])
        self._forget_ordered_accesses()

    def record_stream(self, tensor: torch.Tensor, stream: torch.Stream) -> None:
        key = _storage_key(tensor)
        self.recorded_streams.setdefault(key, set()).add(_stream_id(stream.device_index, stream.stream_id))

    def listen(self) -> None:
        self.listening = True
        self._registered = [(registry, self._under_lock(callback)) for registry, callback in self._callbacks()]
        for registry, callback in self._registered:
            registry.add_callback(callback)
        _C._set_compiled_kernel_observer(self._under_lock(self._compiled_kernel_call))

    def stop_listening(self) -> None:
        self.listening = False
        _C._set_compiled_kernel_observer(None)
        for registry, callback in self._registered:
            registry.callback_list.remove(callback)

    def _compiled_kernel_call(self, tensors: list) -> None:
        # An Inductor kernel writes some of its arguments where the dispatcher does not see it: all count as written.
        self.initcheck.written(map(_storage_key, tensors))

    def _under_lock(self, callback):
        def locked(*args) -> None:
            with self.lock:
                callback(*args)

        return locked

    def _callbacks(self):
        return (
            (_gpu_trace.EventCreationCallbacks, self._handle_event_creation),
            (_gpu_trace.EventDeletionCallbacks, self._handle_event_deletion),
            (_gpu_trace.EventRecordCallbacks, self._handle_event_record),
            (_gpu_trace.EventWaitCallbacks, self._after_ordering(self._handle_event_wait)),
            (_gpu_trace.MemoryAllocationCallbacks, self._handle_memory_allocation),
            (_gpu_trace.MemoryDeallocationCallbacks, self._handle_memory_deallocation),
            (_gpu_trace.StreamCreationCallbacks, self._handle_stream_creation),
            (_gpu_trace.DeviceSynchronizationCallbacks, self._after_ordering(self._handle_device_synchronization)),
            (_gpu_trace.StreamSynchronizationCallbacks, self._after_ordering(self._handle_stream_synchronization)),
            (_gpu_trace.EventSynchronizationCallbacks, self._after_ordering(self._handle_event_synchronization)),
        )


class StreamOrderMode(TorchDispatchMode):
    """Sees every operator of the thread that entered it: which openreg storages it reads and writes, on which stream."""

    # Higher-order operators (auto_functionalized, cond, ...) pass through; their operators come here one by one.
    supports_higher_order_operators = True

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        # Off while torch.compile traces and compiles (else Dynamo would not compile at all under the sanitizer), on
        # while the compiled code runs: it sees the operators that code calls through the dispatcher.
        return True

    def __init__(self, checker: StreamOrderChecker) -> None:
        super().__init__()
        self.checker = checker

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        # Once the checker stopped, everything passes through: a disable() from another thread leaves this mode on this
        # thread's stack.
        if isinstance(func, torch._ops.HigherOrderOperator) or not self.checker.listening:
            return func(*args, **kwargs)
        if func is torch.ops.aten.record_stream.default:  # not a kernel: the allocator's bookkeeping
            with self.checker.lock:
                self.checker.record_stream(*args)
            return func(*args, **kwargs)
        name = func._schema.name
        is_factory = bool(csan.FACTORY_FUNCTION_REGEX.match(name) or _ALLOCATIONS.match(name))
        arguments = _Arguments()
        arguments.parse_inputs(func._schema, args, kwargs, is_factory=is_factory)
        outputs = func(*args, **kwargs)
        arguments.parse_outputs(func._schema, outputs, is_factory=is_factory)
        with self.checker.lock:
            errors = self.checker.take_pending_errors() + self._check(func, arguments)
            uninitialized = []
            if arguments.device_index is not None:  # (else no openreg state to ask: a forked child may run this)
                uninitialized = self.checker.initcheck.operator(
                    func, arguments, bool(_ALLOCATIONS.match(name)), _C._is_current_stream_capturing(), _stack
                )
        sanitizer._raise_errors(errors, uninitialized)
        return outputs

    def _check(self, func, arguments: _Arguments) -> list:
        # A graph capture records operators for its replays, which are checked when they run: CUDA's capture runs
        # nothing (openreg's runs them too, which is not device work in CUDA's model).
        if arguments.device_index is None or _C._is_current_stream_capturing():
            return []
        stream = _current_stream_id(arguments.device_index)
        # A copy between two devices (the only operator that reads one device and writes another) is ordered both
        # ways, as CUDA's peer copy is: on the destination's current stream after the source's current stream's work,
        # and the source's current stream after the copy.
        peer = arguments.read_device if arguments.read_device not in (None, arguments.device_index) else None
        if peer is not None:
            self.checker.order_after(stream, _current_stream_id(peer))
        errors = self.checker._handle_kernel_launch(
            stream,
            arguments.dataptrs_read - arguments.dataptrs_written,
            arguments.dataptrs_written,
            arguments.outputs,
            func._schema,
            arguments.tensor_aliases,
        )
        if peer is not None:
            self.checker.order_after(_current_stream_id(peer), stream)
        return errors
