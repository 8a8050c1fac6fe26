"""Profiles a few training steps of a small CNN on openreg: a Chrome trace with
the device's kernels and copies, a memory snapshot, and the top operators by
device time.

What it shows:

- torch.profiler with ProfilerActivity.PrivateUse1: one row per openreg device
  and stream in the trace, each kernel and copy linked to the aten:: operator
  that launched it, and device time per operator in key_averages();
- schedule() with on_trace_ready, so only the active steps are recorded (the
  first steps warm the allocator and the operator caches up);
- torch.openreg.profiler.range, a named range on the device's stream row;
- torch.openreg.memory._record_memory_history / _dump_snapshot, in
  torch.cuda's snapshot format (pytorch.org/memory_viz reads it).

docs/profiling.md says how to open both files.

    python examples/profile_training.py [--out-dir DIR] [--steps N]
"""

import argparse
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function, schedule

import torch_openreg  # noqa: F401  (also loaded by torch's autoload)

WAIT, WARMUP = 1, 1


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(8 * 8 * 8, 32),
        nn.ReLU(),
        nn.Linear(32, 10),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--out-dir",
        default=os.path.join(tempfile.gettempdir(), "openreg_profile"),
        help="where the trace and the snapshot are written (default: %(default)s)",
    )
    parser.add_argument("--steps", type=int, default=3, help="training steps recorded (after 2 warm-up steps)")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    trace_path = os.path.join(args.out_dir, "openreg_trace.json")
    snapshot_path = os.path.join(args.out_dir, "openreg_memory_snapshot.pickle")

    torch.manual_seed(0)
    device = torch.device("openreg")
    model = make_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    batches = [
        (torch.randn(16, 3, 16, 16, generator=g), torch.randint(0, 10, (16,), generator=g))
        for _ in range(WAIT + WARMUP + args.steps)
    ]

    memory = torch.openreg.memory
    records_history = hasattr(memory, "_record_memory_history")
    if records_history:
        memory._record_memory_history(max_entries=100000)
    else:
        print("note: this torch_openreg has no torch.openreg.memory._record_memory_history; no memory snapshot")

    def write_trace(prof):
        prof.export_chrome_trace(trace_path)

    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
        schedule=schedule(wait=WAIT, warmup=WARMUP, active=args.steps, repeat=1),
        on_trace_ready=write_trace,
        record_shapes=True,
    ) as prof:
        for inputs, labels in batches:
            with torch.openreg.profiler.range("step"):
                inputs, labels = inputs.to(device), labels.to(device)
                with record_function("forward"):
                    loss = F.cross_entropy(model(inputs), labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            prof.step()
    print(f"final loss {loss.item():.4f}")

    print(prof.key_averages().table(sort_by="device_time_total", row_limit=10))
    print(f"Chrome trace: {trace_path}")
    if records_history:
        memory._dump_snapshot(snapshot_path)
        memory._record_memory_history(enabled=None)
        print(f"memory snapshot: {snapshot_path}")


if __name__ == "__main__":
    main()
