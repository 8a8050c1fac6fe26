"""Fallback cost: operators that run through the CPU fallback, timed on openreg
and on the CPU in the same run, for both fallback modes.

The fallback mode is fixed per process (OPENREG_FALLBACK_MODE is read once),
so each mode is measured in a child process that also times the CPU, with the
cases interleaved; the table shows medians and the openreg/CPU ratio.

    python benchmarks/fallback.py [--quick] [--json out.json]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

MODES = ("zero_copy", "copy")


def cases(torch, device):
    """name -> zero-argument callable running one fallback operator on `device`."""
    g = torch.Generator().manual_seed(0)
    small = torch.randn(16, generator=g).to(device)
    small2 = torch.randn(16, generator=g).to(device)
    big = torch.randn(1 << 20, generator=g).to(device)
    mat = torch.randn(256, 256, generator=g).to(device)
    idx = torch.randint(0, 1 << 20, (4096,), generator=g).to(device)
    out = torch.empty(16, device=device)
    # Operators without an openreg kernel (atan2, addcmul, cumsum, prod,
    # index_select, mm): each call runs through the fallback.
    return {
        "atan2 16 elems": lambda: torch.atan2(small, small2),
        "addcmul_ (in-place) 16": lambda: small.addcmul_(small2, small2, value=0.0),
        "atan2 out= 16": lambda: torch.atan2(small, small2, out=out),
        "cumsum 16": lambda: small.cumsum(0),
        "atan2 1M elems": lambda: torch.atan2(big, big),
        "prod 1M": lambda: big.prod(),
        "index_select 4096 of 1M": lambda: big.index_select(0, idx),
        "mm 256x256": lambda: mat @ mat,
    }


def measure(fn, repeats, inner):
    fn()  # warm-up (allocations, first-call caches)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - start) / inner)
    return statistics.median(samples)


def child(repeats):
    import torch  # autoloads torch_openreg

    on_device = cases(torch, "openreg")
    on_cpu = cases(torch, "cpu")
    results = {}
    for name in on_device:
        inner = 20 if "1M" in name or "mm" in name else 200
        # Interleave device and CPU runs so both see the same machine state.
        dev, cpu = [], []
        for _ in range(3):
            dev.append(measure(on_device[name], repeats, inner))
            cpu.append(measure(on_cpu[name], repeats, inner))
        results[name] = {"openreg_s": min(dev), "cpu_s": min(cpu)}
    print(json.dumps(results))


def main():
    parser = argparse.ArgumentParser(description="fallback cost, both modes, against CPU")
    parser.add_argument("--quick", action="store_true", help="few repetitions (CI smoke run)")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    repeats = 3 if args.quick else 15
    if args.child:
        child(repeats)
        return

    table = {}
    for mode in MODES:
        env = dict(os.environ, OPENREG_FALLBACK_MODE=mode)
        command = [sys.executable, __file__, "--child"] + (["--quick"] if args.quick else [])
        proc = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        table[mode] = json.loads(proc.stdout.strip().splitlines()[-1])

    names = list(table[MODES[0]])
    print(
        f"{'operator (fallback)':<26} {'cpu':>10} | " + " | ".join(f"{m + ' openreg':>18} {'ratio':>6}" for m in MODES)
    )
    for name in names:
        cpu = table[MODES[0]][name]["cpu_s"]
        row = f"{name:<26} {cpu * 1e6:>8.1f}us | "
        row += " | ".join(
            f"{table[m][name]['openreg_s'] * 1e6:>16.1f}us {table[m][name]['openreg_s'] / table[m][name]['cpu_s']:>5.2f}x"
            for m in MODES
        )
        print(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=2)


if __name__ == "__main__":
    main()
