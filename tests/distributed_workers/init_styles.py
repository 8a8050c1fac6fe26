"""init_process_group as CUDA users write it under torchrun, one style after another in one job: no backend
(openreg is the accelerator), "orccl", "cpu:gloo,openreg:orccl". Reports, per style, the device the rank
bound, the group's backends and an all_reduce result."""

import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from distributed_launcher import report  # noqa: E402

RANK = int(os.environ["RANK"])

STYLES = (None, "orccl", "cpu:gloo,openreg:orccl", "device_id", "pg_options")
for style, port in zip(STYLES, sys.argv[1:], strict=True):
    # A fresh store per style: rank 0 hosts it, and a rank that finishes tearing down the previous group
    # early must not reach the previous store still served by a slower rank 0.
    os.environ["MASTER_PORT"] = port
    if style == "pg_options":
        # gloo's own options (its devices, threads) pass through orccl.
        options = dist.ProcessGroupGloo._Options()
        options._devices = [dist.ProcessGroupGloo.create_device(interface="lo")]
        options._threads = 1
        dist.init_process_group("orccl", pg_options=options)
    elif style == "device_id":
        # No backend, a bound device: torch picks the device's default backend and binds the group to it.
        dist.init_process_group(device_id=torch.device("openreg", int(os.environ["LOCAL_RANK"])))
        dist.barrier()
    else:
        dist.init_process_group(style)
    group = dist.group.WORLD
    t = torch.full((4,), float(RANK + 1), device="openreg")
    dist.all_reduce(t)
    cpu_sum = None
    if "cpu:gloo" in (style or ""):
        c = torch.full((2,), float(RANK + 1))
        dist.all_reduce(c)
        cpu_sum = c.tolist()
    report(
        style=str(style),
        bound_device=str(group.bound_device_id),
        device=str(t.device),
        current_device=torch.openreg.current_device(),
        backend=dist.get_backend(),
        default_backend_for_openreg=dist.get_default_backend_for_device("openreg"),
        group_name=group.name(),
        openreg_backend=type(group._get_backend(torch.device("openreg"))).__name__,
        gloo_threads=group._get_backend(torch.device("openreg")).gloo.options._threads,
        device_types=sorted(d.type for d in group._device_types),
        all_reduce=t.cpu().tolist(),
        cpu_all_reduce=cpu_sum,
    )
    dist.destroy_process_group()
