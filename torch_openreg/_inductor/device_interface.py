"""Dynamo's view of the openreg device (``torch._dynamo.device_interface``).

Dynamo and Inductor reach a device's runtime through this class: the current
device and stream, streams and events inside compiled regions, synchronize,
and the device properties Inductor sizes its kernels with
(``multi_processor_count``: openreg's kernels run on the host's cores).
"""

import torch
from torch._dynamo.device_interface import (
    DeviceInterface,
    caching_worker_current_devices,
    caching_worker_device_properties,
)

from .. import openreg as _openreg

_DEVICE = "openreg"


class OpenRegInterface(DeviceInterface):
    device = _openreg.device
    # Dynamo recognises stream and event objects by these classes; both derive
    # from torch.Stream / torch.Event, which Dynamo can trace.
    Event = _openreg.Event
    Stream = _openreg.Stream

    class Worker:
        """Device queries for Inductor's compile workers: answered from what
        the parent process recorded before it forked them (a forked child
        cannot use the device), as CUDA's worker does."""

        @staticmethod
        def set_device(device: int) -> None:
            caching_worker_current_devices[_DEVICE] = device

        @staticmethod
        def current_device() -> int:
            if _DEVICE in caching_worker_current_devices:
                return caching_worker_current_devices[_DEVICE]
            return _openreg.current_device()

        @staticmethod
        def get_device_properties(device: torch.types.Device = None):
            if device is None:
                index = OpenRegInterface.Worker.current_device()
            else:
                index = _openreg._get_device_index(device, optional=True)
            if _DEVICE not in caching_worker_device_properties:
                caching_worker_device_properties[_DEVICE] = [
                    _openreg.get_device_properties(i) for i in range(_openreg.device_count())
                ]
            return caching_worker_device_properties[_DEVICE][index]

    current_device = staticmethod(_openreg.current_device)
    set_device = staticmethod(_openreg.set_device)
    device_count = staticmethod(_openreg.device_count)
    is_available = staticmethod(_openreg.is_available)
    synchronize = staticmethod(_openreg.synchronize)
    stream = staticmethod(_openreg.stream)
    current_stream = staticmethod(_openreg.current_stream)
    set_stream = staticmethod(_openreg.set_stream)
    get_device_properties = staticmethod(_openreg.get_device_properties)
    memory_allocated = staticmethod(_openreg.memory_allocated)
    is_bf16_supported = staticmethod(_openreg.is_bf16_supported)

    @staticmethod
    def exchange_device(device: int) -> int:
        _openreg._lazy_init()
        return _openreg._C._exchange_device(device)

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        return OpenRegInterface.exchange_device(device)

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        _openreg.set_stream(_openreg.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type))

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        """The runtime handle of the device's current stream (0: the default stream)."""
        return _openreg.current_stream(device_idx).openreg_stream

    @staticmethod
    def get_compute_capability(device: torch.types.Device = None) -> int:
        major, minor = _openreg.get_device_capability(device)
        return major * 10 + minor
