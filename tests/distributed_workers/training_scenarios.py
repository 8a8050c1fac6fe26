"""Training scenarios run inside each rank of a job (tests/test_distributed_training.py).

    training_scenarios.py --device openreg --out DIR SCENARIO [SCENARIO ...]

Each rank reads RANK, WORLD_SIZE and LOCAL_RANK (torchrun's variables), binds its device, runs every
scenario once on ``--device`` and once on the CPU over gloo, in the same process group, and reports one
result per scenario: {"scenario", "ok", "detail"}. The CPU run is the reference: the collectives on both
sides are gloo's, so the two runs must agree bit for bit. Scenarios that can also be checked against a
single-process computation do so inside the scenario. DIR holds the checkpoints.
"""

import argparse
import os
import sys
import traceback
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from distributed_launcher import report  # noqa: E402

RANK = int(os.environ.get("RANK", 0))
WORLD = int(os.environ.get("WORLD_SIZE", 1))
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", 0))


class Mismatch(AssertionError):
    pass


def check(condition, message):
    if not condition:
        raise Mismatch(message)


def to_cpu(value):
    """A structure of results with every tensor (DTensors as their full value) on the CPU."""
    from torch.distributed.tensor import DTensor

    if isinstance(value, DTensor):
        value = value.full_tensor()
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {key: to_cpu(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_cpu(item) for item in value]
    return value


def assert_identical(actual, expected, path="result"):
    """Same structure, same tensors (dtype, shape, strides, bits), same other values."""
    if isinstance(expected, torch.Tensor):
        check(isinstance(actual, torch.Tensor), f"{path}: {type(actual).__name__} instead of a tensor")
        for what in ("dtype", "shape"):
            check(
                getattr(actual, what) == getattr(expected, what),
                f"{path}: {what} {getattr(actual, what)} != {getattr(expected, what)}",
            )
        check(actual.stride() == expected.stride(), f"{path}: strides {actual.stride()} != {expected.stride()}")
        check(
            torch.equal(actual, expected),
            f"{path}: values differ, largest difference {(actual.double() - expected.double()).abs().max().item():.3g}",
        )
    elif isinstance(expected, dict):
        check(isinstance(actual, dict) and actual.keys() == expected.keys(), f"{path}: keys differ")
        for key in expected:
            assert_identical(actual[key], expected[key], f"{path}.{key}")
    elif isinstance(expected, list):
        check(isinstance(actual, list) and len(actual) == len(expected), f"{path}: lengths differ")
        for index, (a, e) in enumerate(zip(actual, expected)):
            assert_identical(a, e, f"{path}[{index}]")
    else:
        check(actual == expected, f"{path}: {actual!r} != {expected!r}")


def assert_close(actual, expected, what, rtol=1e-5, atol=1e-6):
    try:
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)
    except AssertionError as error:
        raise Mismatch(f"{what}: {error}") from None


# --- models and data, identical on every rank and device (seeded)


class MLP(nn.Module):
    def __init__(self, sizes=(32, 64, 64, 8), unused_head=False):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))
        # A head forward never reaches: DDP must be told (find_unused_parameters).
        self.unused_head = nn.Linear(sizes[-1], 3) if unused_head else None

    def forward(self, x):
        for index, layer in enumerate(self.layers):
            x = layer(x)
            if index < len(self.layers) - 1:
                x = F.relu(x)
        return x


def make_model(device, seed=0, **kwargs):
    torch.manual_seed(seed)
    return MLP(**kwargs).to(device)


def global_batches(steps, batch=8 * 4, features=32, classes=8, seed=1):
    """The same global batches on every rank; a rank trains on its contiguous slice."""
    g = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(batch, features, generator=g), torch.randint(0, classes, (batch,), generator=g))
        for _ in range(steps)
    ]


def local_slice(tensor):
    return tensor.chunk(WORLD)[RANK]


def mesh_for(device):
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh(device, (WORLD,))


# --- scenarios: each takes a device and returns its results (compared with the CPU run's)

DDP_CONFIGS = {
    # bucket_cap_mb small enough for several buckets once DDP rebuilds them after the first step.
    "ddp_buckets": dict(bucket_cap_mb=0.01),
    "ddp_gradient_as_bucket_view": dict(bucket_cap_mb=0.01, gradient_as_bucket_view=True),
    "ddp_no_sync": dict(bucket_cap_mb=0.01),
    "ddp_find_unused_parameters": dict(find_unused_parameters=True),
    "ddp_static_graph": dict(static_graph=True),
}


def ddp_scenario(name):
    config = DDP_CONFIGS[name]

    def run(device):
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = make_model(device, unused_head=name == "ddp_find_unused_parameters")
        device_ids = None if device == "cpu" else [LOCAL_RANK]
        ddp = DDP(model, device_ids=device_ids, **config)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
        losses, grads_are_views = [], []
        for inputs, labels in global_batches(4):
            optimizer.zero_grad()
            if name == "ddp_no_sync":
                # Two micro-batches: the first accumulates locally, the second synchronizes.
                first, second = local_slice(inputs).chunk(2), local_slice(labels).chunk(2)
                with ddp.no_sync():
                    F.cross_entropy(ddp(first[0].to(device)), second[0].to(device)).backward()
                loss = F.cross_entropy(ddp(first[1].to(device)), second[1].to(device))
            else:
                loss = F.cross_entropy(ddp(local_slice(inputs).to(device)), local_slice(labels).to(device))
            loss.backward()
            grads_are_views.append([p.grad is not None and p.grad._base is not None for p in model.parameters()])
            optimizer.step()
            losses.append(loss.detach())
        if name != "ddp_no_sync":
            # The same steps in one process on the global batch: the same arithmetic up to summation order.
            reference = make_model("cpu", unused_head=name == "ddp_find_unused_parameters")
            ref_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
            for inputs, labels in global_batches(4):
                ref_optimizer.zero_grad()
                F.cross_entropy(reference(inputs), labels).backward()
                ref_optimizer.step()
            for (key, p), q in zip(model.named_parameters(), reference.parameters()):
                assert_close(p.detach().cpu(), q.detach(), f"{device} DDP against one process: {key}", rtol=1e-4)
        # DDP's timings (a timer registered for the device type; without one DDP warns and logs none).
        logged = ddp._get_ddp_logging_data()
        timings = sorted(key for key in logged if key.startswith("avg_") and key.endswith("_time"))
        check(logged.get("avg_forward_compute_time", 0) > 0, f"{device}: DDP logged no forward time: {timings}")
        buckets = len(ddp.reducer._get_zeros_like_grad_buckets())
        if "bucket_cap_mb" in config:
            check(buckets > 1, f"{device}: {buckets} gradient bucket(s), expected several")
        if name == "ddp_gradient_as_bucket_view":
            check(all(all(step) for step in grads_are_views), f"{device}: gradients are not bucket views")
        if name == "ddp_find_unused_parameters":
            check(model.unused_head.weight.grad is None, f"{device}: the unused head got a gradient")
        return {
            "losses": losses,
            "params": dict(model.named_parameters()),
            "grads_are_views": grads_are_views,
            "buckets": buckets,
            "timings": timings,
        }

    return run


def dtensor(device):
    from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor

    mesh = mesh_for(device)
    full = torch.arange(5 * 6, dtype=torch.float32).reshape(5, 6)  # 5 rows: an uneven Shard(0)
    sharded = distribute_tensor(full.to(device), mesh, [Shard(0)])
    check(torch.equal(sharded.to_local().cpu(), full.tensor_split(WORLD)[RANK]), f"{device}: Shard(0) local part")
    replicated = sharded.redistribute(mesh, [Replicate()])
    columns = sharded.redistribute(mesh, [Shard(1)])
    check(torch.equal(replicated.to_local().cpu(), full), f"{device}: Shard(0) -> Replicate")
    check(torch.equal(columns.full_tensor().cpu(), full), f"{device}: Shard(0) -> Shard(1) -> full_tensor")
    # A product of column and row shards is a Partial sum; redistributing it reduces.
    left = distribute_tensor(full.to(device), mesh, [Shard(1)])
    right = distribute_tensor(full.t().contiguous().to(device), mesh, [Shard(0)])
    product = torch.mm(left, right)
    check(product.placements == (Partial(),), f"{device}: mm of Shard(1) by Shard(0) is {product.placements}")
    assert_close(product.full_tensor().cpu(), full @ full.t(), f"{device}: Partial -> full_tensor")
    scattered = product.redistribute(mesh, [Shard(0)])
    return {
        "sharded": sharded.to_local(),
        "replicated": replicated.to_local(),
        "columns": columns.to_local(),
        "product": product.full_tensor(),
        "reduce_scattered": scattered.to_local(),
    }


def fsdp2_mixed_precision(device):
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = mesh_for(device)
    model = make_model(device)
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses, output_dtypes = [], []
    for inputs, labels in global_batches(3):
        optimizer.zero_grad()
        logits = model(local_slice(inputs).to(device))
        output_dtypes.append(str(logits.dtype))
        loss = F.cross_entropy(logits.float(), local_slice(labels).to(device))
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    check(output_dtypes == ["torch.bfloat16"] * 3, f"{device}: forward ran in {output_dtypes}")
    check(all(p.dtype == torch.float32 for p in model.parameters()), f"{device}: sharded parameters not float32")
    local_shapes = [list(p.to_local().shape) for p in model.parameters()]
    return {"losses": losses, "params": dict(model.named_parameters()), "local_shapes": local_shapes}


def tensor_parallel(device):
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = mesh_for(device)
    model = make_model(device, sizes=(32, 64, 32))
    parallelize_module(model, mesh, {"layers.0": ColwiseParallel(), "layers.1": RowwiseParallel()})
    reference = make_model("cpu", sizes=(32, 64, 32))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    outputs = []
    for inputs, _ in global_batches(3):
        optimizer.zero_grad()
        ref_optimizer.zero_grad()
        output = model(inputs.to(device))  # every rank sees the whole batch
        output.square().mean().backward()
        reference(inputs).square().mean().backward()
        optimizer.step()
        ref_optimizer.step()
        outputs.append(output.detach())
    check(model.layers[0].weight.placements[0].is_shard(0), f"{device}: colwise weight not Shard(0)")
    check(model.layers[1].weight.placements[0].is_shard(1), f"{device}: rowwise weight not Shard(1)")
    for (key, p), q in zip(model.named_parameters(), reference.parameters()):
        assert_close(p.full_tensor().cpu(), q.detach(), f"{device} tensor parallel against one process: {key}")
    return {"outputs": outputs, "params": dict(model.named_parameters())}


def checkpoint_dir(device):
    return os.path.join(ARGS.out, f"checkpoint-{device}")


def distributed_checkpoint(device):
    """Saves a sharded state dict, loads it into a differently initialized sharded model."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
    from torch.distributed.fsdp import fully_shard

    mesh = mesh_for(device)

    def sharded_model(seed):
        model = make_model(device, seed=seed)
        fully_shard(model, mesh=mesh)
        return model

    saved = sharded_model(seed=0)
    state = get_model_state_dict(saved)
    check(all(v.device.type == device for v in state.values()), f"{device}: state dict not on {device}")
    dcp.save(state, checkpoint_id=checkpoint_dir(device))
    loaded = sharded_model(seed=1)
    target = get_model_state_dict(loaded)
    dcp.load(target, checkpoint_id=checkpoint_dir(device))
    set_model_state_dict(loaded, target)
    for (key, a), b in zip(saved.named_parameters(), loaded.parameters()):
        check(torch.equal(a.to_local().cpu(), b.to_local().cpu()), f"{device}: {key} differs after load")
        check(b.device.type == device, f"{device}: {key} loaded onto {b.device}")
    # What the openreg run wrote loads into the CPU model too: the files hold no device.
    cross = make_model("cpu", seed=2)
    fully_shard(cross, mesh=mesh_for("cpu"))
    cross_state = get_model_state_dict(cross)
    dcp.load(cross_state, checkpoint_id=checkpoint_dir(device))
    for key, value in cross_state.items():
        check(torch.equal(value.full_tensor(), state[key].full_tensor().cpu()), f"{device} checkpoint on cpu: {key}")
    return {"params": dict(loaded.named_parameters())}


def dataloader_distributed_sampler(device):
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
    from torch.nn.parallel import DistributedDataParallel as DDP

    g = torch.Generator().manual_seed(3)
    dataset = TensorDataset(torch.randn(37, 32, generator=g), torch.randint(0, 8, (37,), generator=g), torch.arange(37))
    sampler = DistributedSampler(dataset, shuffle=True, seed=5)
    # pin_memory pins for the current accelerator; the worker process only produces CPU batches.
    loader = DataLoader(
        dataset, batch_size=5, sampler=sampler, num_workers=1, pin_memory=device != "cpu", persistent_workers=True
    )
    model = make_model(device)
    ddp = DDP(model, device_ids=None if device == "cpu" else [LOCAL_RANK])
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    losses, seen = [], []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        epoch_indices = []
        for inputs, labels, indices in loader:
            if device != "cpu":
                check(inputs.is_pinned(), f"{device}: DataLoader batch not pinned")
            optimizer.zero_grad()
            loss = F.cross_entropy(ddp(inputs.to(device, non_blocking=True)), labels.to(device, non_blocking=True))
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
            epoch_indices += indices.tolist()
        everyone = [None] * WORLD
        dist.all_gather_object(everyone, epoch_indices)
        covered = sorted(set(sum(everyone, [])))
        check(covered == list(range(37)), f"{device}: epoch {epoch} covered {covered}")
        check(len(epoch_indices) == len(sampler), f"{device}: {len(epoch_indices)} samples, sampler {len(sampler)}")
        seen.append(epoch_indices)
    return {"losses": losses, "params": dict(model.named_parameters()), "indices": seen}


SCENARIOS = {name: ddp_scenario(name) for name in DDP_CONFIGS}
SCENARIOS.update(
    {
        "dtensor": dtensor,
        "fsdp2_mixed_precision": fsdp2_mixed_precision,
        "tensor_parallel": tensor_parallel,
        "distributed_checkpoint": distributed_checkpoint,
        "dataloader_distributed_sampler": dataloader_distributed_sampler,
    }
)


def main():
    if ARGS.device != "cpu":
        torch.accelerator.set_device_index(LOCAL_RANK)
        # The device's tensors over its backend, the CPU reference's over gloo (as "cpu:gloo,cuda:nccl").
        dist.init_process_group(f"cpu:gloo,{ARGS.device}:orccl", timeout=timedelta(seconds=60))
    else:
        dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    failed = False
    for name in ARGS.scenarios:
        try:
            result = to_cpu(SCENARIOS[name](ARGS.device))
            assert_identical(result, to_cpu(SCENARIOS[name]("cpu")), f"{ARGS.device} against cpu")
            report(
                scenario=name,
                ok=True,
                detail="",
                sanitized=ARGS.device != "cpu" and torch.openreg.sanitizer.is_enabled(),
            )
        except Mismatch as error:
            # Collectives stayed in step across ranks: the next scenario can still run.
            report(scenario=name, ok=False, detail=str(error))
        except Exception:
            # A rank that raised may have left its peers inside a collective: stop here.
            report(scenario=name, ok=False, detail=traceback.format_exc())
            failed = True
            break
    if not failed:
        dist.barrier()  # every rank has reported before any exits (docs/distributed.md, Limits)
        dist.destroy_process_group()
    return 1 if failed else 0


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="openreg")
    parser.add_argument("--out", required=True, help="a folder for the checkpoints, shared by the ranks")
    parser.add_argument("scenarios", nargs="+", choices=sorted(SCENARIOS))
    return parser.parse_args()


if __name__ == "__main__":
    ARGS = parse_args()
    sys.exit(main())
