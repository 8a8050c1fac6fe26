"""The snippets Inductor's Python wrapper writes for openreg's runtime calls
(``torch._inductor.codegen.common.DeviceOpOverrides``): the device guard
around a graph, synchronize, the raw stream. The C++-wrapper snippets keep the
base class's ``NotImplementedError``: openreg compiles with the Python wrapper
only (``cpp_wrapper.py``)."""

from textwrap import dedent

from torch._inductor.codegen.common import DeviceOpOverrides


class OpenRegDeviceOpOverrides(DeviceOpOverrides):
    def import_get_raw_stream_as(self, name: str) -> str:
        return dedent(
            f"""
            def {name}(device_index):
                return torch.openreg.current_stream(device_index).openreg_stream
            """
        )

    def set_device(self, device_idx: int) -> str:
        return f"torch.openreg.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.openreg.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.openreg.device({device_idx})"

    def current_stream(self) -> str:
        return "torch.openreg.current_stream()"
