"""What an openreg device is, shaped like ``torch.cuda.get_device_properties``.

openreg simulates its devices on the host: a device's memory is the capacity
the runtime gives it (``OPENREG_DEVICE_MEMORY``), and its kernels run on the
host's cores, so ``multi_processor_count`` is the number of cores this process
may run on. The compute capability is the simulated architecture's version,
1.0; no kernel depends on it.
"""

import os
import uuid

from .. import _C
from ._initialization import _lazy_init
from ._utils import _get_device_index
from .memory import mem_get_info

__all__ = ["get_device_capability", "get_device_name", "get_device_properties"]

_DEVICE_NAME = "openreg simulated device"
_CAPABILITY = (1, 0)
# Device UUIDs are stable across processes: derived from the device index.
_UUID_NAMESPACE = uuid.UUID("5f0c6d1e-3b7a-4e63-9a52-0d1c2b7e9a41")


def _host_core_count() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class _OpenRegDeviceProperties:
    """The properties of one openreg device (read-only), as ``torch.cuda``'s
    ``_CudaDeviceProperties``: ``name``, ``major``, ``minor``,
    ``total_memory`` (bytes), ``multi_processor_count``, ``uuid``."""

    __slots__ = ("name", "major", "minor", "total_memory", "multi_processor_count", "uuid")

    def __init__(self, index: int):
        set_attribute = super().__setattr__
        set_attribute("name", _DEVICE_NAME)
        set_attribute("major", _CAPABILITY[0])
        set_attribute("minor", _CAPABILITY[1])
        set_attribute("total_memory", mem_get_info(index)[1])
        set_attribute("multi_processor_count", _host_core_count())
        set_attribute("uuid", uuid.uuid5(_UUID_NAMESPACE, f"openreg:{index}"))

    def __setattr__(self, name, value):
        raise AttributeError(f"openreg device properties are read-only (tried to set {name!r})")

    def __repr__(self):
        return (
            f"_OpenRegDeviceProperties(name={self.name!r}, major={self.major}, minor={self.minor}, "
            f"total_memory={self.total_memory // (1024 * 1024)}MB, "
            f"multi_processor_count={self.multi_processor_count}, uuid={self.uuid})"
        )


def get_device_properties(device=None) -> _OpenRegDeviceProperties:
    """The properties of ``device`` (default: the current device)."""
    _lazy_init()
    index = _get_device_index(device, optional=True)
    if index < 0 or index >= _C._device_count():
        raise AssertionError("Invalid device id")  # torch.cuda's error for a bad index
    return _OpenRegDeviceProperties(index)


def get_device_name(device=None) -> str:
    """The name of ``device`` (default: the current device)."""
    return get_device_properties(device).name


def get_device_capability(device=None) -> tuple[int, int]:
    """(major, minor) version of ``device``'s architecture (default: the current device)."""
    properties = get_device_properties(device)
    return properties.major, properties.minor
