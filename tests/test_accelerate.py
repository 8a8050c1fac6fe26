"""Hugging Face accelerate on openreg: selected with ACCELERATE_TORCH_DEVICE (see docs/libraries.md), a prepared
training loop gives the CPU's parameters bit for bit. Runs only where accelerate is installed (it is not a
dependency of torch_openreg, and the test must not need the network)."""

import pytest

from conftest import check_ok, run_python

pytest.importorskip("accelerate", reason="accelerate is not installed (pip install accelerate to run this test)")

TRAIN = """
import torch
from accelerate import Accelerator

OPTIMIZER_FIRST = ORDER == "optimizer_first"

def train(device_type):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    data = torch.utils.data.TensorDataset(torch.randn(16, 6), torch.randn(16, 2))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    make_optimizer = lambda: torch.optim.AdamW(model.parameters(), lr=0.01)
    if device_type == "cpu":
        optimizer = make_optimizer()
        for x, y in loader:
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
            optimizer.zero_grad()
        return model, None
    accelerator = Accelerator()
    if OPTIMIZER_FIRST:  # accelerate's usual pattern
        model, optimizer, loader = accelerator.prepare(model, make_optimizer(), loader)
    else:  # the pattern accelerate documents for TPUs: the optimizer over the moved parameters
        model = accelerator.prepare(model)
        optimizer, loader = accelerator.prepare(make_optimizer(), loader)
    for x, y in loader:
        assert x.device.type == device_type, x.device
        accelerator.backward(torch.nn.functional.mse_loss(model(x), y))
        optimizer.step()
        optimizer.zero_grad()
    return model, accelerator

expected, _ = train("cpu")
actual, accelerator = train("openreg")
print("device", accelerator.device, accelerator.distributed_type)
print("same", all(torch.equal(a.cpu(), e) and a.device.type == "openreg"
                  for a, e in zip(actual.parameters(), expected.parameters())))
"""


@pytest.mark.slow
@pytest.mark.parametrize("order", ["model_first", "optimizer_first"])
def test_accelerator_uses_openreg_when_selected_and_trains_as_the_cpu(order):
    out = check_ok(run_python(f"ORDER = {order!r}\n" + TRAIN, timeout=300, ACCELERATE_TORCH_DEVICE="openreg"))
    assert "device openreg DistributedType.NO" in out, out
    assert "same True" in out, out


@pytest.mark.slow
def test_without_the_variable_accelerate_picks_the_cpu():
    """accelerate 1.x chooses among the accelerators it knows by name; openreg is not one (docs/libraries.md)."""
    out = check_ok(
        run_python(
            "from accelerate import Accelerator; print('device', Accelerator().device)",
            timeout=300,
            ACCELERATE_TORCH_DEVICE=None,
        )
    )
    assert "device cpu" in out, out
