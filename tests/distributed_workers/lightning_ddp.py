"""Trains with Lightning's DDP on two devices, as a user's script does: ``python lightning_ddp.py ACCELERATOR
PRECISION``; Lightning starts the second rank by running this script again. Each rank prints ``RESULT <json>``:
its root device, the process group's backend, the (device, dtype) the first layer produced, and the trained
parameters' bytes."""

import json
import os
import sys

import lightning as L
import torch

accelerator, precision = sys.argv[1:3]


class Regression(L.LightningModule):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        self.seen = set()
        self.net[0].register_forward_hook(lambda module, args, out: self.seen.add((str(out.device), str(out.dtype))))

    def training_step(self, batch, index):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x).float(), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


generator = torch.Generator().manual_seed(1)
data = torch.utils.data.TensorDataset(torch.randn(32, 6, generator=generator), torch.randn(32, 2, generator=generator))
model = Regression()
trainer = L.Trainer(
    accelerator=accelerator,
    devices=2,
    strategy="ddp",
    precision=precision,
    max_epochs=2,
    default_root_dir=os.getcwd(),
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)
trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=4))
result = {
    "rank": trainer.global_rank,
    "root_device": str(trainer.strategy.root_device),
    "backend": torch.distributed.get_backend(),
    "seen": sorted(model.seen),
    "parameters": [p.detach().cpu().numpy().tobytes().hex() for p in model.parameters()],
}
print("RESULT " + json.dumps(result), flush=True)
