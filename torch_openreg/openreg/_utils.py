import torch


def _get_device_index(device, optional: bool = False, allow_cpu: bool = False) -> int:
    """The openreg device index named by ``device`` (int, str or torch.device).

    An index-less ``"openreg"`` means the current device when ``optional`` is
    true; ``allow_cpu`` maps a CPU device to -1. ``torch.load(map_location=...)``
    and the device-generic test base call this.
    """
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if allow_cpu and device.type == "cpu":
            return -1
        if device.type != "openreg":
            raise ValueError(f"Expected an openreg device, but got: {device}")
        if device.index is None:
            if not optional:
                raise ValueError(f"Expected an openreg device with an explicit index, but got: {device}")
            return torch.openreg.current_device()
        return device.index
    if isinstance(device, int):
        return device
    if device is None and optional:
        return torch.openreg.current_device()
    raise ValueError(f"Cannot interpret {device!r} as an openreg device")
