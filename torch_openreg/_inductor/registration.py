"""When and how openreg registers with Dynamo and Inductor.

Importing ``torch._dynamo`` costs about a second and ``torch._inductor``
about as much, so ``import torch`` (whose autoload imports torch_openreg)
must not import them. Each registration instead runs right after the module
that needs it has been imported:

- Dynamo: ``register_interface_for_device("openreg", ...)`` after
  ``torch._dynamo.device_interface`` (nothing in torch looks a PrivateUse1
  interface up by itself: ``get_interface_for_device`` raises);
- Dynamo's skip rules: the package's Python runs eagerly, as torch.cuda's does,
  after ``torch._dynamo.trace_rules``;
- fake tensors: the CPU's layout rule for openreg convolutions
  (fake_convolution.py) after ``torch._subclasses.fake_impls``, which
  ``import torch`` has usually imported already (then at once), and the
  backend's metadata on fake tensors of openreg tensors (fake_metadata.py)
  after ``torch._subclasses.fake_tensor``;
- Inductor: ``register_backend_for_device`` and ``register_device_op_overrides``
  after ``torch._inductor.compile_fx``, which every compilation goes through
  (``torch.compile``'s Inductor backend, cache loads). By then the Inductor
  modules the backend classes derive from are fully imported; earlier, in the
  middle of Inductor's own import chain, importing them could meet a partially
  initialized module. Without the op overrides Inductor fails with
  ``KeyError: 'openreg'`` (``get_device_op_overrides``);
- AOTInductor packages: the device and operator checks of aoti_package.py
  after ``torch._inductor.package``, where ``aoti_load_package`` finds its
  loader.

Only this module is imported with the package; it imports nothing of torch.
"""

from .._after_import import after_import

_DEVICE = "openreg"


def _register_with_dynamo() -> None:
    from torch._dynamo.device_interface import register_interface_for_device

    from .device_interface import OpenRegInterface

    register_interface_for_device(_DEVICE, OpenRegInterface)


def _skip_in_dynamo() -> None:
    # Dynamo inlines third-party Python by default but skips torch's own, so
    # torch.cuda.get_rng_state called inside a compiled function runs eagerly
    # while torch.openreg.get_rng_state would be traced. freeze_rng_state (torch
    # testing) calls the accelerator's get/set_rng_state under no_dispatch(),
    # where tracing fails: then even compiling for the CPU would fail with
    # torch_openreg installed. The device module is treated as torch.cuda is.
    from torch._dynamo import trace_rules

    trace_rules.add("torch_openreg")


def _predict_convolution_layouts_as_cpu() -> None:
    from . import fake_convolution

    fake_convolution.install()


def _copy_metadata_to_fake_tensors() -> None:
    from . import fake_metadata

    fake_metadata.install()


def _check_aoti_packages() -> None:
    from . import aoti_package

    aoti_package.install()


def _register_with_inductor() -> None:
    from torch._inductor.codegen.common import register_backend_for_device, register_device_op_overrides

    from . import cpp_build_options, cpp_wrapper, overrides
    from .cache_key import OpenRegCodegenVersion
    from .cpp_wrapper import OpenRegCppWrapperCodegen
    from .device_op_overrides import OpenRegDeviceOpOverrides
    from .scheduling import OpenRegScheduling
    from .unsupported_wrappers import OpenRegWrapperFxCodegen
    from .wrapper import OpenRegPythonWrapperCodegen

    register_backend_for_device(
        _DEVICE,
        OpenRegScheduling,
        OpenRegPythonWrapperCodegen,
        OpenRegCppWrapperCodegen,
        OpenRegWrapperFxCodegen,
        device_custom_pass=OpenRegCodegenVersion(),
    )
    register_device_op_overrides(_DEVICE, OpenRegDeviceOpOverrides())
    overrides.install()
    cpp_wrapper.install()
    cpp_build_options.install()


_AFTER_IMPORT = {
    "torch._subclasses.fake_impls": _predict_convolution_layouts_as_cpu,
    "torch._subclasses.fake_tensor": _copy_metadata_to_fake_tensors,
    "torch._dynamo.device_interface": _register_with_dynamo,
    "torch._dynamo.trace_rules": _skip_in_dynamo,
    "torch._inductor.compile_fx": _register_with_inductor,
    "torch._inductor.package": _check_aoti_packages,
}


def install() -> None:
    """Registers now with what is already imported, and later with the rest."""
    for name, register in _AFTER_IMPORT.items():
        after_import(name, register)
