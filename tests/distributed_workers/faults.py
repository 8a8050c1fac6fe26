"""Faults, each of which must raise a clear error on the ranks involved, never crash or hang.

``mismatch`` (2 ranks): arguments that differ across ranks, synchronously and asynchronously, and tensors
on the wrong device; after each error the group still works. ``repeated`` (2 ranks): the same for a rank that
leaves a collective repeated a few times, whose results must still equal the CPU's; every collective runs its
argument agreement first. ``killed`` (3 ranks): rank 1 dies between two collectives; the others must
fail within the group's timeout with an error naming rank 1. ``timeout`` (2 ranks): a ``wait(timeout=...)`` that
runs out raises as gloo's does, and a later ``wait()`` completes the collective.
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
    expect_error(
        "dtype", lambda: dist.all_reduce(torch.ones(4, device=DEV, dtype=(torch.float32, torch.float64)[RANK]))
    )
    expect_error("shape", lambda: dist.all_reduce(torch.ones((2, 3) if RANK == 0 else (3, 2), device=DEV)))
    expect_error("root", lambda: dist.broadcast(torch.ones(4, device=DEV), src=RANK))
    expect_error(
        "operation",
        lambda: (
            dist.all_reduce(torch.ones(4, device=DEV))
            if RANK == 0
            else dist.broadcast(torch.ones(4, device=DEV), src=0)
        ),
    )
    expect_error(
        "all_gather input",
        lambda: dist.all_gather([torch.empty(3, device=DEV) for _ in range(2)], torch.ones(3 + RANK, device=DEV)),
    )
    # Arguments gloo checks on one rank only (the root's list, a rank's all-to-all lists): refused on that rank
    # before the agreement, so that every rank fails at once instead of waiting for the group's timeout.
    expect_error(
        "gather root list length",
        lambda: dist.gather(
            torch.ones(3, device=DEV), [torch.empty(3, device=DEV) for _ in range(3)] if RANK == 0 else None, dst=0
        ),
    )
    expect_error(
        "gather root list shape",
        lambda: dist.gather(
            torch.ones(3, device=DEV), [torch.empty(3 + i, device=DEV) for i in range(2)] if RANK == 0 else None, dst=0
        ),
    )
    expect_error(
        "scatter root list length",
        lambda: dist.scatter(torch.empty(3, device=DEV), [torch.ones(3, device=DEV)] if RANK == 1 else None, src=1),
    )
    expect_error(
        "all_to_all uneven",
        lambda: dist.all_to_all(
            [torch.empty(2 + RANK, device=DEV) for _ in range(2)], [torch.ones(2, device=DEV) for _ in range(2)]
        ),
    )
    expect_error(
        "all_to_all list length",
        lambda: dist.all_to_all(
            [torch.empty(2, device=DEV) for _ in range(3)], [torch.ones(2, device=DEV) for _ in range(3)]
        ),
    )
    expect_error(
        "all_to_all sizes across ranks",
        lambda: dist.all_to_all(
            [torch.empty(2 + RANK, device=DEV) for _ in range(2)], [torch.ones(2 + RANK, device=DEV) for _ in range(2)]
        ),
    )
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
    expect_error("sparse tensor", lambda: dist.all_reduce(torch.ones(4, device=DEV).to_sparse()))
    expect_error(
        "two devices",
        lambda: dist.all_gather(
            [torch.empty(2, device=DEV), torch.empty(2, device=torch.device("openreg", 1 - RANK))],
            torch.ones(2, device=DEV),
        ),
    )
    expect_error("cpu output", lambda: dist.all_gather([torch.empty(2), torch.empty(2)], torch.ones(2, device=DEV)))
    t = torch.full((3,), RANK + 1.0, device=DEV)
    dist.all_reduce(t)
    report(after_errors=t.cpu().tolist())
    dist.destroy_process_group()


def repeated():
    """Repeated collectives give the CPU's results; a rank that breaks the pattern must still get the right
    result (every rank breaks it alike) or a ValueError on every rank (it alone does)."""
    dist.init_process_group("orccl")
    world = dist.get_world_size()

    def repeated_all_reduce(numel, times=3, dtype=torch.float32, async_op=False):
        """all_reduce of rank-dependent values, `times` times; each result against the CPU's arithmetic."""
        ok = True
        for i in range(times):
            cpu = torch.arange(numel, dtype=dtype) + RANK + i
            t = cpu.to(DEV)
            work = dist.all_reduce(t, async_op=async_op)
            if async_op:
                work.wait()
            expected = sum(torch.arange(numel, dtype=dtype) + r + i for r in range(world))
            ok = ok and torch.equal(t.cpu(), expected)
        return ok

    report(case="repeated", equal=repeated_all_reduce(5) and repeated_all_reduce(5, async_op=True))
    # Every rank breaks the pattern alike: a correct call.
    report(case="all ranks leave the pattern", equal=repeated_all_reduce(7, times=1))
    report(case="repeated after the change", equal=repeated_all_reduce(7) and repeated_all_reduce(5))
    # One rank breaks it: an element count, a dtype of the same width (same bytes: gloo would not notice),
    # asynchronously; each raises on every rank, and the group stays usable.
    repeated_all_reduce(4)
    expect_error("repeated numel", lambda: dist.all_reduce(torch.ones(4 + 1000 * RANK, device=DEV)))
    repeated_all_reduce(4)
    expect_error(
        "repeated dtype", lambda: dist.all_reduce(torch.ones(4, device=DEV, dtype=(torch.float32, torch.int32)[RANK]))
    )
    repeated_all_reduce(4)
    work = dist.all_reduce(torch.ones(4 + 1000 * RANK, device=DEV), async_op=True)
    future = work.get_future()
    expect_error("repeated async numel", work.wait)
    expect_error("repeated async numel future", future.wait)
    report(case="after the errors", equal=repeated_all_reduce(4))
    # Data holding a NaN gives the CPU's result, not an error; a rank that leaves a repeated sum for another
    # reduction raises on every rank.
    ok = True
    for i in range(3):
        t = (torch.arange(5.0) + RANK + i).to(DEV)
        if RANK == 0:
            t[0] = float("nan")
        dist.all_reduce(t)
        expected = sum(torch.arange(5.0) + r + i for r in range(world))
        expected[0] = float("nan")
        ok = ok and torch.equal(t.cpu().isnan(), expected.isnan()) and torch.equal(t.cpu()[1:], expected[1:])
    report(case="data with a NaN", equal=ok)
    # Every collective, however often repeated, is its agreement's allgather and then gloo's all_reduce.
    with torch.profiler.profile() as profile:
        for _ in range(3):
            repeated_all_reduce(4, times=1)
            repeated_all_reduce(4, times=1, dtype=torch.int64)
    names = [event.name for event in profile.events()]
    report(
        case="gloo works of six repeated calls",
        all_reduce=names.count("gloo:all_reduce"),
        all_gather=names.count("gloo:all_gather"),
    )
    report(
        case="half and bfloat16 sums",
        equal=repeated_all_reduce(5, dtype=torch.float16) and repeated_all_reduce(5, dtype=torch.bfloat16),
    )
    repeated_all_reduce(4)
    expect_error(
        "repeated reduction",
        lambda: dist.all_reduce(torch.ones(4, device=DEV), op=(dist.ReduceOp.SUM, dist.ReduceOp.MAX)[RANK]),
    )
    report(case="after the reduction error", equal=repeated_all_reduce(4))
    # A call gloo refuses (an output of the wrong size), repeated: gloo's error each time, on every rank.
    for i in range(3):
        expect_error(
            f"repeated refusal {i}",
            lambda: dist.all_gather_into_tensor(torch.empty(3, device=DEV), torch.ones(2, device=DEV)),
        )
    report(case="after the refusals", equal=repeated_all_reduce(4))
    # Other repeated collectives, against the CPU's arithmetic.
    ok = True
    for i in range(3):
        src = torch.arange(6.0) * (i + 1)
        t = (src if RANK == 1 else torch.zeros(6)).to(DEV)
        dist.broadcast(t, src=1)
        ok = ok and torch.equal(t.cpu(), src)
        gathered = torch.empty(2 * world, device=DEV)
        dist.all_gather_into_tensor(gathered, torch.tensor([RANK, i], dtype=torch.float32, device=DEV))
        expected = torch.tensor([[r, i] for r in range(world)], dtype=torch.float32).flatten()
        ok = ok and torch.equal(gathered.cpu(), expected)
        out = torch.empty(3, device=DEV)
        dist.reduce_scatter_tensor(out, (torch.arange(3.0 * world) + RANK + i).to(DEV))
        expected = sum(torch.arange(3.0 * world) + r + i for r in range(world))[3 * RANK : 3 * RANK + 3]
        ok = ok and torch.equal(out.cpu(), expected)
    report(case="broadcast, all_gather_into_tensor, reduce_scatter_tensor", equal=ok)
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
        report(
            error=type(error).__name__,
            message=str(error),
            seconds=time.monotonic() - start,
            timeout=timeout.total_seconds(),
        )
    os._exit(0)  # the group is broken: skip its teardown


def timed_out_wait():
    # Rank 1 joins each all_reduce 3 s late; rank 0's wait(timeout=1 s) runs out. The same on gloo with CPU tensors.
    dist.init_process_group("cpu:gloo,openreg:orccl")
    for device in (torch.device("cpu"), DEV):
        x = torch.full((4,), float(RANK + 1), device=device)
        if RANK == 1:
            time.sleep(3)
            dist.all_reduce(x)
        else:
            work = dist.all_reduce(x, async_op=True)
            expect_error(f"{device.type} short wait", lambda: work.wait(timeout=datetime.timedelta(seconds=1)))
            report(case=f"{device.type} completed after the short wait", value=work.is_completed())
            report(case=f"{device.type} later wait", value=work.wait())
        report(case=f"{device.type} result", value=x.cpu().tolist())
    dist.destroy_process_group()


{"mismatch": mismatch, "repeated": repeated, "killed": killed, "timeout": timed_out_wait}[sys.argv[1]]()
