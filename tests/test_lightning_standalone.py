"""Lightning's standalone packages, ``pytorch_lightning`` and ``lightning_fabric`` (the same release as ``lightning``
under other module names, with registries and connectors of their own): ``accelerator="openreg"`` trains on openreg
and ends with the CPU's parameters bit for bit, as with ``lightning`` (test_lightning.py). Runs only where
pytorch_lightning is installed (it is not a dependency of torch_openreg)."""

import os

import pytest
import torch

from conftest import check_ok, run_python

pl = pytest.importorskip(
    "pytorch_lightning", reason="pytorch_lightning is not installed (pip install pytorch_lightning to run this test)"
)
import lightning_fabric  # noqa: E402
from lightning_fabric.accelerators import ACCELERATOR_REGISTRY  # noqa: E402
from lightning_fabric.utilities.exceptions import MisconfigurationException  # noqa: E402
from pytorch_lightning.accelerators import AcceleratorRegistry  # noqa: E402
from lightning_models import QUIET, assert_same_parameters, data_loader, fabric_train, regression_class  # noqa: E402

Regression = regression_class(pl.LightningModule)


def test_openreg_is_registered_with_both_standalone_packages():
    assert "openreg" in AcceleratorRegistry.available_accelerators()
    assert "openreg" in ACCELERATOR_REGISTRY.available_accelerators()
    trainer = pl.Trainer(accelerator="openreg", devices=[1], default_root_dir=os.devnull, **QUIET)
    assert trainer.strategy.root_device == torch.device("openreg", 1)
    assert isinstance(trainer.accelerator, pl.accelerators.Accelerator)


def test_bad_devices_are_refused_with_the_packages_own_exception():
    with pytest.raises(MisconfigurationException, match=r"requested openreg devices \[5\], but this process has 2"):
        pl.Trainer(accelerator="openreg", devices=[5], default_root_dir=os.devnull, **QUIET)


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_trainer_trains_on_openreg_as_on_the_cpu(precision, tmp_path):
    dtype = {"32-true": torch.float32, "bf16-mixed": torch.bfloat16}[precision]
    models = {}
    for accelerator in ("openreg", "cpu"):
        models[accelerator] = Regression()
        trainer = pl.Trainer(
            accelerator=accelerator, devices=1, max_epochs=2, precision=precision, default_root_dir=tmp_path, **QUIET
        )
        trainer.fit(models[accelerator], data_loader())
    assert models["openreg"].seen == {("openreg:0", dtype)}
    assert models["cpu"].seen == {("cpu", dtype)}
    assert_same_parameters(models["openreg"], models["cpu"])


def test_standalone_fabric_trains_on_openreg_as_on_the_cpu():
    trained = {}
    for accelerator in ("openreg", "cpu"):
        fabric = lightning_fabric.Fabric(accelerator=accelerator, devices=1, precision="bf16-mixed")
        net, seen = fabric_train(fabric)
        assert seen == {(str(fabric.device), torch.bfloat16)}
        trained[accelerator] = net
    assert next(trained["openreg"].parameters()).device == torch.device("openreg", 0)
    assert_same_parameters(trained["openreg"], trained["cpu"])


@pytest.mark.slow
@pytest.mark.long
def test_registered_when_the_standalone_packages_were_imported_first():
    """With autoload off, the packages can be imported before torch_openreg: the registration then happens at once."""
    result = run_python(
        """
        import pytorch_lightning
        import torch_openreg
        from pytorch_lightning.accelerators import AcceleratorRegistry
        from lightning_fabric.accelerators import ACCELERATOR_REGISTRY
        print("openreg" in AcceleratorRegistry.available_accelerators(), "openreg" in ACCELERATOR_REGISTRY)
        """,
        TORCH_DEVICE_BACKEND_AUTOLOAD=0,
    )
    check_ok(result)
    assert result.stdout.split() == ["True", "True"]
