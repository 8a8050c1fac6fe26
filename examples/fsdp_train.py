"""Fully sharded training (FSDP2, fully_shard) of an MLP on openreg, checked against one CPU process.

Every rank binds openreg:LOCAL_RANK and holds a shard of every parameter and of the optimizer state; FSDP gathers
each layer's parameters for its forward and backward and reduce-scatters the gradients. The same steps run in one
process on the CPU over the whole global batch; rank 0 prints both loss curves, and the script exits non-zero if
they disagree beyond the tolerance docs/distributed.md states ("End to end"): none with one rank in float32,
--tolerance times the largest loss otherwise. --mixed-precision computes in bfloat16 (MixedPrecisionPolicy:
bfloat16 parameters for forward and backward, float32 gradient reduction and optimizer step) against the float32
CPU run, so it compares within --mp-tolerance.

    torchrun --nproc-per-node 2 examples/fsdp_train.py [--mixed-precision] [--steps N]
"""

import argparse
import copy
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from distributed_run import check_curves, global_mean, join, train_on_slices


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
    )


def train(model, device, steps, rank=0, world=1):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return train_on_slices(model, optimizer, device, steps, rank, world)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--mixed-precision", action="store_true")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    parser.add_argument("--mp-tolerance", type=float, default=1e-2)
    parser.add_argument("--device", default="openreg", help="the device type to train on (cpu: FSDP over gloo)")
    args = parser.parse_args()

    device = join(args.device)
    model = make_model()
    reference = [loss.item() for loss in train(copy.deepcopy(model), "cpu", args.steps)]

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    policy = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if args.mixed_precision
        else MixedPrecisionPolicy()
    )
    model.to(device)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    curve = global_mean(train(model, device, args.steps, dist.get_rank(), dist.get_world_size()))
    label = f"{device.type} FSDP2" + (", bfloat16" if args.mixed_precision else "")
    if args.mixed_precision:
        tolerance = args.mp_tolerance  # bfloat16 against float32: never equal, even with one rank
    else:
        tolerance = 0.0 if dist.get_world_size() == 1 else args.tolerance
    return 0 if check_curves(label, curve, reference, tolerance) else 1


if __name__ == "__main__":
    sys.exit(main())
