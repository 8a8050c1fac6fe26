"""Lightning on openreg with nothing but ``accelerator="openreg"``: the Trainer and Fabric train on the openreg
device, under the precision asked for, and end with the CPU's parameters bit for bit (CPU Lightning with the same
settings; for "16-mixed", which CPU Lightning turns into bf16, the CPU with an explicit float16 plugin). Two devices
train with DDP over orccl as two CPU processes do over gloo. Runs only where lightning is installed (it is not a
dependency of torch_openreg)."""

import json
import os
import sys
from pathlib import Path

import pytest
import torch

from conftest import check_ok, run_in_own_session, run_python
from distributed_launcher import RESULT_PREFIX, free_port

L = pytest.importorskip("lightning", reason="lightning is not installed (pip install lightning to run this test)")
from lightning.fabric.accelerators import ACCELERATOR_REGISTRY as FABRIC_ACCELERATORS  # noqa: E402
from lightning.fabric.plugins.precision.amp import MixedPrecision as FabricMixedPrecision  # noqa: E402
from lightning.fabric.utilities.exceptions import MisconfigurationException  # noqa: E402
from lightning.pytorch.accelerators import AcceleratorRegistry  # noqa: E402
from lightning.pytorch.plugins.precision import MixedPrecision  # noqa: E402
from lightning_models import QUIET, assert_same_parameters, data_loader, fabric_train, regression_class  # noqa: E402

DDP_SCRIPT = Path(__file__).parent / "distributed_workers" / "lightning_ddp.py"
Regression = regression_class(L.LightningModule)


def cpu_settings(precision):
    if precision == "16-mixed":  # CPU Lightning would train in bf16 instead
        return dict(plugins=[MixedPrecision("16-mixed", "cpu")])
    return dict(precision=precision)


def test_openreg_is_registered_with_the_trainer_and_fabric():
    assert "openreg" in AcceleratorRegistry.available_accelerators()
    assert "openreg" in FABRIC_ACCELERATORS.available_accelerators()
    trainer = L.Trainer(accelerator="openreg", devices=1, default_root_dir=os.devnull, **QUIET)
    assert trainer.strategy.root_device == torch.device("openreg", 0)
    assert trainer.num_devices == 1


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed", "16-mixed"])
def test_trainer_trains_on_openreg_as_on_the_cpu(precision, tmp_path):
    dtype = {"32-true": torch.float32, "bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}[precision]
    models = {}
    for accelerator, settings in (("openreg", dict(precision=precision)), ("cpu", cpu_settings(precision))):
        models[accelerator] = Regression()
        trainer = L.Trainer(
            accelerator=accelerator, devices=1, max_epochs=2, default_root_dir=tmp_path, **settings, **QUIET
        )
        trainer.fit(models[accelerator], data_loader())
    assert models["openreg"].seen == {("openreg:0", dtype)}
    assert models["cpu"].seen == {("cpu", dtype)}
    if precision == "16-mixed":
        assert trainer.precision_plugin.scaler is not None
    # (the Trainer moves the model back to the CPU when fit ends, as it does from CUDA)
    assert_same_parameters(models["openreg"], models["cpu"])


def test_trainer_uses_the_devices_asked_for(tmp_path):
    model = Regression()
    trainer = L.Trainer(accelerator="openreg", devices=[1], max_epochs=1, default_root_dir=tmp_path, **QUIET)
    trainer.fit(model, data_loader())
    assert trainer.strategy.root_device == torch.device("openreg", 1)
    assert model.seen == {("openreg:1", torch.float32)}


@pytest.mark.parametrize(
    "devices, message",
    [([5], r"requested openreg devices \[5\], but this process has 2"), ([0, 0], "must be unique"), (-3, "got -3")],
)
def test_bad_devices_are_refused(devices, message):
    with pytest.raises(MisconfigurationException, match=message):
        L.Trainer(accelerator="openreg", devices=devices, default_root_dir=os.devnull, **QUIET)


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed", "16-mixed"])
def test_fabric_trains_on_openreg_as_on_the_cpu(precision):
    dtype = {"32-true": torch.float32, "bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}[precision]
    trained = {}
    for accelerator in ("openreg", "cpu"):
        settings = dict(precision=precision)
        if accelerator == "cpu" and precision == "16-mixed":
            settings = dict(plugins=[FabricMixedPrecision("16-mixed", "cpu")])
        fabric = L.Fabric(accelerator=accelerator, devices=1, **settings)
        net, seen = fabric_train(fabric)
        assert seen == {(str(fabric.device), dtype)}
        trained[accelerator] = net
    assert next(trained["openreg"].parameters()).device == torch.device("openreg", 0)
    assert_same_parameters(trained["openreg"], trained["cpu"])


def run_lightning_ddp(accelerator, tmp_path, timeout=240):
    """Runs the DDP script as a user would (Lightning starts the second rank); {rank: result}."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), GLOO_SOCKET_IFNAME="lo")
    env.pop("LOCAL_RANK", None)
    completed = run_in_own_session(
        [sys.executable, str(DDP_SCRIPT), accelerator, "bf16-mixed"], timeout, cwd=tmp_path, env=env
    )
    output = completed.stdout + completed.stderr
    results = [json.loads(line[len(RESULT_PREFIX) :]) for line in output.splitlines() if line.startswith(RESULT_PREFIX)]
    assert len(results) == 2, output
    return {result["rank"]: result for result in results}


@pytest.mark.long
def test_two_devices_train_with_ddp_over_orccl_as_the_cpu_over_gloo(tmp_path):
    openreg = run_lightning_ddp("openreg", tmp_path)
    cpu = run_lightning_ddp("cpu", tmp_path)
    for rank in (0, 1):
        assert openreg[rank]["root_device"] == f"openreg:{rank}"
        assert openreg[rank]["backend"] == "orccl"
        assert openreg[rank]["seen"] == [[f"openreg:{rank}", "torch.bfloat16"]]
        assert cpu[rank]["backend"] == "gloo"
        assert cpu[rank]["seen"] == [["cpu", "torch.bfloat16"]]
        assert openreg[rank]["parameters"] == cpu[0]["parameters"]


@pytest.mark.slow
def test_registered_when_lightning_was_imported_first():
    """With autoload off, Lightning can be imported before torch_openreg: the registration then happens at once."""
    result = run_python(
        """
        import lightning
        import torch_openreg
        from lightning.pytorch.accelerators import AcceleratorRegistry
        print("openreg" in AcceleratorRegistry.available_accelerators())
        """,
        TORCH_DEVICE_BACKEND_AUTOLOAD=0,
    )
    check_ok(result)
    assert result.stdout.split() == ["True"]
