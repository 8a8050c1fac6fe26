"""What ``torch._inductor.aoti_load_package`` adds for openreg: clear errors
where an AOTInductor package meets the wrong device or a missing operator, and
openreg tensors accepted as new constants.

- A package compiled for another device (the CPU) called with openreg tensors
  would run its host kernels on device memory, which faults under memory
  protection (a crash, as a CPU kernel handed CUDA pointers would be): its
  ``AOTICompiledModel`` refuses openreg inputs first. (A package compiled
  for openreg checks its own inputs: csrc/inductor/AotiModelRunner.cpp.)
- A package compiled for openreg keeps its constants in host memory
  (csrc/inductor/AotiConstants.cpp says why), so ``load_constants`` hands
  it host copies of openreg tensors, where AOTInductor's runtime would refuse
  them ("on device type 20 but expected device type 0"); with
  ``user_managed=True`` (the caller keeps the tensors the model reads) it
  takes CPU tensors only.
- A package whose model calls a custom operator no loaded library registers
  fails to load with torch's "Could not find schema for ns::op"; the error
  adds which library to load.

Installed after ``torch._inductor.package`` is imported (registration.py),
which is where ``aoti_load_package`` finds ``load_package`` when called.
"""

import functools
import re

import torch
from torch._inductor import package
from torch.utils import _pytree as pytree

_DEVICE = "openreg"
# The namespaces of operators.yaml that live in a library users load themselves.
_LOADABLE_LIBRARIES = {"openreg_extra": "torch.ops.load_library(torch_openreg.extra_ops_path())"}
_MISSING_OPERATOR = re.compile(r"Could not find schema for (\w+)::(\w+)")


def _refuse_openreg_inputs_to_other_devices(call):
    @functools.wraps(call)
    def call_checking_devices(self, *args, **kwargs):
        device = self.get_metadata().get("AOTI_DEVICE_KEY")
        if device != _DEVICE:
            for value in pytree.tree_leaves((args, kwargs)):
                if isinstance(value, torch.Tensor) and value.device.type == _DEVICE:
                    raise ValueError(
                        f"this AOTInductor package was compiled for {device} and got an input on {value.device}: "
                        f"move the inputs to {device}, or compile the package from a program exported with "
                        f"{_DEVICE} inputs"
                    )
        return call(self, *args, **kwargs)

    return call_checking_devices


def _constants_to_host_memory(load_constants):
    @functools.wraps(load_constants)
    def load_constants_openreg(self, constants_map, *args, user_managed=False, **kwargs):
        if self.get_metadata().get("AOTI_DEVICE_KEY") == _DEVICE:
            on_device = sorted(name for name, value in constants_map.items() if value.device.type == _DEVICE)
            if on_device and user_managed:
                raise ValueError(
                    f"an AOTInductor package compiled for {_DEVICE} keeps its constants in host memory: with "
                    f"user_managed=True, pass CPU tensors ({', '.join(on_device)} are on {_DEVICE})"
                )
            constants_map = {name: value.cpu() for name, value in constants_map.items()}
        return load_constants(self, constants_map, *args, user_managed=user_managed, **kwargs)

    return load_constants_openreg


def _name_the_library_of_missing_operators(load_package):
    @functools.wraps(load_package)
    def load_package_openreg(*args, **kwargs):
        try:
            return load_package(*args, **kwargs)
        except RuntimeError as error:
            missing = _MISSING_OPERATOR.search(str(error))
            if missing is None:
                raise
            namespace, name = missing.groups()
            load = _LOADABLE_LIBRARIES.get(namespace, "torch.ops.load_library(<the library>)")
            raise RuntimeError(
                f"{error}\nThe AOTInductor package calls the custom operator {namespace}::{name}, which no library "
                f"loaded in this process registers: load it before aoti_load_package ({load})"
            ) from error

    return load_package_openreg


@functools.cache
def install() -> None:
    model = package.AOTICompiledModel
    model.__call__ = _refuse_openreg_inputs_to_other_devices(model.__call__)
    model.load_constants = _constants_to_host_memory(model.load_constants)
    package.load_package = _name_the_library_of_missing_operators(package.load_package)
