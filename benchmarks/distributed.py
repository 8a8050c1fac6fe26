"""The distributed cases of the benchmark suite: two ranks under torchrun on 127.0.0.1, each timing the same
work on openreg (the device's process group backend) and on the CPU (gloo), interleaved, in one process group.

    python benchmarks/distributed.py [--quick]     # prints the results as JSON

benchmarks/run.py calls measure() once per setting and merges the groups into its table:
- all_reduce: a float32 all_reduce (64 MiB, 8 MiB with --quick); the ratio is openreg's bandwidth over gloo's on
  CPU tensors of the same size;
- ddp: a DistributedDataParallel training step of run.py's MLP, batch 128 per rank; the ratio is openreg's time
  over the CPU's.
torchrun gives each rank one intra-op thread (OMP_NUM_THREADS=1), so two ranks share the two cores. The DDP step
is sampled one step at a time (run.REPEATS): this harness timing CPU against CPU reported 0.95x-1.19x with samples
of 3 steps, 0.96x-1.08x with single steps (docs/performance.md, "Distributed").
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile

import cases  # benchmarks/cases.py, beside this script: the MLP and its training step
import run  # benchmarks/run.py, beside this script: the timing loop

WORLD = 2
TIMEOUT_S = 900


def all_reduce_bytes(quick):
    return (8 if quick else 64) << 20


def timed_cases(torch, quick):
    """{group: {case: (description, openreg callable, CPU callable)}}."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    nbytes = all_reduce_bytes(quick)
    on_device = torch.zeros(nbytes // 4, device="openreg")
    on_cpu = torch.zeros(nbytes // 4)

    def ddp_step(device):
        torch.manual_seed(0)  # same weights and batches on both devices
        model = cases.mlp(torch.nn).to(device)
        ddp = DDP(model, device_ids=None if device == "cpu" else [torch.openreg.current_device()])
        return cases.training_step(
            torch, ddp, torch.randn(128, 784).to(device), torch.randint(0, 10, (128,)).to(device)
        )

    return {
        "all_reduce": {
            "float32": (
                f"all_reduce {nbytes >> 20} MiB float32, {WORLD} ranks",
                lambda: dist.all_reduce(on_device),
                lambda: dist.all_reduce(on_cpu),
            )
        },
        "ddp": {
            "mlp": (
                f"DDP step, MLP 784-512-512-10, batch 128 per rank, {WORLD} ranks",
                ddp_step("openreg"),
                ddp_step("cpu"),
            )
        },
    }


def rank_main(quick, out):
    """One rank: times every case; rank 0 writes the results to `out`."""
    import torch
    import torch.distributed as dist

    torch.accelerator.set_device_index(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("cpu:gloo,openreg:orccl")  # openreg tensors over orccl, the CPU's over gloo
    results = {}
    for group, cases in timed_cases(torch, quick).items():
        repeats, inner = run.REPEATS[group][1 if quick else 0]
        results[group] = {}
        for key, (description, device_fn, cpu_fn) in cases.items():
            samples = run.interleaved(device_fn, cpu_fn, torch.openreg.synchronize, repeats, inner)
            results[group][key] = run.case_result(group, description, *samples, run.fallback_ops(torch, device_fn))
    if dist.get_rank() == 0:
        with open(out, "w") as f:
            json.dump(results, f)
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(env, quick):
    """Runs the two ranks under torchrun with `env`; returns {group: {case: result}}."""
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "results.json")
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nproc-per-node={WORLD}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint=127.0.0.1:{free_port()}",
            "--local-addr=127.0.0.1",
            os.path.abspath(__file__),
            "--rank",
            "--out",
            out,
        ] + (["--quick"] if quick else [])
        proc = subprocess.run(
            command, env=dict(env, GLOO_SOCKET_IFNAME="lo"), cwd=folder, stdout=subprocess.DEVNULL, timeout=TIMEOUT_S
        )
        # Judged by the file rank 0 wrote, not torchrun's exit code: two-rank gloo jobs in torch 2.13 sometimes
        # abort at interpreter exit after their work is done (docs/distributed.md).
        if not os.path.exists(out):
            raise RuntimeError(f"the distributed benchmark wrote no results (torchrun exit code {proc.returncode})")
        with open(out) as f:
            return json.load(f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank:
        rank_main(args.quick, args.out)
    else:
        print(json.dumps(measure(dict(os.environ), args.quick), indent=2))


if __name__ == "__main__":
    main()
