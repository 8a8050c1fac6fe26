"""What the distributed examples share: joining the job torchrun started, training on this rank's slice of each
global batch, and checking a distributed loss curve against the same training in one CPU process.

Not a script: ddp_train.py and fsdp_train.py import it (torchrun puts their folder on sys.path).
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

from train import synthetic_batches  # examples/train.py: MNIST-shaped batches of 32


def join(device_type: str) -> torch.device:
    """Binds this rank to device LOCAL_RANK and joins the process group, as a CUDA script does.

    With no backend named, init_process_group takes the device's backend (orccl here, NCCL with CUDA), for
    device tensors only.
    """
    if "LOCAL_RANK" not in os.environ:
        script = os.path.relpath(sys.argv[0])
        sys.exit(
            f"{script} runs one process per rank under a launcher that sets RANK, LOCAL_RANK and WORLD_SIZE:\n"
            f"    torchrun --nproc-per-node 2 {script}"
        )
    if device_type == "cpu":
        dist.init_process_group("gloo")
        return torch.device("cpu")
    device = torch.device(device_type, int(os.environ["LOCAL_RANK"]))
    torch.accelerator.set_device_index(device.index)
    dist.init_process_group(device_id=device)  # device_id: the group's collectives (barrier too) use this device
    return device


def train_on_slices(model, optimizer, device, steps: int, rank: int = 0, world: int = 1) -> list[torch.Tensor]:
    """Trains on slice `rank` of `world` of each global batch and returns the local losses (still on `device`).

    With rank 0 of 1 this is the single-process reference run. The loss is taken in float32 whatever the model
    computes in (a bfloat16 mixed-precision policy returns bfloat16 logits).
    """
    losses = []
    for images, labels in synthetic_batches(steps):
        images, labels = images.chunk(world)[rank].to(device), labels.chunk(world)[rank].to(device)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images).float(), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return losses


def global_mean(local_losses: list[torch.Tensor]) -> list[float]:
    """The loss of each global batch: the mean of the ranks' losses (every rank's slice has the same size)."""
    losses = torch.stack(local_losses).float()
    dist.all_reduce(losses)  # gloo (under orccl too) has no ReduceOp.AVG: sum, then divide
    return (losses.cpu() / dist.get_world_size()).tolist()


def check_curves(label: str, curve: list[float], reference: list[float], tolerance: float) -> bool:
    """Rank 0 prints both curves; every rank returns the same verdict (the curves are the same on every rank).

    The curves agree when no step's losses differ by more than `tolerance` times the largest reference loss.
    """
    scale = max(abs(b) for b in reference)
    worst = max(abs(a - b) for a, b in zip(curve, reference)) / scale
    ok = worst <= tolerance
    if dist.get_rank() == 0:
        world = dist.get_world_size()
        print(f"{'step':>4}  {'cpu, 1 process':>16}  {label + f', {world} ranks':>28}")
        for step, (b, a) in enumerate(zip(reference, curve)):
            print(f"{step:>4}  {b:>16.8f}  {a:>28.8f}")
        print(
            f"largest difference {worst:.3g} of the largest loss (tolerance {tolerance:g}) -> "
            f"{'match' if ok else 'MISMATCH'}",
            flush=True,
        )
    dist.barrier()  # rank 0 has printed before any rank leaves
    dist.destroy_process_group()
    return ok
