"""Lightning: ``Trainer(accelerator="openreg")`` and ``Fabric(accelerator="openreg")``.

Lightning looks accelerators up by name in two registries (the Trainer's
``AcceleratorRegistry`` and Fabric's ``ACCELERATOR_REGISTRY``); it has no entry
point for them, so torch_openreg registers ``OpenRegAccelerator`` in both right
after ``lightning.pytorch`` is imported (``import lightning`` imports it too).

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
import warnings

import torch
from lightning.fabric import connector as fabric_connector
from lightning.fabric.accelerators import ACCELERATOR_REGISTRY as FABRIC_ACCELERATORS
from lightning.fabric.plugins.precision.amp import MixedPrecision as FabricMixedPrecision
from lightning.fabric.strategies import DDPStrategy as FabricDDPStrategy
from lightning.fabric.strategies import SingleDeviceStrategy as FabricSingleDeviceStrategy
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch.accelerators import Accelerator, AcceleratorRegistry
from lightning.pytorch.plugins.precision import MixedPrecision
from lightning.pytorch.strategies import DDPStrategy, SingleDeviceStrategy
from torch.nn.parallel import DistributedDataParallel
from lightning.pytorch.trainer.connectors import accelerator_connector

_DEVICE = torch._C._get_privateuse1_backend_name()


class OpenRegAccelerator(Accelerator):
    """openreg for Lightning, as ``CUDAAccelerator`` is CUDA's."""

    def setup_device(self, device: torch.device) -> None:
        if device.type != _DEVICE:
            raise MisconfigurationException(f"Device should be {_DEVICE}, got {device} instead")
        torch.openreg.set_device(device)

    def setup(self, trainer) -> None:
        torch.openreg.empty_cache()

    def teardown(self) -> None:
        torch.openreg.empty_cache()

    def get_device_stats(self, device) -> dict:
        return torch.openreg.memory_stats(device)

    @staticmethod
    def parse_devices(devices):
        """``devices`` as the Trainer takes it for GPUs: N (the first N), -1 or "-1" (all), "0,2" or [0, 2]."""
        if isinstance(devices, str):
            devices = devices.strip()
            devices = [int(d) for d in devices.split(",") if d.strip()] if "," in devices else int(devices)
        count = torch.openreg.device_count()
        if isinstance(devices, int):
            if devices < -1:
                raise MisconfigurationException(f"devices must be -1, 0 or positive for {_DEVICE}, got {devices}")
            devices = list(range(count if devices == -1 else devices))
        devices = list(devices)
        if not devices:
            return None
        if len(set(devices)) != len(devices):
            raise MisconfigurationException(f"{_DEVICE} devices must be unique, got {devices}")
        unavailable = [d for d in devices if not 0 <= d < count]
        if unavailable:
            raise MisconfigurationException(
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


def _openreg_selected(connector) -> bool:
    flag = connector._accelerator_flag
    return flag == _DEVICE or isinstance(flag, OpenRegAccelerator)


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


_WRAPPED = [  # (class, method): what register() wraps
    (accelerator_connector._AcceleratorConnector, "_choose_strategy"),
    (accelerator_connector._AcceleratorConnector, "_check_and_init_precision"),
    (fabric_connector._Connector, "_choose_strategy"),
    (fabric_connector._Connector, "_check_and_init_precision"),
    (DDPStrategy, "_setup_model"),
    (DDPStrategy, "determine_ddp_device_ids"),
    (FabricDDPStrategy, "setup_module"),
    (FabricDDPStrategy, "_determine_ddp_device_ids"),
]


def register() -> None:
    missing = [f"{owner.__module__}.{owner.__name__}.{name}" for owner, name in _WRAPPED if not hasattr(owner, name)]
    if missing:
        warnings.warn(
            f"torch_openreg: accelerator='{_DEVICE}' is not registered with this Lightning release: "
            f"it lacks {', '.join(missing)}, which choose the device of single-device training and of mixed "
            "precision or build DDP; without openreg's answer there, Lightning would train elsewhere or fail"
        )
        return
    _place_on_openreg(accelerator_connector._AcceleratorConnector, SingleDeviceStrategy, MixedPrecision)
    _place_on_openreg(fabric_connector._Connector, FabricSingleDeviceStrategy, FabricMixedPrecision)
    _build_ddp_on_an_openreg_stream(DDPStrategy, "_setup_model", "determine_ddp_device_ids")
    _build_ddp_on_an_openreg_stream(FabricDDPStrategy, "setup_module", "_determine_ddp_device_ids")
    OpenRegAccelerator.register_accelerators(AcceleratorRegistry)
    OpenRegAccelerator.register_accelerators(FABRIC_ACCELERATORS)
