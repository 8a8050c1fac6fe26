"""What test_lightning.py and test_lightning_standalone.py train: the same data, network and LightningModule for
``lightning`` and for the standalone ``pytorch_lightning`` (each passes its own LightningModule class)."""

import torch

QUIET = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)


def data_loader():
    generator = torch.Generator().manual_seed(1)
    data = torch.utils.data.TensorDataset(
        torch.randn(16, 6, generator=generator), torch.randn(16, 2, generator=generator)
    )
    return torch.utils.data.DataLoader(data, batch_size=4)


def network():
    """The network, and the set of (device, dtype) its first layer produced: what autocast and placement did."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    seen = set()
    net[0].register_forward_hook(lambda module, args, out: seen.add((str(out.device), out.dtype)))
    return net, seen


def regression_class(lightning_module):
    """A regression LightningModule over ``network()`` (SGD), built on the package's ``LightningModule``."""

    class Regression(lightning_module):
        def __init__(self):
            super().__init__()
            self.net, self.seen = network()

        def training_step(self, batch, index):
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(x).float(), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    return Regression


def assert_same_parameters(model, reference):
    for (name, value), expected in zip(model.named_parameters(), reference.parameters()):
        assert torch.equal(value.detach().cpu(), expected.detach()), name


def fabric_train(fabric):
    """Trains ``network()`` with ``fabric`` for one epoch; returns it and the (device, dtype) its first layer saw."""
    net, seen = network()
    model, optimizer = fabric.setup(net, torch.optim.SGD(net.parameters(), lr=0.1))
    for x, y in fabric.setup_dataloaders(data_loader()):
        fabric.backward(torch.nn.functional.mse_loss(model(x).float(), y))
        optimizer.step()
        optimizer.zero_grad()
    return net, seen
