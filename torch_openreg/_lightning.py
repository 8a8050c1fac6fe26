"""Lightning: ``Trainer(accelerator="openreg")`` and ``Fabric(accelerator="openreg")``.

Lightning looks accelerators up by name in two registries (the Trainer's
``AcceleratorRegistry`` and Fabric's ``ACCELERATOR_REGISTRY``); it has no entry
point for them, so torch_openreg registers an ``OpenRegAccelerator`` in each
right after its package is imported: ``lightning.fabric`` and
``lightning.pytorch`` (``import lightning`` imports both), and the standalone
packages of the same release, ``lightning_fabric`` and ``pytorch_lightning``,
which are the same code under other module names, with registries and
connectors of their own.

Registering is not enough. Two decisions of Lightning's connectors name devices
from a fixed list (``cuda``, ``gpu``, ``mps``) instead of asking the
accelerator, and for any other accelerator they quietly pick other devices
(and DDP names CUDA's streams):

- with one device and ``strategy="auto"``, the strategy's root device is the
  CPU, so the model and batches never leave it;
- with ``precision="16-mixed"`` or ``"bf16-mixed"``, autocast (and the
  GradScaler) target ``cuda``, which on a machine without CUDA disables them:
  training runs in float32;
- DDP builds ``DistributedDataParallel`` inside a new ``torch.cuda.Stream`` for
  every device but the CPU, which raises without CUDA.

For the connectors of the Trainer and of Fabric, torch_openreg wraps those two
decisions (``_choose_strategy`` and ``_check_and_init_precision``, private to
Lightning): when openreg is the accelerator, the single-device strategy gets
the openreg device Lightning parsed from ``devices`` and mixed precision
targets openreg; and DDP on openreg is built inside a new openreg stream, as
Lightning does on CUDA. Everything else is Lightning's own, multi-device DDP
included (its default process-group backend comes from torch's per-device map,
where openreg's is orccl). If a Lightning release no longer has these methods,
openreg is not registered and a warning says why, rather than training
somewhere else.
"""

import functools
import importlib
import warnings

import torch
from torch.nn.parallel import DistributedDataParallel

_DEVICE = torch._C._get_privateuse1_backend_name()

# Lightning's two packagings of one release: the unified package's modules, and the standalone packages'.
TRAINER_PACKAGES = {"lightning.pytorch": "lightning.fabric", "pytorch_lightning": "lightning_fabric"}
FABRIC_PACKAGES = tuple(TRAINER_PACKAGES.values())


class _OpenRegMethods:
    """openreg for Lightning, as ``CUDAAccelerator`` is CUDA's (Fabric's and the Trainer's accelerator share these)."""

    _misconfiguration = RuntimeError  # each package's MisconfigurationException, set on its class

    def setup_device(self, device: torch.device) -> None:
        if device.type != _DEVICE:
            raise self._misconfiguration(f"Device should be {_DEVICE}, got {device} instead")
        torch.openreg.set_device(device)

    def setup(self, trainer) -> None:
        torch.openreg.empty_cache()

    def teardown(self) -> None:
        torch.openreg.empty_cache()

    def get_device_stats(self, device) -> dict:
        return torch.openreg.memory_stats(device)

    @classmethod
    def parse_devices(cls, devices):
        """``devices`` as the Trainer takes it for GPUs: N (the first N), -1 or "-1" (all), "0,2" or [0, 2]."""
        if isinstance(devices, str):
            devices = devices.strip()
            devices = [int(d) for d in devices.split(",") if d.strip()] if "," in devices else int(devices)
        count = torch.openreg.device_count()
        if isinstance(devices, int):
            if devices < -1:
                raise cls._misconfiguration(f"devices must be -1, 0 or positive for {_DEVICE}, got {devices}")
            devices = list(range(count if devices == -1 else devices))
        devices = list(devices)
        if not devices:
            return None
        if len(set(devices)) != len(devices):
            raise cls._misconfiguration(f"{_DEVICE} devices must be unique, got {devices}")
        unavailable = [d for d in devices if not 0 <= d < count]
        if unavailable:
            raise cls._misconfiguration(
                f"You requested {_DEVICE} devices {devices}, but this process has {count} "
                f"(0 to {count - 1}; OPENREG_DEVICE_COUNT sets how many)"
            )
        return devices

    @staticmethod
    def get_parallel_devices(devices) -> list:
        return [torch.device(_DEVICE, index) for index in devices]

    @staticmethod
    def auto_device_count() -> int:
        return torch.openreg.device_count()

    @staticmethod
    def is_available() -> bool:
        return torch.openreg.device_count() > 0

    @staticmethod
    def name() -> str:
        return _DEVICE

    @classmethod
    def register_accelerators(cls, accelerator_registry) -> None:
        accelerator_registry.register(cls.name(), cls, description=cls.__name__)


# package name -> its OpenRegAccelerator class (the Trainer's in a Trainer package, Fabric's in a Fabric package)
ACCELERATORS = {}


def _accelerator_class(base, misconfiguration):
    return type(
        "OpenRegAccelerator", (_OpenRegMethods, base), {"__module__": __name__, "_misconfiguration": misconfiguration}
    )


def _openreg_selected(connector) -> bool:
    flag = connector._accelerator_flag
    return flag == _DEVICE or isinstance(flag, _OpenRegMethods)


def _place_on_openreg(connector_class, single_device_strategy, mixed_precision) -> None:
    """Wraps the connector's two device decisions (see the module's docstring)."""
    choose_strategy = connector_class._choose_strategy
    choose_precision = connector_class._check_and_init_precision

    @functools.wraps(choose_strategy)
    def _choose_strategy(self):
        strategy = choose_strategy(self)
        if (
            _openreg_selected(self)
            and type(strategy) is single_device_strategy
            and strategy.root_device.type != _DEVICE
        ):
            return single_device_strategy(device=self._parallel_devices[0])
        return strategy

    @functools.wraps(choose_precision)
    def _check_and_init_precision(self):
        if not _openreg_selected(self):
            return choose_precision(self)
        with warnings.catch_warnings():
            # Its "16-mixed" plugin for cuda, replaced below, would warn that CUDA's GradScaler is disabled.
            warnings.filterwarnings("ignore", message=".*GradScaler is enabled, but CUDA is not available")
            precision = choose_precision(self)
        if type(precision) is mixed_precision and precision.device != _DEVICE:
            # Made anew rather than redirected: a "16-mixed" plugin holds a GradScaler for its device.
            return mixed_precision(precision.precision, _DEVICE)
        return precision

    connector_class._choose_strategy = _choose_strategy
    connector_class._check_and_init_precision = _check_and_init_precision


def _build_ddp_on_an_openreg_stream(strategy_class, method, device_ids) -> None:
    """Wraps the strategy's ``method(module)``, which builds DistributedDataParallel on a CUDA stream."""
    build = getattr(strategy_class, method)

    @functools.wraps(build)
    def build_on_openreg(self, module):
        if self.root_device.type != _DEVICE:
            return build(self, module)
        with torch.openreg.stream(torch.openreg.Stream()):
            return DistributedDataParallel(module=module, device_ids=getattr(self, device_ids)(), **self._ddp_kwargs)

    setattr(strategy_class, method, build_on_openreg)


def _import(package, *names):
    return [importlib.import_module(f"{package}.{name}") for name in names]


def _missing(wrapped) -> list:
    return [f"{owner.__module__}.{owner.__name__}.{name}" for owner, name in wrapped if not hasattr(owner, name)]


def _warn_missing(package, missing) -> None:
    warnings.warn(
        f"torch_openreg: accelerator='{_DEVICE}' is not registered with {package} of this Lightning release: "
        f"it lacks {', '.join(missing)}, which choose the device of single-device training and of mixed "
        "precision or build DDP; without openreg's answer there, Lightning would train elsewhere or fail"
    )


def _register(package, connector, strategies, mixed_precision, ddp_methods, accelerators, registry, exceptions):
    """Wraps one package's device decisions and registers its accelerator, or warns and registers nothing."""
    build_ddp, ddp_device_ids = ddp_methods
    wrapped = [
        (connector, "_choose_strategy"),
        (connector, "_check_and_init_precision"),
        (strategies.DDPStrategy, build_ddp),
        (strategies.DDPStrategy, ddp_device_ids),
    ]
    missing = _missing(wrapped)
    if missing:
        _warn_missing(package, missing)
        return
    _place_on_openreg(connector, strategies.SingleDeviceStrategy, mixed_precision)
    _build_ddp_on_an_openreg_stream(strategies.DDPStrategy, build_ddp, ddp_device_ids)
    accelerator = _accelerator_class(accelerators.Accelerator, exceptions.MisconfigurationException)
    accelerator.register_accelerators(registry)
    ACCELERATORS[package] = accelerator


def register_fabric(package="lightning.fabric") -> None:
    """Fabric's ``accelerator="openreg"`` in ``package`` (``lightning.fabric`` or ``lightning_fabric``)."""
    if package in ACCELERATORS:
        return
    connector, accelerators, amp, strategies, exceptions = _import(
        package, "connector", "accelerators", "plugins.precision.amp", "strategies", "utilities.exceptions"
    )
    ddp_methods = ("setup_module", "_determine_ddp_device_ids")
    registry = accelerators.ACCELERATOR_REGISTRY
    _register(
        package, connector._Connector, strategies, amp.MixedPrecision, ddp_methods, accelerators, registry, exceptions
    )


def register(package="lightning.pytorch") -> None:
    """The Trainer's ``accelerator="openreg"`` in ``package`` (``lightning.pytorch`` or ``pytorch_lightning``), and
    Fabric's in the Fabric package it is built on."""
    fabric = TRAINER_PACKAGES[package]
    register_fabric(fabric)
    if package in ACCELERATORS:
        return
    connectors, accelerators, precision, strategies = _import(
        package, "trainer.connectors.accelerator_connector", "accelerators", "plugins.precision", "strategies"
    )
    (exceptions,) = _import(fabric, "utilities.exceptions")
    connector = connectors._AcceleratorConnector
    ddp_methods = ("_setup_model", "determine_ddp_device_ids")
    registry = accelerators.AcceleratorRegistry
    _register(package, connector, strategies, precision.MixedPrecision, ddp_methods, accelerators, registry, exceptions)
