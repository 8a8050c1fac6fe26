"""torch's profilers on openreg: the legacy autograd profiler with
use_device="openreg" (event-timed device time per operator) and the caching
allocator's memory records (profile_memory=True, export_memory_timeline).

Each test profiles in a fresh interpreter: the profiler's state and the
allocator's totals are per process, and the profiler reports failures of its
callbacks on stderr only, which a child's captured stderr shows.
"""
import json

from conftest import check_ok, run_python

# What torch prints when a PrivateUse1 profiler path is missing its backend.
PROFILER_FAILURE_TEXT = ["not enabled", "kineto_ctx_ptr", "Exception in RecordFunction callback", "INTERNAL ASSERT"]


def child_result(code):
    proc = run_python(code)
    stdout = check_ok(proc)
    for text in PROFILER_FAILURE_TEXT:
        assert text not in proc.stderr, proc.stderr
    line = next(line for line in stdout.splitlines() if line.startswith("RESULT="))
    return json.loads(line[len("RESULT=") :])


LEGACY_PROFILE = """
    import json, time, warnings
    import torch
    import torch_openreg

    def step(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(8, 16).to(device)
        target = torch.randn(8, 4).to(device)
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        y = x @ x.T + 1
        return [loss.detach().cpu(), y.cpu()] + [p.detach().cpu() for p in model.parameters()]

    expected = step("cpu")
    step("openreg")  # warm up: lazy initialisation stays out of the profile
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        region_start = time.perf_counter_ns()
        with torch.autograd.profiler.profile(use_device="openreg") as prof:
            got = step("openreg")
        region_us = (time.perf_counter_ns() - region_start) / 1000
        averages = prof.key_averages()
    top_level = [e for e in prof.function_events if e.cpu_parent is None]
    print("RESULT=" + json.dumps({
        "warnings": [str(w.message) for w in caught],
        "equal": all(torch.equal(a, b) for a, b in zip(expected, got)),
        "ops": {e.key: [e.device_time_total, e.self_device_time_total, e.count] for e in averages},
        "top_level_device_us": sum(e.device_time_total for e in top_level),
        "region_us": region_us,
    }))
"""


def test_legacy_profiler_times_openreg_ops_without_warnings():
    result = child_result(LEGACY_PROFILE)
    assert result["warnings"] == []
    assert result["equal"]  # profiling does not change results
    ops = result["ops"]
    # Operators that compute on the device get device time.
    for name in ["aten::addmm", "aten::mm", "aten::add", "aten::relu", "aten::mse_loss"]:
        assert ops[name][0] > 0, (name, ops[name])
    for name, (total, self_time, _count) in ops.items():
        assert 0 <= self_time <= total, (name, total, self_time)
    # Top-level operators' stream intervals follow each other on the one
    # stream, and the profiler synchronizes the device before it stops, so
    # their device times fit in the region's wall time.
    assert 0 < result["top_level_device_us"] <= result["region_us"]


def test_kineto_profiler_with_privateuse1_activity_does_not_fail():
    # No Kineto activity profiler is registered for openreg yet: the run works
    # and lists the CPU-side operators, with no device rows.
    result = child_result(
        """
        import json
        import torch
        import torch_openreg
        from torch.profiler import ProfilerActivity, profile

        x = torch.randn(32, 32, device="openreg")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            y = (x @ x).relu().sum()
        averages = prof.key_averages()
        print("RESULT=" + json.dumps({
            "ops": sorted(e.key for e in averages),
            "value_ok": torch.equal(y.cpu(), (x.cpu() @ x.cpu()).relu().sum()),
        }))
        """
    )
    assert result["value_ok"]
    assert {"aten::mm", "aten::relu", "aten::sum"} <= set(result["ops"])


MEMORY_PROFILE = """
    import json, os
    import torch
    import torch_openreg
    from torch.profiler import ProfilerActivity, profile

    kept = []
    before = torch.openreg.memory_allocated()
    # export_memory_timeline needs shapes and stacks recorded too.
    with profile(
        activities=[ProfilerActivity.CPU],
        profile_memory=%(profile_memory)s,
        record_shapes=%(profile_memory)s,
        with_stack=%(profile_memory)s,
    ) as prof:
        a = torch.ones(1000, device="openreg")
        b = a * 2
        scratch = torch.empty(300, device="openreg")
        del scratch
        kept.append(b + 1)
        del a
    after = torch.openreg.memory_allocated()
    records = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    openreg = [e for e in records if e.device_type() == torch.autograd.DeviceType.PrivateUse1]
    result = {
        "delta": after - before,
        "allocated": after,
        "values_ok": torch.equal(kept[0].cpu(), torch.full((1000,), 3.0)) and torch.equal(b.cpu(), torch.full((1000,), 2.0)),
        "record_bytes": [e.nbytes() for e in openreg],
        "record_devices": sorted({e.device_index() for e in openreg}),
        "self_usage": sum(e.self_device_memory_usage for e in prof.key_averages()),
    }
    if %(profile_memory)s:
        path = os.path.join(%(tmp)r, "timeline.json")
        prof.export_memory_timeline(path, device="openreg:0")
        with open(path) as f:
            times, sizes = json.load(f)
        result["timeline_len"] = len(times)
        result["timeline_final"] = sum(sizes[-1])
    print("RESULT=" + json.dumps(result))
"""


def test_profile_memory_records_openreg_allocations_and_frees(tmp_path):
    result = child_result(MEMORY_PROFILE % {"profile_memory": True, "tmp": str(tmp_path)})
    assert result["values_ok"]
    assert result["delta"] == result["allocated"] > 0
    sizes = result["record_bytes"]
    assert any(n > 0 for n in sizes) and any(n < 0 for n in sizes)  # allocations and frees
    assert sum(sizes) == result["delta"]
    assert result["self_usage"] == result["delta"]  # per operator, as key_averages() shows it
    assert result["record_devices"] == [0]
    # The memory timeline of the device ends at what the allocator holds.
    assert result["timeline_len"] > 0
    assert result["timeline_final"] == result["allocated"]


def test_without_profile_memory_nothing_is_recorded_and_allocation_is_unchanged(tmp_path):
    result = child_result(MEMORY_PROFILE % {"profile_memory": False, "tmp": str(tmp_path)})
    assert result["values_ok"]
    assert result["record_bytes"] == []
    assert result["self_usage"] == 0
    # The same allocations as with memory profiling on: 4 KiB blocks for b and b + 1.
    assert result["delta"] == result["allocated"] == 2 * 4096
