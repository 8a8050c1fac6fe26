"""Trains a small MLP on openreg with CUDA-style stream overlap, then on the CPU.

What it shows:

- a DataLoader with pin_memory=True, and each batch copied to the device with
  non_blocking=True on a side stream, one batch ahead of the compute stream,
  which waits for it (wait_stream) before using it;
- timing epochs with events (enable_timing=True, elapsed_time);
- saving a checkpoint (model + optimizer) with torch.save and reloading it
  onto another device with map_location="openreg:1";
- the allocator's statistics at the end.

The same loop runs on the CPU from the same weights and batches; the script
exits non-zero if the final losses differ by more than 1e-5 or if the reloaded
model's outputs differ from the trained model's.

    python examples/streams_training.py [--epochs N]
"""

import argparse
import copy
import os
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

MiB = 1 << 20


def make_dataset(n: int = 2048, features: int = 32, classes: int = 4) -> TensorDataset:
    """Deterministic synthetic classification data: noisy class prototypes."""
    g = torch.Generator().manual_seed(1234)
    prototypes = torch.randn(classes, features, generator=g) * 2
    labels = torch.randint(0, classes, (n,), generator=g)
    inputs = prototypes[labels] + torch.randn(n, features, generator=g)
    return TensorDataset(inputs, labels)


def make_model(features: int = 32, classes: int = 4) -> nn.Module:
    return nn.Sequential(nn.Linear(features, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, classes))


def make_loader(dataset: TensorDataset) -> DataLoader:
    # The same shuffling order for every run: a fresh, seeded generator.
    return DataLoader(dataset, batch_size=64, shuffle=True, pin_memory=True, generator=torch.Generator().manual_seed(7))


class Prefetcher:
    """Copies batch i+1 to the device on a side stream while batch i is computed.

    The compute stream waits for the copy stream before it uses a batch, and
    record_stream tells the allocator that the batch's memory (allocated on
    the copy stream) is used on the compute stream too.
    """

    def __init__(self, loader, device):
        self.loader = iter(loader)
        self.device = device
        self.copy_stream = torch.openreg.Stream(device=device)
        self.next = None
        self._preload()

    def _preload(self):
        try:
            inputs, labels = next(self.loader)
        except StopIteration:
            self.next = None
            return
        assert inputs.is_pinned() and labels.is_pinned()
        with torch.openreg.stream(self.copy_stream):
            self.next = (inputs.to(self.device, non_blocking=True), labels.to(self.device, non_blocking=True))

    def __iter__(self):
        return self

    def __next__(self):
        if self.next is None:
            raise StopIteration
        compute = torch.openreg.current_stream(self.device)
        compute.wait_stream(self.copy_stream)
        batch = self.next
        for t in batch:
            t.record_stream(compute)
        self._preload()
        return batch


def train(model: nn.Module, device: str, epochs: int, dataset: TensorDataset):
    """Returns (model, optimizer, mean loss per epoch, milliseconds per epoch or None)."""
    model = model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = make_loader(dataset)
    on_device = device != "cpu"
    epoch_losses, epoch_ms = [], []
    for _ in range(epochs):
        if on_device:
            start = torch.Event(device=device, enable_timing=True)
            end = torch.Event(device=device, enable_timing=True)
            start.record()
            batches = Prefetcher(loader, device)
        else:
            batches = iter(loader)
        total = torch.zeros((), device=device)
        count = 0
        for inputs, labels in batches:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), labels)
            loss.backward()
            optimizer.step()
            total += loss.detach() * len(labels)
            count += len(labels)
        if on_device:
            end.record()
            end.synchronize()
            epoch_ms.append(start.elapsed_time(end))
        epoch_losses.append(total.item() / count)
    return model, optimizer, epoch_losses, (epoch_ms if on_device else None)


def checkpoint_round_trip(model, optimizer, features, classes):
    """Saves model + optimizer, reloads onto openreg:1; returns the reloaded pair."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "checkpoint.pt")
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
        size = os.path.getsize(path)
        state = torch.load(path, map_location="openreg:1", weights_only=True)
    reloaded = make_model(features, classes).to("openreg:1")
    reloaded.load_state_dict(state["model"])
    reloaded_opt = torch.optim.Adam(reloaded.parameters(), lr=1e-3)
    reloaded_opt.load_state_dict(state["optimizer"])
    print(
        f"checkpoint: {size / 1024:.1f} KiB, reloaded on "
        f"{next(reloaded.parameters()).device} with {len(reloaded_opt.state)} optimizer states"
    )
    return reloaded, reloaded_opt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    features, classes = 32, 4
    dataset = make_dataset(features=features, classes=classes)
    torch.manual_seed(0)
    initial = make_model(features, classes)

    model, optimizer, losses, times = train(copy.deepcopy(initial), "openreg:0", args.epochs, dataset)
    _, _, cpu_losses, _ = train(copy.deepcopy(initial), "cpu", args.epochs, dataset)

    print(f"accelerator: {torch.accelerator.current_accelerator()}, {torch.accelerator.device_count()} devices")
    print(f"{'epoch':>5}  {'cpu loss':>10}  {'openreg loss':>12}  {'openreg ms':>10}")
    for epoch, (c, o, ms) in enumerate(zip(cpu_losses, losses, times)):
        print(f"{epoch:>5}  {c:>10.6f}  {o:>12.6f}  {ms:>10.1f}")
    loss_diff = abs(losses[-1] - cpu_losses[-1])
    loss_ok = loss_diff <= 1e-5
    print(f"final loss difference: {loss_diff:.3g} -> {'match' if loss_ok else 'MISMATCH'}")

    reloaded, _ = checkpoint_round_trip(model, optimizer, features, classes)
    probe = dataset.tensors[0][:256]
    with torch.no_grad():
        original_out = model(probe.to("openreg:0")).cpu()
        reloaded_out = reloaded(probe.to("openreg:1")).cpu()
    reload_ok = torch.equal(original_out, reloaded_out)
    print(f"reloaded model outputs: {'identical' if reload_ok else 'DIFFERENT'}")

    torch.openreg.synchronize()
    stats = torch.openreg.memory_stats(0)
    print("memory (openreg:0):")
    print(f"  memory_allocated      {torch.openreg.memory_allocated(0) / MiB:8.2f} MiB")
    print(f"  max_memory_allocated  {torch.openreg.max_memory_allocated(0) / MiB:8.2f} MiB")
    print(f"  memory_reserved       {torch.openreg.memory_reserved(0) / MiB:8.2f} MiB")
    for key in (
        "allocation.all.allocated",
        "segment.all.current",
        "num_device_alloc",
        "num_alloc_retries",
        "num_ooms",
        "inactive_split.all.current",
    ):
        print(f"  {key:<28}{stats[key]:>8}")
    print(
        f"memory (openreg:1): allocated {torch.openreg.memory_allocated(1) / MiB:.2f} MiB, "
        f"reserved {torch.openreg.memory_reserved(1) / MiB:.2f} MiB"
    )
    return 0 if loss_ok and reload_ok else 1


if __name__ == "__main__":
    sys.exit(main())
