"""Every c10d operation on openreg tensors over orccl, compared with the same operation on CPU tensors over
plain gloo in the same job. Reports, per operation, whether the openreg results equal the CPU ones
(dtype, shape, strides, values bit for bit)."""

import os
import sys
import traceback
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from distributed_launcher import report  # noqa: E402

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
DEV = torch.device("openreg", RANK)
FAILURES = {}
CHECKED = []


def values(shape, dtype, seed):
    g = torch.Generator().manual_seed(1000 * seed + RANK)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-50, 50, shape, generator=g).to(dtype)


def same(cpu, dev):
    if isinstance(cpu, (list, tuple)):
        return len(cpu) == len(dev) and all(same(c, d) for c, d in zip(cpu, dev))
    if isinstance(cpu, torch.Tensor):
        return (
            dev.device == DEV
            and cpu.dtype == dev.dtype
            and cpu.shape == dev.shape
            and cpu.stride() == dev.stride()
            and torch.equal(cpu, dev.cpu())
        )
    return cpu == dev


def check(name, fn, gloo_group, orccl_group=None):
    """fn(device, group) returns the tensors the operation wrote; run on CPU/gloo and openreg/orccl."""
    CHECKED.append(name)
    try:
        expected = fn(torch.device("cpu"), gloo_group)
        got = fn(DEV, orccl_group)
        if not same(expected, got):
            FAILURES[name] = f"cpu {expected!r} != openreg {got!r}"
    except Exception:
        FAILURES[name] = traceback.format_exc()


def to(device, tensors):
    return [t.to(device) for t in tensors]


def main():
    torch.openreg.set_device(RANK)
    dist.init_process_group(os.environ.get("ORCCL_TEST_BACKEND", "orccl"))
    gloo = dist.new_group(backend="gloo")

    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.uint8):
        for op in (dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX):

            def all_reduce(device, group, dtype=dtype, op=op):
                t = values((3, 5), dtype, 1).to(device)
                dist.all_reduce(t, op, group=group)
                return t

            check(f"all_reduce {op} {dtype}", all_reduce, gloo)
    for op in (dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR):

        def bitwise(device, group, op=op):
            t = values((7,), torch.int64, 2).to(device)
            dist.all_reduce(t, op, group=group)
            return t

        check(f"all_reduce {op}", bitwise, gloo)

    # AVG gives gloo's mean; PREMUL_SUM, which gloo lacks, raises gloo's own error, on openreg as on the CPU.
    def average(device, group):
        t = values((4,), torch.float32, 2).to(device)
        dist.all_reduce(t, dist.ReduceOp.AVG, group=group)
        return t

    check("all_reduce AVG as gloo", average, gloo)

    def premul_sum(device, group):
        try:
            dist.all_reduce(values((4,), torch.float32, 2).to(device), dist._make_nccl_premul_sum(2.0), group=group)
        except Exception as error:
            return [type(error).__name__, "Cannot use ReduceOp.PREMUL_SUM with Gloo" in str(error)]
        return "no error"

    check("all_reduce PREMUL_SUM raises as gloo does", premul_sum, gloo)

    def all_reduce_async(device, group):
        t = values((1000,), torch.float32, 3).to(device)
        work = dist.all_reduce(t, async_op=True, group=group)
        future_value = work.get_future().wait()
        work.wait()
        assert work.is_completed()
        if device.type == "openreg":
            assert future_value[0] is not None and future_value[0].device == DEV, future_value
        return [t, future_value[0]]

    check("all_reduce async_op, get_future", all_reduce_async, gloo)

    def after_stream_work(device, group):
        # A non-blocking copy from pinned memory is queued on the current (side) stream; the collective
        # must see what it writes, as NCCL's collective on that stream would.
        source = values((1 << 16,), torch.float32, 40)
        if device.type == "openreg":
            source = source.pin_memory()
            side = torch.openreg.Stream()
            with torch.openreg.stream(side):
                t = torch.empty_like(source, device=device)
                t.copy_(source, non_blocking=True)
                dist.all_reduce(t, group=group)
            side.synchronize()
        else:
            t = source.clone()
            dist.all_reduce(t, group=group)
        return t

    check("all_reduce after work queued on the current stream", after_stream_work, gloo)

    def freed_while_running(device, group):
        # The collective holds the memory it works on: dropping the tensor before wait() is safe.
        t = values((1 << 18,), torch.float32, 41).to(device)
        work = dist.all_reduce(t, async_op=True, group=group)
        future = work.get_future()
        del t
        doubled = future.then(lambda f: f.value()[0] * 2).wait()
        work.wait()
        return doubled

    check("async all_reduce, tensor dropped before wait, future continuation", freed_while_running, gloo)

    def async_burst(device, group):
        # Asynchronous collectives of different kinds and sizes issued back to back, waited in reverse: each
        # rank launches them in call order (gloo pairs them across ranks by that order).
        reduced = [values((n,), torch.float32, 50 + n).to(device) for n in (7, 1 << 14, 3)]
        broadcast = values((5,), torch.int64, 60).to(device)
        gathered = torch.empty(WORLD * 4, device=device)
        works = [dist.all_reduce(t, async_op=True, group=group) for t in reduced]
        works.append(dist.broadcast(broadcast, src=WORLD - 1, async_op=True, group=group))
        works.append(
            dist.all_gather_into_tensor(
                gathered, values((4,), torch.float32, 61).to(device), async_op=True, group=group
            )
        )
        futures = [work.get_future() for work in works]
        for work in reversed(works):
            work.wait()
        assert all(work.is_completed() and future.done() for work, future in zip(works, futures))
        return reduced + [broadcast, gathered]

    check("async collectives issued back to back", async_burst, gloo)

    def broadcast(device, group):
        t = values((2, 3), torch.float32, 5).to(device)
        dist.broadcast(t, src=WORLD - 1, group=group)
        return t

    check("broadcast", broadcast, gloo)

    def reduce(device, group):
        t = values((5,), torch.float64, 6).to(device)
        dist.reduce(t, dst=1, op=dist.ReduceOp.MAX, group=group)
        return t

    check("reduce", reduce, gloo)

    def all_gather(device, group):
        out = [torch.empty(3, 2, device=device) for _ in range(WORLD)]
        dist.all_gather(out, values((3, 2), torch.float32, 7).to(device), group=group)
        return out

    check("all_gather", all_gather, gloo)

    def all_gather_into_tensor(device, group):
        out = torch.empty(WORLD * 4, device=device, dtype=torch.int32)
        dist.all_gather_into_tensor(out, values((4,), torch.int32, 8).to(device), group=group)
        return out

    check("all_gather_into_tensor", all_gather_into_tensor, gloo)

    def reduce_scatter(device, group):
        out = torch.empty(3, device=device)
        dist.reduce_scatter(out, to(device, [values((3,), torch.float32, 9 + i) for i in range(WORLD)]), group=group)
        return out

    check("reduce_scatter", reduce_scatter, gloo)

    def reduce_scatter_tensor(device, group):
        out = torch.empty(2, 3, device=device)
        dist.reduce_scatter_tensor(out, values((2 * WORLD, 3), torch.float32, 10).to(device), group=group)
        return out

    check("reduce_scatter_tensor", reduce_scatter_tensor, gloo)

    def all_to_all(device, group):
        out = [torch.empty(2, device=device) for _ in range(WORLD)]
        dist.all_to_all(out, to(device, [values((2,), torch.float32, 11 + i) for i in range(WORLD)]), group=group)
        return out

    check("all_to_all", all_to_all, gloo)

    def all_to_all_single(device, group):
        out = torch.empty(WORLD * 2, device=device)
        dist.all_to_all_single(out, values((WORLD * 2,), torch.float32, 12).to(device), group=group)
        # Uneven splits: rank r sends r + 1 elements to every rank.
        out_uneven = torch.empty(sum(r + 1 for r in range(WORLD)), device=device)
        inp = values(((RANK + 1) * WORLD,), torch.float32, 13).to(device)
        dist.all_to_all_single(out_uneven, inp, [r + 1 for r in range(WORLD)], [RANK + 1] * WORLD, group=group)
        return [out, out_uneven]

    check("all_to_all_single", all_to_all_single, gloo)

    def gather(device, group):
        out = [torch.empty(4, device=device) for _ in range(WORLD)] if RANK == 0 else None
        dist.gather(values((4,), torch.float32, 14).to(device), out, dst=0, group=group)
        return out

    check("gather", gather, gloo)

    def scatter(device, group):
        out = torch.empty(3, device=device)
        chunks = to(device, [values((3,), torch.float32, 15 + i) for i in range(WORLD)]) if RANK == 1 else None
        dist.scatter(out, chunks, src=1, group=group)
        return out

    check("scatter", scatter, gloo)

    def barriers(device, group):
        dist.barrier(group=group)
        if device.type == "openreg":
            dist.monitored_barrier(group=group, wait_all_ranks=True)
        return True

    check("barrier, monitored_barrier", barriers, gloo)

    def send_recv(device, group):
        # A ring: isend to the next rank, recv from the previous one, then blocking send/recv back.
        nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
        got = torch.empty(5, device=device)
        req = dist.isend(values((5,), torch.float32, 16).to(device), dst=nxt, group=group)
        dist.irecv(got, src=prv, group=group).wait()
        req.wait()
        back = torch.empty(5, device=device)
        if RANK % 2 == 0:
            dist.send(got, dst=prv, group=group)
            dist.recv(back, src=nxt, group=group)
        else:
            dist.recv(back, src=nxt, group=group)
            dist.send(got, dst=prv, group=group)
        return [got, back]

    check("send, recv, isend, irecv", send_recv, gloo)

    def batch_isend_irecv(device, group):
        nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
        got = torch.empty(3, 3, device=device)
        ops = [
            dist.P2POp(dist.isend, values((3, 3), torch.float64, 17).to(device).float(), nxt, group),
            dist.P2POp(dist.irecv, got, prv, group),
        ]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        return got

    check("batch_isend_irecv", batch_isend_irecv, gloo)

    def coalesced(device, group):
        tensors = [values((i + 2,), torch.float32, 18 + i).to(device) for i in range(3)]
        dist.all_reduce_coalesced(tensors, group=group)
        gathered = [[torch.empty(i + 2, device=device) for i in range(2)] for _ in range(WORLD)]
        dist.all_gather_coalesced(gathered, tensors[:2], group=group)
        with dist._coalescing_manager(group=group):
            for t in tensors:
                dist.all_reduce(t, group=group)
        outs = [torch.empty(WORLD * 2, device=device) for _ in range(2)]
        with dist._coalescing_manager(group=group):
            for i, out in enumerate(outs):
                dist.all_gather_into_tensor(out, values((2,), torch.float32, 21 + i).to(device), group=group)
        scattered = [torch.empty(2, device=device) for _ in range(2)]
        with dist._coalescing_manager(group=group):
            for i, out in enumerate(scattered):
                dist.reduce_scatter_tensor(out, values((2 * WORLD,), torch.float32, 23 + i).to(device), group=group)
        return [tensors, gathered, outs, scattered]

    check("coalesced forms", coalesced, gloo)

    def objects(device, group):
        # Object collectives: pickled on the CPU, moved to the group's device (openreg for orccl).
        gathered = [None] * WORLD
        dist.all_gather_object(gathered, {"rank": RANK, "data": list(range(RANK))}, group=group)
        box = [f"from {RANK}"]
        dist.broadcast_object_list(box, src=1, group=group)
        one = [None]
        dist.scatter_object_list(one, [f"to {r}" for r in range(WORLD)] if RANK == 0 else None, src=0, group=group)
        at_root = [None] * WORLD if RANK == 0 else None
        dist.gather_object(("gathered", RANK), at_root, dst=0, group=group)
        return [gathered, box, one, at_root]

    check("object collectives", objects, gloo)

    # Sub-groups: the even ranks and the odd ranks, on both backends.
    for members in ([r for r in range(WORLD) if r % 2 == 0], [r for r in range(WORLD) if r % 2 == 1]):
        sub_gloo = dist.new_group(members, backend="gloo")
        sub_orccl = dist.new_group(members)
        if RANK in members:

            def sub(device, group, members=members):
                t = values((4,), torch.float32, 30).to(device)
                dist.all_reduce(t, group=group)
                out = [torch.empty(4, device=device) for _ in members]
                dist.all_gather(out, t, group=group)
                dist.broadcast(t, src=members[-1], group=group)
                return [t, out]

            check(f"new_group {members}", sub, sub_gloo, sub_orccl)

    # DeviceMesh("openreg", ...): a 2-D mesh's row groups, against gloo groups of the same ranks.
    from torch.distributed.device_mesh import init_device_mesh

    shape = (2, WORLD // 2) if WORLD % 2 == 0 and WORLD > 2 else (1, WORLD)
    mesh = init_device_mesh("openreg", shape)
    rows = [list(range(r * shape[1], (r + 1) * shape[1])) for r in range(shape[0])]
    row_gloo = [dist.new_group(row, backend="gloo") for row in rows][RANK // shape[1]]

    def device_mesh(device, group):
        t = values((6,), torch.float32, 31).to(device)
        dist.all_reduce(t, group=group)
        return t

    check("DeviceMesh", device_mesh, row_gloo, mesh.get_group(1))
    if mesh.device_type != "openreg" or mesh.mesh.tolist() != [list(row) for row in rows]:
        FAILURES["DeviceMesh layout"] = f"{mesh.device_type} {mesh.mesh.tolist()}"

    report(checked=CHECKED, failures=FAILURES, backend=dist.get_backend(), device=torch.openreg.current_device())
    dist.destroy_process_group()


main()
