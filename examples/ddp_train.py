"""Data-parallel training of a small CNN with DistributedDataParallel on openreg, checked against one CPU process.

Every rank binds openreg:LOCAL_RANK, trains on its slice of each global batch, and DDP averages the gradients.
The same steps run in one process on the CPU over the whole global batch; rank 0 prints both loss curves, and the
script exits non-zero if they disagree: at all with one rank (the same arithmetic), by more than --tolerance
times the largest loss with more (docs/distributed.md, "End to end").

    torchrun --nproc-per-node 2 examples/ddp_train.py [--steps N] [--tolerance T]
    OPENREG_DEVICE_COUNT=4 torchrun --nproc-per-node 4 examples/ddp_train.py
"""

import argparse
import copy
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from distributed_run import check_curves, global_mean, join, train_on_slices


class ConvNet(nn.Module):
    """No batch norm: its statistics over a rank's slice would differ from those over the global batch."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        return self.fc(torch.flatten(F.relu(self.conv2(x)), 1))


def train(model, device, steps, rank=0, world=1):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return train_on_slices(model, optimizer, device, steps, rank, world)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--tolerance", type=float, default=1e-4)
    parser.add_argument("--device", default="openreg", help="the device type to train on (cpu: plain gloo DDP)")
    args = parser.parse_args()

    device = join(args.device)
    torch.manual_seed(0)
    model = ConvNet()
    reference = [loss.item() for loss in train(copy.deepcopy(model), "cpu", args.steps)]
    ddp = DDP(model.to(device), device_ids=None if device.type == "cpu" else [device.index])
    curve = global_mean(train(ddp, device, args.steps, dist.get_rank(), dist.get_world_size()))
    # One rank runs the single process's arithmetic; more split the batch sums and add the parts in another order.
    tolerance = 0.0 if dist.get_world_size() == 1 else args.tolerance
    return 0 if check_curves(f"{device.type} DDP", curve, reference, tolerance) else 1


if __name__ == "__main__":
    sys.exit(main())
