"""Allocation churn: allocate and free many tensors of mixed sizes on openreg
(the caching allocator) and on the CPU, in the same process.

Each operation is ``torch.empty(n, dtype=torch.uint8, device=d)`` followed by
dropping the reference, over a deterministic sequence of sizes from 16 B to
1 MiB. A few tensors are kept alive in a small ring so that frees do not
always hit the block just allocated. Device and CPU runs are interleaved, and
the table shows the median of the repetitions and the openreg/CPU ratio.

    python benchmarks/allocator.py [--quick] [--json out.json]
"""

import argparse
import json
import random
import statistics
import time

import torch  # autoloads torch_openreg

OPS = 100_000
RING = 8


def size_sequence(count, seed=0):
    """Deterministic mixed sizes: mostly small, some up to 1 MiB."""
    rng = random.Random(seed)
    classes = [
        (16, 512, 40),  # tiny
        (512, 16 << 10, 35),  # small
        (16 << 10, 256 << 10, 20),  # medium
        (256 << 10, 1 << 20, 5),  # up to 1 MiB
    ]
    weights = [w for _, _, w in classes]
    sizes = []
    for _ in range(count):
        lo, hi, _ = rng.choices(classes, weights=weights)[0]
        sizes.append(rng.randint(lo, hi))
    return sizes


def churn(device, sizes, ring_size):
    """Allocates each size on `device`, keeping the last `ring_size` alive; seconds per op."""
    ring = [None] * ring_size
    empty, uint8 = torch.empty, torch.uint8
    start = time.perf_counter()
    for i, n in enumerate(sizes):
        ring[i % ring_size] = empty(n, dtype=uint8, device=device)
    ring = None
    return (time.perf_counter() - start) / len(sizes)


def churn_no_ring(device, sizes):
    """Allocate then drop immediately: the same block comes back every time."""
    empty, uint8 = torch.empty, torch.uint8
    start = time.perf_counter()
    for n in sizes:
        empty(n, dtype=uint8, device=device)
    return (time.perf_counter() - start) / len(sizes)


def run(ops, repeats):
    sizes = size_sequence(ops)
    same = [4096] * ops
    cases = {
        "mixed 16B-1MiB, ring of 8": lambda d: churn(d, sizes, RING),
        "mixed 16B-1MiB, drop at once": lambda d: churn_no_ring(d, sizes),
        "4 KiB, drop at once": lambda d: churn_no_ring(d, same),
    }
    devices = {"openreg": "openreg:0", "cpu": "cpu"}
    results = {}
    for name, fn in cases.items():
        for d in devices.values():  # warm-up: fills the cache, first-call costs
            fn(d)
        samples = {label: [] for label in devices}
        for _ in range(repeats):  # interleaved, so both see the same machine state
            for label, d in devices.items():
                samples[label].append(fn(d))
        results[name] = {f"{label}_s": statistics.median(v) for label, v in samples.items()}
        results[name]["ops"] = ops
    torch.openreg.synchronize()
    stats = torch.openreg.memory_stats(0)
    results["_allocator"] = {
        "num_device_alloc": stats["num_device_alloc"],
        "num_device_free": stats["num_device_free"],
        "reserved_bytes.all.peak": stats["reserved_bytes.all.peak"],
        "allocation.all.allocated": stats["allocation.all.allocated"],
    }
    return results


def main():
    parser = argparse.ArgumentParser(description="allocation churn, openreg caching allocator against CPU")
    parser.add_argument("--quick", action="store_true", help="10^4 operations, 3 repetitions (CI smoke run)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    ops, repeats = (10_000, 3) if args.quick else (OPS, 5)

    results = run(ops, repeats)
    print(f"{'allocation churn (' + format(ops, ',') + ' ops)':<32} {'openreg':>12} {'cpu':>12} {'ratio':>7}")
    for name, r in results.items():
        if name.startswith("_"):
            continue
        print(
            f"{name:<32} {r['openreg_s'] * 1e6:>9.3f} us {r['cpu_s'] * 1e6:>9.3f} us {r['openreg_s'] / r['cpu_s']:>6.2f}x"
        )
    a = results["_allocator"]
    print(
        f"openreg runtime calls: {a['num_device_alloc']} orMalloc, {a['num_device_free']} orFree for "
        f"{a['allocation.all.allocated']} allocations; peak reserved {a['reserved_bytes.all.peak'] / (1 << 20):.0f} MiB"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
