"""openreg streams and events, shaped like ``torch.cuda.Stream`` / ``torch.cuda.Event``.

Both are ``torch.Stream`` / ``torch.Event`` (the device-generic classes whose
behaviour the C++ device guard provides), specialized to openreg.
"""

import torch

from .. import _C
from . import sanitizer
from ._utils import _get_device_index

__all__ = [
    "Event",
    "ExternalStream",
    "Stream",
    "StreamContext",
    "current_stream",
    "default_stream",
    "get_stream_from_external",
    "set_stream",
    "stream",
]


class Stream(torch.Stream):
    """An in-order queue of work on an openreg device.

    ``Stream(device=None, priority=0)`` takes a stream from the device's pool;
    priorities are 0 (default) down to -2 (highest). Work queued on a stream
    (asynchronous copies, event records, waits) runs in order on that stream,
    asynchronously to the caller.
    """

    def __new__(cls, device=None, priority=0, **kwargs):
        if kwargs.get("stream_id") is not None:  # wrapping an existing stream
            return super().__new__(cls, **kwargs)
        index = _get_device_index(device, optional=True)
        return super().__new__(cls, device=torch.device("openreg", index), priority=priority)

    def wait_event(self, event) -> None:
        """Makes future work on this stream wait for ``event``."""
        event.wait(self)

    def wait_stream(self, stream) -> None:
        """Makes future work on this stream wait for the work queued on ``stream`` so far."""
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        """Records ``event`` (a new one if None) on this stream and returns it."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    @property
    def priority(self) -> int:
        """0 (default) down to -2 (highest)."""
        return _C._stream_priority(self.device_index, self.stream_id)

    @property
    def openreg_stream(self) -> int:
        """The runtime stream handle (``orStream_t``) as an integer, 0 for the
        default stream, as ``torch.cuda.Stream.cuda_stream``."""
        return _C._stream_handle(self.device_index, self.stream_id)

    def __repr__(self):
        return f"<torch.openreg.Stream device={self.device} stream_id={self.stream_id}>"


class ExternalStream(Stream):
    """Wraps a stream created through the openreg runtime outside PyTorch
    (``orStreamCreate``), given its handle as an integer, so that PyTorch work
    can be queued on it. The caller keeps the runtime stream alive while the
    wrapper is used. ``device`` defaults to the device the runtime says the
    stream belongs to; a different one is an error."""

    def __new__(cls, stream_ptr: int, device=None, **kwargs):
        index = -1 if device is None else _get_device_index(device, optional=True)
        stream_id, device_index, device_type = _C._stream_from_external(stream_ptr, index)
        return super().__new__(cls, stream_id=stream_id, device_index=device_index, device_type=device_type)


def get_stream_from_external(data_ptr: int, device=None) -> Stream:
    """A ``Stream`` for a runtime stream created outside PyTorch (see ``ExternalStream``)."""
    return ExternalStream(data_ptr, device)


class Event(torch.Event):
    """A marker in a stream, for synchronization and timing (``enable_timing=True``)."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        return super().__new__(
            cls, device="openreg", enable_timing=enable_timing, blocking=blocking, interprocess=interprocess
        )

    def record(self, stream=None) -> None:
        """Records the event on ``stream`` (default: the current stream)."""
        super().record(stream if stream is not None else current_stream())

    def wait(self, stream=None) -> None:
        """Makes future work on ``stream`` (default: the current stream) wait for this event."""
        stream = stream if stream is not None else current_stream()
        if self.event_id == 0 and sanitizer.is_enabled():
            # A wait on an event never recorded orders the stream after nothing, here as on CUDA.
            raise RuntimeError(
                f"openreg sanitizer: {stream} waits on an event that was never recorded, which orders it after "
                "nothing: record the event on the stream whose work it must follow before waiting on it"
            )
        super().wait(stream)

    def elapsed_time(self, end_event) -> float:
        """Milliseconds from this event to ``end_event`` (both recorded, timing enabled)."""
        # torch.Event.elapsed_time rejects subclasses of torch.Event as argument.
        return _C._event_elapsed_time(self, end_event)


_PRIVATEUSE1 = int(torch._C._autograd.DeviceType.PrivateUse1)


def _wrap(s: torch.Stream) -> Stream:
    return Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)


def current_stream(device=None) -> Stream:
    """The current stream of ``device`` (default: the current device) for this thread."""
    return _wrap(torch.accelerator.current_stream(_get_device_index(device, optional=True)))


def default_stream(device=None) -> Stream:
    """The default stream of ``device``."""
    index = _get_device_index(device, optional=True)
    return Stream(stream_id=0, device_index=index, device_type=_PRIVATEUSE1)


def set_stream(stream: torch.Stream) -> None:
    """Makes ``stream`` current on its device for this thread."""
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    """Context manager that makes ``stream`` (and its device) current, then
    restores the previous device and the previous stream of both devices.
    ``None`` makes it a no-op, as ``torch.cuda.stream(None)``."""

    def __init__(self, stream):
        self.stream = stream
        self.previous_device_stream = None
        self.previous_target_stream = None

    def __enter__(self):
        if self.stream is not None:
            self.previous_device_stream = torch.accelerator.current_stream()
            self.previous_target_stream = torch.accelerator.current_stream(self.stream.device_index)
            torch.accelerator.set_stream(self.stream)  # also makes its device current
        return self.stream

    def __exit__(self, *exc_info):
        if self.stream is not None:
            torch.accelerator.set_stream(self.previous_target_stream)
            torch.accelerator.set_stream(self.previous_device_stream)  # back on the original device
        return False


def stream(stream) -> StreamContext:
    return StreamContext(stream)
