"""The snippets Inductor's wrappers write for openreg's runtime calls
(``torch._inductor.codegen.common.DeviceOpOverrides``): for the Python
wrapper, the device guard around a graph, synchronize, the raw stream; for the
C++ wrapper and AOTInductor (``cpp_wrapper.py``), the C++ guard classes of
``torch_openreg/aoti/openreg.h``. The snippets of a GPU wrapper (kernel
loading, launch, CUDA-style stream types) keep the base class's
``NotImplementedError``: openreg's kernels are host functions."""

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

    def cpp_device_guard(self) -> str:
        return "torch_openreg::aoti::DeviceGuard"

    def cpp_aoti_device_guard(self) -> str:
        return "torch_openreg::aoti::DeviceGuard"

    def cpp_aoti_stream_guard(self) -> str:
        return "torch_openreg::aoti::StreamGuard"

    def cpp_kernel_type(self) -> str:
        # How an AOTInductor model declares its kernels: host functions.
        return "void *"

    def aten_device_type(self) -> str:
        # How a C++ wrapper names the device in C (torch 2.15 asks here; 2.13
        # and 2.14 read cpp_utils.DEVICE_TO_ATEN, filled by cpp_wrapper.py).
        return "at::kPrivateUse1"
