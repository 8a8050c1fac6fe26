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
  ``record_stream``, no synchronization), reported when the allocator hands the block out again, which on a GPU is
  when the new owner's kernels could overwrite what the old stream is still reading.
"""

import inspect
import io
import re
import traceback

import torch
import torch.cuda._sanitizer as csan
from torch.utils._python_dispatch import TorchDispatchMode

from .. import _C
from . import _gpu_trace
from .sanitizer import SynchronizationErrors


# Operators that only allocate: their output holds no data yet, so using it on another stream reads nothing written
# (freeing it while that stream still uses it is checked apart). CSAN counts their output as written.
_ALLOCATIONS = re.compile(r"aten::(new_)?empty(_strided)?$")


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


class UseAfterFreeError(csan.SynchronizationError):
    """A block handed out again while another stream's access to its previous tensor may still be running."""

    def __init__(self, address, stream, access, free_stack, allocation_stack):
        self.address = address
        self.stream = stream
        self.access = access
        self.free_stack = free_stack
        self.allocation_stack = allocation_stack

    def __str__(self) -> str:
        access = self.access
        with io.StringIO() as message:
            message.write(
                "============================\n"
                f"openreg sanitizer: memory at {self.address:#x} is handed out again on stream {self.stream} while "
                f"stream {access.stream} may still be using the tensor freed there: nothing ordered the new owner's "
                f"stream after that stream's last access (call tensor.record_stream() with the stream that used it, "
                f"or synchronize, before freeing it)\n"
                f"Last access by stream {access.stream} during kernel:\n{access.operator}\n{access.type}"
            )
            if access.aliases:
                message.write(" argument(s) " + ", ".join(access.aliases))
            message.write(f"\nWith stack trace:\n{''.join(access.stack_trace.format())}\n")
            message.write(f"Freed with stack trace:\n{''.join(self.free_stack.format())}\n")
            message.write(f"Handed out again with stack trace:\n{''.join(self.allocation_stack.format())}")
            return message.getvalue()


class StreamOrderChecker(csan.EventHandler):
    """CSAN's event handler, plus the accesses of freed blocks, checked when a block is handed out again."""

    def __init__(self) -> None:
        super().__init__()
        # storage address -> (its tensor's last accesses, the streams given to record_stream, where it was freed)
        self.freed = {}
        self.recorded_streams = {}
        # Errors found in a trace callback, which cannot raise into its caller: the operator running raises them.
        self.pending = []

    def _handle_memory_deallocation(self, data_ptr: int) -> None:
        self.tensors_accessed.ensure_tensor_exists(data_ptr)
        info = self.tensors_accessed.accesses[data_ptr]
        recorded = self.recorded_streams.pop(data_ptr, set())
        if info.write is not None or info.reads:
            self.freed[data_ptr] = (info, recorded, _stack())
        super()._handle_memory_deallocation(data_ptr)

    def _handle_memory_allocation(self, data_ptr: int) -> None:
        freed = self.freed.pop(data_ptr, None)
        if freed is not None:
            self._check_reuse(data_ptr, *freed)
        super()._handle_memory_allocation(data_ptr)

    def _check_reuse(self, address: int, info, recorded, free_stack) -> None:
        # The caching allocator hands a block out again only on the stream it was allocated on, which is current.
        stream = _current_stream_id(torch.openreg.current_device())
        for access in ([info.write] if info.write is not None else []) + info.reads:
            if access.stream == stream or access.stream in recorded:
                continue  # record_stream: the allocator waits for that stream before handing the block out again
            if not self.syncs.is_ordered_after(stream, access.seq_num, access.stream):
                self.pending.append(UseAfterFreeError(address, stream, access, free_stack, _stack()))
                return

    def order_after(self, stream: int, other: int) -> None:
        """Orders `stream` after everything `other` has run so far, as an event recorded on `other` and waited on by
        `stream` would."""
        for s in (stream, other):
            self.syncs._ensure_stream_exists(s)
        self.syncs._state_wait_for_other(self.syncs.current_sync_states[stream], self.syncs.current_sync_states[other])

    def record_stream(self, tensor: torch.Tensor, stream: torch.Stream) -> None:
        key = _storage_key(tensor)
        self.recorded_streams.setdefault(key, set()).add(_stream_id(stream.device_index, stream.stream_id))

    def listen(self) -> None:
        for registry, callback in self._callbacks():
            registry.add_callback(callback)

    def stop_listening(self) -> None:
        for registry, callback in self._callbacks():
            registry.callback_list.remove(callback)

    def _callbacks(self):
        return (
            (_gpu_trace.EventCreationCallbacks, self._handle_event_creation),
            (_gpu_trace.EventDeletionCallbacks, self._handle_event_deletion),
            (_gpu_trace.EventRecordCallbacks, self._handle_event_record),
            (_gpu_trace.EventWaitCallbacks, self._handle_event_wait),
            (_gpu_trace.MemoryAllocationCallbacks, self._handle_memory_allocation),
            (_gpu_trace.MemoryDeallocationCallbacks, self._handle_memory_deallocation),
            (_gpu_trace.StreamCreationCallbacks, self._handle_stream_creation),
            (_gpu_trace.DeviceSynchronizationCallbacks, self._handle_device_synchronization),
            (_gpu_trace.StreamSynchronizationCallbacks, self._handle_stream_synchronization),
            (_gpu_trace.EventSynchronizationCallbacks, self._handle_event_synchronization),
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
        if isinstance(func, torch._ops.HigherOrderOperator):
            return func(*args, **kwargs)
        if func is torch.ops.aten.record_stream.default:  # not a kernel: the allocator's bookkeeping
            self.checker.record_stream(*args)
            return func(*args, **kwargs)
        name = func._schema.name
        is_factory = bool(csan.FACTORY_FUNCTION_REGEX.match(name) or _ALLOCATIONS.match(name))
        arguments = _Arguments()
        arguments.parse_inputs(func._schema, args, kwargs, is_factory=is_factory)
        outputs = func(*args, **kwargs)
        arguments.parse_outputs(func._schema, outputs, is_factory=is_factory)
        errors, self.checker.pending = self.checker.pending, []
        # A graph capture records operators for its replays, which are checked when they run: CUDA's capture runs
        # nothing (openreg's runs them too, which is not device work in CUDA's model).
        if arguments.device_index is not None and not _C._is_current_stream_capturing():
            stream = _current_stream_id(arguments.device_index)
            # A copy between two devices (the only operator that reads one device and writes another) is ordered
            # both ways, as CUDA's peer copy is: on the destination's current stream after the source's current
            # stream's work, and the source's current stream after the copy.
            peer = arguments.read_device if arguments.read_device not in (None, arguments.device_index) else None
            if peer is not None:
                self.checker.order_after(stream, _current_stream_id(peer))
            errors += self.checker._handle_kernel_launch(
                stream,
                arguments.dataptrs_read - arguments.dataptrs_written,
                arguments.dataptrs_written,
                arguments.outputs,
                func._schema,
                arguments.tensor_aliases,
            )
            if peer is not None:
                self.checker.order_after(_current_stream_id(peer), stream)
        if errors:
            raise SynchronizationErrors(errors)
        return outputs
