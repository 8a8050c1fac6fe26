"""torch_openreg: a simulated PyTorch accelerator named ``openreg``.

Importing this package (or just ``import torch``, through the ``torch.backends``
entry point) makes ``openreg`` a device like ``cuda``: ``x.to("openreg")``,
``torch.openreg.*`` and ``torch.accelerator.*``. Importing initializes no
device; the runtime starts at first use.
"""

from ._source_checkout import defer_to_installed_copy


def _autoload() -> None:
    """Entry point of the ``torch.backends`` group; importing the package does the work.

    Defined before ``import torch``: when this package is imported first, that
    import runs torch's autoload, which looks this function up while the
    package is still initializing; the registration below then follows.

    A build for another torch registers nothing. torch turns any exception
    here into a failed ``import torch``, so the refusal is a warning instead,
    and the package leaves ``sys.modules``: CPU work goes on, and an explicit
    ``import torch_openreg`` raises the refusal.
    """
    refusal = globals().get("_REFUSAL")
    if refusal is not None:
        import warnings

        warnings.warn(f"openreg is not available: {refusal}", stacklevel=2)
        for name in [n for n in sys.modules if n == __name__ or n.startswith(__name__ + ".")]:
            del sys.modules[name]


# In a source checkout without a built extension, the installed copy replaces
# this module in sys.modules and registers the backend; the rest of this file
# then only defines names in a module the import discards.
_DEFERRED = defer_to_installed_copy(__name__, __path__[0])

import functools  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402

from ._build_check import build_mismatch, torch_is_importing  # noqa: E402

_BACKEND = "openreg"
_REFUSAL = None if _DEFERRED else build_mismatch(torch.__version__)
if _REFUSAL is not None and not torch_is_importing(torch):
    raise ImportError(_REFUSAL, name=__name__)


def _claim_privateuse1() -> bool:
    """Returns False if openreg already holds PrivateUse1 (imported twice)."""
    current = torch._C._get_privateuse1_backend_name()
    if current == _BACKEND:
        return False
    if current != "privateuseone":
        raise RuntimeError(
            f"torch_openreg cannot register the '{_BACKEND}' device: the PrivateUse1 backend is already "
            f"taken by '{current}', and only one PrivateUse1 backend fits in a process."
        )
    return True


def _register_submodules(package) -> None:
    """Makes torch.openreg.memory (and every other submodule) the module
    torch_openreg.openreg.memory. torch registers the package alone as
    torch.openreg, so `from torch.openreg.memory import X` would otherwise run
    memory.py again as a second module, whose `from .. import _C` finds
    torch._C."""
    prefix = package.__name__ + "."
    for name, module in list(sys.modules.items()):
        if name.startswith(prefix):
            sys.modules[f"torch.{_BACKEND}.{name[len(prefix) :]}"] = module


def _register_opinfo_dtypes() -> None:
    from .testing import cuda_dtypes

    cuda_dtypes.register()


def _register_with_lightning(package) -> None:
    """Lightning's accelerator "openreg" (see _lightning.py), once ``package`` (Fabric's or the Trainer's) is imported."""
    from . import _lightning

    if package in _lightning.FABRIC_PACKAGES:
        _lightning.register_fabric(package)
    else:
        _lightning.register(package)


if not _DEFERRED and _REFUSAL is None and _claim_privateuse1():
    # Loading the extension registers the hooks, guard, allocator and kernels.
    from . import _C  # noqa: F401
    from . import openreg as _device_module

    torch.utils.rename_privateuse1_backend(_BACKEND)
    torch._register_device_module(_BACKEND, _device_module)
    _register_submodules(_device_module)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
    )
    from . import _dlpack_device

    _dlpack_device.install()
    from .ops import extra_ops_path  # noqa: F401  (also registers the custom operators)
    from . import _multiprocessing_reductions

    _multiprocessing_reductions.register()
    _device_module.memory._route_accelerator_snapshot()

    from ._inductor import registration as _compile_registration

    _compile_registration.install()

    from . import _distributed

    _distributed.register()

    from . import _backward_thread

    _backward_thread.install()

    from . import _torchvision_autocast

    _torchvision_autocast.register()

    from ._after_import import after_import

    # Fabric's packages first: each Trainer package is built on one and imports it first.
    for _package in ("lightning.fabric", "lightning.pytorch", "lightning_fabric", "pytorch_lightning"):
        after_import(_package, functools.partial(_register_with_lightning, _package))
    # OpInfo's dtypes for openreg: the CPU's, less those refused as CUDA refuses them.
    after_import("torch.testing._internal.common_methods_invocations", _register_opinfo_dtypes)
