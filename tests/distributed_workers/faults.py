"""Faults, each of which must raise a clear error on the ranks involved, never crash or hang.

``mismatch`` (2 ranks): arguments that differ across ranks, synchronously and asynchronously, and tensors
on the wrong device; after each error the group still works. ``killed`` (3 ranks): rank 1 dies between two collectives; the others must
fail within the group's timeout with an error naming rank 1.
"""
import datetime
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from distributed_launcher import report  # noqa: E402

RANK = int(os.environ["RANK"])
DEV = torch.device("openreg", RANK)


def expect_error(name, fn):
    try:
        fn()
    except Exception as error:
        report(case=name, error=type(error).__name__, message=str(error))
    else:
        report(case=name, error=None, message="")


def mismatch():
    dist.init_process_group("orccl")
    expect_error("numel", lambda: dist.all_reduce(torch.ones(4 + 1000 * RANK, device=DEV)))
    expect_error("dtype", lambda: dist.all_reduce(torch.ones(4, device=DEV, dtype=(torch.float32, torch.float64)[RANK])))
    expect_error("shape", lambda: dist.all_reduce(torch.ones((2, 3) if RANK == 0 else (3, 2), device=DEV)))
    expect_error("root", lambda: dist.broadcast(torch.ones(4, device=DEV), src=RANK))
    expect_error("operation", lambda: dist.all_reduce(torch.ones(4, device=DEV)) if RANK == 0 else
                 dist.broadcast(torch.ones(4, device=DEV), src=0))
    expect_error("all_gather input", lambda: dist.all_gather(
        [torch.empty(3, device=DEV) for _ in range(2)], torch.ones(3 + RANK, device=DEV)))
    # An asynchronous collective returns before the other ranks make the call (the agreement waits for them
    # off the calling thread): rank 1 calls only once rank 0's call has returned.
    store = dist.distributed_c10d._get_default_store()
    t = torch.full((2,), RANK + 1.0, device=DEV)
    if RANK == 0:
        work = dist.all_reduce(t, async_op=True)
        store.set("async_call_returned", "1")
        work.wait()
    else:
        store.wait(["async_call_returned"], datetime.timedelta(seconds=60))
        dist.all_reduce(t)
    report(async_before_peers=t.cpu().tolist())
    # Asynchronously: the call returns, wait() and the future raise; collectives queued behind still run.
    work = dist.all_reduce(torch.ones(4 + 1000 * RANK, device=DEV), async_op=True)
    future = work.get_future()
    queued = torch.full((2,), RANK + 1.0, device=DEV)
    queued_work = dist.all_reduce(queued, async_op=True)
    expect_error("async numel", work.wait)
    expect_error("async numel future", future.wait)
    queued_work.wait()
    report(queued_after_error=queued.cpu().tolist())
    # Wrong devices: a CPU tensor where the group has no CPU backend (torch's own check), tensors on two
    # openreg devices or on openreg and the CPU in one call (orccl's check).
    expect_error("cpu tensor", lambda: dist.all_reduce(torch.ones(4)))
    expect_error("two devices", lambda: dist.all_gather(
        [torch.empty(2, device=DEV), torch.empty(2, device=torch.device("openreg", 1 - RANK))],
        torch.ones(2, device=DEV)))
    expect_error("cpu output", lambda: dist.all_gather([torch.empty(2), torch.empty(2)], torch.ones(2, device=DEV)))
    t = torch.full((3,), RANK + 1.0, device=DEV)
    dist.all_reduce(t)
    report(after_errors=t.cpu().tolist())
    dist.destroy_process_group()


def killed():
    timeout = datetime.timedelta(seconds=30)
    dist.init_process_group("orccl", timeout=timeout)
    t = torch.ones(1000, device=DEV)
    dist.all_reduce(t)
    if RANK == 1:
        os._exit(17)
    start = time.monotonic()
    try:
        for _ in range(3):
            dist.all_reduce(t)
        report(error=None, message="", seconds=time.monotonic() - start, timeout=timeout.total_seconds())
    except Exception as error:
        report(error=type(error).__name__, message=str(error), seconds=time.monotonic() - start,
               timeout=timeout.total_seconds())
    os._exit(0)  # the group is broken: skip its teardown


{"mismatch": mismatch, "killed": killed}[sys.argv[1]]()
