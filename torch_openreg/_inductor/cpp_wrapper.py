"""Inductor's C++ wrapper for openreg (``torch._inductor.config.cpp_wrapper =
True``, and AOTInductor, which writes the same wrapper into a model library).

It is the CPU's C++ wrapper (``CppWrapperCpu``), with these differences:

- a generated kernel dereferences the pointers it gets, and an openreg
  tensor's data pointer is a device address, so every call of a C++ kernel on
  openreg tensors is written inside a scope holding the runtime's host access
  to their memory (``torch_openreg::aoti::HostAccess``, the C++ counterpart of
  the Python wrapper's ``call_on_host``)::

      {
          torch_openreg::aoti::HostAccess<2> host_access({arg0_1, buf0});
          cpp_fused_add_0((const float*)(host_access[0]), (float*)(host_access[1]));
      }

- the header it includes for openreg is the CPU's runtime header plus
  ``torch_openreg/aoti/openreg.h`` (the package's ``include`` directory, put
  on the compile's include path by ``cpp_build_options.py``);
- ATen operators Inductor does not generate code for (``extern_kernels.mm``,
  fallback kernels) are called through openreg's C shim
  (``aoti_torch_openreg_<operator>``: the dispatcher, tools/gen_aoti_c_shim.py),
  where the CPU's wrapper calls the CPU's kernels directly.

The wrapper names the device by its dispatch key, ``PrivateUse1``, in the C
code: buffers are allocated with ``aoti_torch_empty_strided(...,
aoti_torch_device_type_privateuse1(), index, ...)``, openreg's caching
allocator.

In an AOTInductor model, one more: AOTInductor's runtime (compiled into the
model from torch's headers) can hold constants in device memory only for the
devices it knows, so an openreg model's constants are recorded as host
(CPU) constants, and its run reads each through
``torch_openreg::aoti::device_constant``, the constant's copy on the device
the model runs on (csrc/inductor/AotiConstants.cpp). The model library is
loaded by openreg's runner (csrc/inductor/AotiModelRunner.cpp).
"""

import functools

import torch
from torch._inductor.codegen import cpp_utils
from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
from torch._inductor.virtualized import V
from torch._library import _out_variant

_DEVICE = "openreg"
_HEADER = "#include <torch_openreg/aoti/openreg.h>"
_HOST_ACCESS = "host_access"


@functools.cache
def _header_lines() -> str:
    # The include, and the headers' hash in a comment: Inductor's code cache
    # keys a compiled wrapper on its source text, so a wrapper compiled
    # against other headers (another torch_openreg) is never reused.
    from .cache_key import OpenRegCodegenVersion

    return f"{_HEADER}  // torch_openreg {OpenRegCodegenVersion().uuid().hex()[:16]}"


def _no_out_variant_lowering_in_openreg_cpp_wrappers(lookup):
    # Inductor lowers a functional custom operator that has an out= overload
    # to an extern kernel calling that overload (ir.FallbackKernel.create),
    # which a C++ wrapper calls as a C shim named after the operator,
    # aoti_torch_<device>_<name>: a function nobody defines for a custom
    # operator (the CPU's C++ wrapper fails to compile the same way). In
    # openreg's C++ wrappers a custom operator stays a fallback kernel, called
    # through the dispatcher: AOTInductor's proxy executor in a model,
    # aoti_torch_call_dispatcher otherwise.
    @functools.wraps(lookup)
    def lookup_openreg(op):
        if V.graph.cpp_wrapper and _DEVICE in V.graph.device_types:
            return None
        return lookup(op)

    return lookup_openreg


@functools.cache
def install() -> None:
    for name in ("to_out_variant", "lookup_manual_out_variant"):
        setattr(_out_variant, name, _no_out_variant_lowering_in_openreg_cpp_wrappers(getattr(_out_variant, name)))
    # How the C++ wrapper names a device in C (`at::kPrivateUse1`, whose
    # lower-case name gives `aoti_torch_device_type_privateuse1()`): torch 2.13
    # and 2.14 read this table, 2.15 asks the device op overrides
    # (aten_device_type). And the c10::DeviceType number AOTInductor checks
    # every input's device against under AOTI_RUNTIME_CHECK_INPUTS=1.
    if hasattr(cpp_utils, "DEVICE_TO_ATEN"):
        cpp_utils.DEVICE_TO_ATEN[_DEVICE] = "at::kPrivateUse1"
    cpp_utils.DEVICE_TO_INT[_DEVICE] = 20  # c10::DeviceType::PrivateUse1


class OpenRegCppWrapperCodegen(CppWrapperCpu):
    def __init__(self):
        self.device = _DEVICE
        super().__init__()
        # The kernels are Inductor's CPU kernels: compiled for the host's
        # vector instruction set, as the CPU wrapper's are.
        self.needs_vec_isa = True

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        return OpenRegCppWrapperCodegen()

    @staticmethod
    def get_device_include_path_jit(device: str) -> str:
        if device != _DEVICE:
            return CppWrapperCpu.get_device_include_path_jit(device)
        return CppWrapperCpu.get_device_include_path_jit("cpu") + "\n" + _header_lines()

    @staticmethod
    def get_device_include_path_aot(device: str) -> str:
        if device != _DEVICE:
            return CppWrapperCpu.get_device_include_path_aot(device)
        return CppWrapperCpu.get_device_include_path_aot("cpu") + "\n" + _header_lines()

    def _generate_kernel_call_helper(
        self, kernel_name, call_args, *, device=None, triton=True, arg_types=None, **kwargs
    ):
        tensors = [i for i, arg_type in enumerate(arg_types or ()) if isinstance(arg_type, str) and "*" in arg_type]
        if triton or device is None or device.type != _DEVICE or not tensors:
            super()._generate_kernel_call_helper(
                kernel_name, call_args, device=device, triton=triton, arg_types=arg_types, **kwargs
            )
            return
        handles = ", ".join(str(call_args[i]) for i in tensors)
        args = [
            f"({arg_types[i]})({_HOST_ACCESS}[{tensors.index(i)}])" if i in tensors else str(arg)
            for i, arg in enumerate(call_args)
        ]
        self.writeline("{")
        self.writeline(f"    torch_openreg::aoti::HostAccess<{len(tensors)}> {_HOST_ACCESS}({{{handles}}});")
        self.writeline("    " + self.wrap_kernel_call(kernel_name, args))
        self.writeline("}")

    def _on_openreg(self, constant_name: str) -> bool:
        return V.graph.get_original_value_of_constant(constant_name).device.type == _DEVICE

    def codegen_model_constructor(self):
        # constants_info_[i].device_type tells AOTInductor's runtime where to
        # keep constant i: in host memory, for an openreg constant.
        codegen_device = self.codegen_device
        self.codegen_device = lambda device: codegen_device(torch.device("cpu") if device.type == _DEVICE else device)
        try:
            super().codegen_model_constructor()
        finally:
            del self.codegen_device

    def _write_constants_unpacking(self):
        # Inductor's unpacking (CppWrapperCpu._write_constants_unpacking), but
        # an AOTInductor model reads an openreg constant's device copy.
        inputs_len = len(V.graph.graph_inputs)
        for idx, name in enumerate(V.graph.constants):
            if self._on_openreg(name):
                self.prefix.writeline_aot(
                    f"[[maybe_unused]] auto {name} = torch_openreg::aoti::device_constant(constants_->at({idx}));"
                )
            else:
                self.prefix.writeline_aot(f"[[maybe_unused]] auto& {name} = constants_->at({idx});")
            self.prefix.writeline_jit(f"[[maybe_unused]] auto {name} = std::move(inputs[{inputs_len + idx}]);")
