"""Tensor layouts in orccl's operations (2 ranks; docs/distributed.md, "Which tensors").

A collective refuses, on every rank and before gloo runs, a tensor that gloo would read or write as numel()
consecutive elements from data_ptr() unless it is contiguous in its suggested memory format, as NCCL does; the
lists gloo copies element by element take any layout. Point-to-point operations take any tensor, with NCCL's
warning, and never touch memory outside its elements. Each case reports its error or its values, and whether
the memory around the tensors it was given stayed as it was.
"""

import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from distributed_launcher import report  # noqa: E402

RANK = int(os.environ["RANK"])
DEV = torch.device("openreg", RANK)
PEER = 1 - RANK


def column(offset=0.0):
    """A non-contiguous view (stride 4) and the allocation around it: column 1 of a 4x4 matrix."""
    base = torch.arange(16.0, device=DEV).view(4, 4) + 100 * RANK + offset
    return base[:, 1], base


def case(name, fn, *watched):
    """Runs fn(); reports its error or its value, and whether the `watched` tensors kept their values."""
    before = [t.clone() for t in watched]
    try:
        value = fn()
    except Exception as error:
        result = {"error": type(error).__name__, "message": str(error)}
    else:
        result = {"error": None, "value": value}
    result["untouched"] = all(torch.equal(b, t) for b, t in zip(before, watched))
    report(case=name, **result)


def refusals():
    """Every collective refuses a strided view in each of its tensors that gloo reads or writes raw."""
    x = torch.ones(4, device=DEV)
    col, base = column()
    two = [torch.empty(4, device=DEV) for _ in range(2)]
    root = RANK == 0
    case("all_reduce column", lambda: dist.all_reduce(col), base)
    # The example: an expanded view of a's last element, beside another allocation b.
    a = torch.zeros(128, device=DEV)
    b = torch.full((128,), 7.0, device=DEV)
    case("all_reduce expanded", lambda: dist.all_reduce(a[127:].expand(64)), a, b)
    case("broadcast", lambda: dist.broadcast(col, src=0), base)
    case("reduce", lambda: dist.reduce(col, dst=0), base)
    case("all_gather input", lambda: dist.all_gather(two, col), base)
    wide_base = torch.zeros(8, 2, device=DEV)
    wide = wide_base[:, 0]
    case("all_gather_into_tensor input", lambda: dist.all_gather_into_tensor(torch.empty(8, device=DEV), col), base)
    case("all_gather_into_tensor output", lambda: dist.all_gather_into_tensor(wide, x), wide_base)
    case("reduce_scatter output", lambda: dist.reduce_scatter(col, [x, x]), base)
    case("reduce_scatter_tensor input", lambda: dist.reduce_scatter_tensor(x, wide), x, wide_base)
    case("reduce_scatter_tensor output", lambda: dist.reduce_scatter_tensor(col, torch.ones(8, device=DEV)), base)
    case("all_to_all_single", lambda: dist.all_to_all_single(col, torch.ones(4, device=DEV)), base)
    case("all_to_all inputs", lambda: dist.all_to_all(two, [col, col]), base)
    case("all_to_all outputs", lambda: dist.all_to_all([col, col], [x, x]), base)
    case("gather input", lambda: dist.gather(col, two if root else None, dst=0), base)
    case("gather root outputs", lambda: dist.gather(x, [col, col] if root else None, dst=0), base)
    case("scatter output", lambda: dist.scatter(col, [x, x] if root else None, src=0), base)
    case("scatter root inputs", lambda: dist.scatter(x, [col, col] if root else None, src=0), x)

    def coalesced_gather():
        with dist._coalescing_manager():
            dist.all_gather_into_tensor(torch.empty(8, device=DEV), x)
            dist.all_gather_into_tensor(wide, x)

    case("coalesced all_gather_into_tensor", coalesced_gather, wide_base)
    case("all_reduce_coalesced expanded", lambda: dist.all_reduce_coalesced([x, a[127:].expand(64)]), a, b, x)
    case("async all_reduce", lambda: dist.all_reduce(col, async_op=True).wait(), base)
    # Only rank 0 passes a view: it raises its own reason, rank 1 the agreement's error naming rank 0's call.
    mine = col if RANK == 0 else torch.arange(4.0, device=DEV)
    case("one rank", lambda: dist.all_reduce(mine), base)
    # Dense tensors of one shape in two memory formats: raw memory would pair different elements.
    nchw = torch.arange(16.0, device=DEV).view(1, 4, 2, 2)
    mixed = nchw.contiguous(memory_format=torch.channels_last) if RANK == 0 else nchw.clone()
    case("memory formats differ", lambda: dist.all_reduce(mixed), mixed)


def accepted():
    """Layouts a collective takes: dense channels-last tensors, and any layout where gloo copies."""
    nchw = (torch.arange(16.0, device=DEV) + RANK).view(1, 4, 2, 2).contiguous(memory_format=torch.channels_last)

    def channels_last():
        dist.all_reduce(nchw)
        return [nchw.cpu().flatten().tolist(), list(nchw.stride())]

    case("all_reduce channels_last", channels_last)

    def coalesced_transposed():
        t = (torch.arange(6.0, device=DEV) + RANK).view(3, 2).t()
        dist.all_reduce_coalesced([t])
        return t.cpu().tolist()

    case("all_reduce_coalesced transposed", coalesced_transposed)
    outs = torch.zeros(4, 3, device=DEV)

    def gather_into_columns():
        dist.all_gather([outs[:, 0], outs[:, 2]], torch.arange(4.0, device=DEV) + 10 * RANK)
        return outs.cpu().tolist()

    case("all_gather column outputs", gather_into_columns)
    col0, base0 = column()
    col1, base1 = column(50)

    def scatter_from_columns():
        out = torch.empty(4, device=DEV)
        dist.reduce_scatter(out, [col0, col1])
        return out.cpu().tolist()

    case("reduce_scatter column inputs", scatter_from_columns, base0, base1)


def point_to_point():
    """send/recv take any tensor, through a dense copy, with NCCL's warning once per process (on stderr: c10d's
    bindings install no Python warning handler)."""
    col, base = column()
    around = base.clone()

    def column_to_column():
        if RANK == 0:
            dist.send(col, dst=1)
            return None
        dist.recv(col, src=0)
        around[:, 1] = torch.tensor([1.0, 5.0, 9.0, 13.0], device=DEV)
        # Only the column changed: rank 0's column, received into rank 1's.
        return [col.cpu().tolist(), torch.equal(base, around)]

    case("send/recv columns", column_to_column)
    a = torch.arange(128.0, device=DEV)
    b = torch.full((128,), 7.0, device=DEV)

    def expanded_send():
        if RANK == 0:
            dist.send(a[127:].expand(64), dst=1)
            return None
        got = torch.empty(64, device=DEV)
        dist.recv(got, src=0)
        return got.cpu().unique().tolist()

    case("send expanded", expanded_send, a, b)

    mine, mine_base = column(1000)
    into, _ = column(2000)
    irecv_into, _ = column(3000)

    def async_columns():
        # Each rank sends its column and receives the other's; then rank 1 receives one more column.
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, mine, PEER), dist.P2POp(dist.irecv, into, PEER)])
        for work in works:
            work.wait()
        if RANK == 0:
            dist.isend(mine, dst=1).wait()
        else:
            work = dist.irecv(irecv_into, src=0)
            work.wait()
            assert work.is_completed()
        return [into.cpu().tolist(), irecv_into.cpu().tolist()]

    case("batch_isend_irecv, irecv columns", async_columns, mine_base)
    if RANK == 1:
        case("recv into expanded", lambda: dist.recv(a[127:].expand(64), src=0), a, b)


def main():
    torch.openreg.set_device(RANK)
    dist.init_process_group("orccl")
    refusals()
    accepted()
    point_to_point()
    after = torch.ones(3, device=DEV)
    dist.all_reduce(after)
    report(after=after.cpu().tolist())
    dist.destroy_process_group()


main()
