"""torch's profilers on openreg: the legacy autograd profiler with
use_device="openreg" (event-timed device time per operator), the Kineto
activity profiler (ProfilerActivity.PrivateUse1: kernels, copies and ranges on
device/stream rows, linked to their aten:: ops), and the caching allocator's
memory records (profile_memory=True, export_memory_timeline).

Each test profiles in a fresh interpreter: the profiler's state and the
allocator's totals are per process, and the profiler reports failures of its
callbacks on stderr only, which a child's captured stderr shows.
"""

import json
import pathlib
import pickle

import pytest

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


# The profiled work, shared by the scripts below: a small training step whose results are compared with the CPU's
# (profiling must not change them), with a record_function region around the forward.
TRAINING_STEP = """
    def step(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(8, 16).to(device)
        target = torch.randn(8, 4).to(device)
        with torch.profiler.record_function("## forward ##"):
            loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        y = x @ x.T + 1
        return [loss.detach().cpu(), y.cpu()] + [p.detach().cpu() for p in model.parameters()]
"""


LEGACY_PROFILE = (
    """
    import json, time, warnings
    import torch
    import torch_openreg

"""
    + TRAINING_STEP
    + """
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
)


@pytest.mark.slow
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


KINETO_PROFILE = (
    """
    import json, os
    import torch
    import torch_openreg
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

"""
    + TRAINING_STEP
    + """
    expected = step("cpu")
    step("openreg")  # warm up
    with profile(activities=%(activities)s) as prof:
        got = step("openreg")
        with torch.openreg.profiler.range("my range"):
            z = torch.ones(64, device="openreg") * 3
        torch.openreg.profiler.mark("my mark")
    events = prof.events()
    by_id = {e.id: e for e in events if e.device_type == DeviceType.CPU}
    device = [e for e in events if e.device_type == DeviceType.PrivateUse1]
    linked = []
    for e in device:
        op = by_id.get(e.linked_correlation_id)
        linked.append(None if op is None else [
            e.name, op.name, e.time_range.start, e.time_range.end, op.time_range.start, op.time_range.end])
    path = os.path.join(%(tmp)r, "trace.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    print("RESULT=" + json.dumps({
        "equal": all(torch.equal(a, b) for a, b in zip(expected, got)),
        "device": [[e.name, e.device_index, e.linked_correlation_id] for e in device],
        "linked": linked,
        # The operators' rows (a fallback kernel has its operator's name too).
        "ops": {e.key: [e.device_time_total, e.self_device_time_total, e.cpu_time_total]
                for e in prof.key_averages() if e.device_type == DeviceType.CPU},
        "trace": trace["traceEvents"],
    }))
"""
)


def kineto_profile(tmp_path, activities="[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]"):
    return child_result(KINETO_PROFILE % {"activities": activities, "tmp": str(tmp_path)})


@pytest.fixture(scope="module")
def device_profile(tmp_path_factory):
    """One profiled training step with device activity, read by several tests."""
    return kineto_profile(tmp_path_factory.mktemp("kineto"))


@pytest.mark.slow
def test_kineto_device_activity_links_each_kernel_and_copy_to_its_op(device_profile):
    result = device_profile
    assert result["equal"]  # profiling does not change results
    names = {name for name, _index, _corr in result["device"]}
    # Kernels are named after the operator that runs them (fallback operators
    # by their schema name, DispatchStub kernels by their out= overload);
    # copies by their direction.
    assert {"aten::addmm.out", "aten::mm.out", "Memcpy HtoD", "Memcpy DtoH"} <= names, names
    assert all(index == 0 for _name, index, _corr in result["device"])
    launched = [entry for entry, (_name, _index, corr) in zip(result["linked"], result["device"]) if corr != 0]
    assert len(launched) > 10
    for entry in launched:
        assert entry is not None  # every correlated activity finds its aten:: op
        name, op, start, end, op_start, op_end = entry
        # Kernels and synchronous copies run inside their op's host interval.
        # The runtime stamps with CLOCK_REALTIME; torch stamps operators with
        # its approximate clock (TSC) converted to that clock by a linear fit,
        # which is off by tens of nanoseconds: 1 us of slack absorbs that.
        assert op_start - 1 <= start <= end <= op_end + 1, entry
    ops = result["ops"]
    for name in ["aten::addmm", "aten::mm", "aten::relu", "aten::mse_loss", "aten::_copy_from"]:
        total, _self_total, wall = ops[name]
        assert 0 < total <= wall, (name, ops[name])
    for name, (total, self_total, wall) in ops.items():
        if name.startswith("aten::"):
            assert 0 <= self_total <= total <= wall, (name, ops[name])


def test_kineto_chrome_trace_has_openreg_device_and_stream_rows(device_profile):
    events = device_profile["trace"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    copies = [e for e in events if e.get("cat") == "gpu_memcpy"]
    assert kernels and copies
    assert {e["pid"] for e in kernels + copies} == {0}  # the device index
    assert all(e["args"]["bytes"] > 0 for e in copies)
    assert all(e["args"]["External id"] > 0 for e in kernels)  # the launching op's correlation id
    rows = {(e["pid"], e["args"]["name"]) for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    assert (0, "openreg 0 stream 0") in rows
    labels = {
        e["args"]["labels"] for e in events if e.get("ph") == "M" and e["name"] == "process_labels" and e["pid"] == 0
    }
    assert labels == {"openreg 0"}
    # torch.openreg.profiler ranges: on the stream's row, around their work.
    ranges = {e["name"]: e for e in events if e.get("cat") == "gpu_user_annotation" and e["pid"] == 0}
    assert {"my range", "my mark"} <= set(ranges)
    span = ranges["my range"]
    inside = [
        e for e in kernels if e["name"].startswith("aten::mul") and span["ts"] <= e["ts"] <= span["ts"] + span["dur"]
    ]
    assert inside
    # record_function shows on the host side as usual.
    assert any(e["name"] == "## forward ##" for e in events if e.get("cat") == "user_annotation")


@pytest.mark.slow
def test_cpu_only_profile_records_no_device_activity(tmp_path):
    result = kineto_profile(tmp_path, activities="[ProfilerActivity.CPU]")
    assert result["equal"]
    assert result["device"] == []
    assert not [e for e in result["trace"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_user_annotation")]


@pytest.mark.slow
def test_schedule_and_tensorboard_trace_handler_write_device_activity(tmp_path):
    result = child_result(
        """
        import glob, json, os
        import torch
        import torch_openreg
        from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

        ready = []
        handler = tensorboard_trace_handler(%(tmp)r, worker_name="w")
        def on_ready(prof):
            ready.append(prof.step_num)
            handler(prof)

        x = torch.randn(32, 32, device="openreg")
        with profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
            schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
            on_trace_ready=on_ready,
        ) as prof:
            for _ in range(5):
                y = (x @ x).relu().sum()
                prof.step()
        files = glob.glob(os.path.join(%(tmp)r, "w.*.pt.trace.json"))
        with open(files[0]) as f:
            events = json.load(f)["traceEvents"]
        steps = sorted(e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#"))
        print("RESULT=" + json.dumps({
            "ready": ready,
            "files": len(files),
            "steps": steps,
            "kernels": sorted({e["name"] for e in events if e.get("cat") == "kernel"}),
            "value_ok": torch.equal(y.cpu(), (x.cpu() @ x.cpu()).relu().sum()),
        }))
        """
        % {"tmp": str(tmp_path)}
    )
    assert result["value_ok"]
    assert result["ready"] == [4] and result["files"] == 1
    assert result["steps"] == ["ProfilerStep#2", "ProfilerStep#3"]  # the active steps only
    assert {"aten::mm.out", "aten::relu"} <= set(result["kernels"])


@pytest.mark.slow
def test_profiler_range_errors():
    result = child_result(
        """
        import json
        import torch
        import torch_openreg
        errors = {}
        for name, call in [
            ("pop_without_push", lambda: torch.openreg.profiler.range_pop()),
            ("bad_device", lambda: torch.openreg.profiler.range_push("r", device=torch.openreg.device_count())),
            ("bad_device_context", lambda: torch.openreg.profiler.range("r", device="openreg:9").__enter__()),
        ]:
            try:
                call()
                errors[name] = None
            except (RuntimeError, ValueError) as e:
                errors[name] = str(e)
        # Nesting outside a profiler is balanced and records nothing.
        with torch.openreg.profiler.range("outer"):
            torch.openreg.profiler.range_push("inner")
            torch.openreg.profiler.range_pop()
        print("RESULT=" + json.dumps({"errors": errors, "count": torch.openreg.device_count()}))
        """
    )
    errors = result["errors"]
    assert "no range is open" in errors["pop_without_push"]
    assert f"Invalid openreg device index {result['count']}" in errors["bad_device"]
    assert "Invalid openreg device index 9" in errors["bad_device_context"]


MEMORY_PROFILE = """
    import json, os
    import torch
    import torch_openreg
    from torch.profiler import ProfilerActivity, profile

    def profiled(device, kept):
        # export_memory_timeline needs shapes and stacks recorded too.
        with profile(
            activities=[ProfilerActivity.CPU],
            profile_memory=%(profile_memory)s,
            record_shapes=%(profile_memory)s,
            with_stack=%(profile_memory)s,
        ) as prof:
            a = torch.ones(1000, device=device)
            b = a * 2
            scratch = torch.empty(300, device=device)
            del scratch
            kept.append(b + 1)
            del a
        return prof, b

    # The CPU reference: whether this torch's key_averages() charges the frees
    # made between operators (del) to the Python frame (2.13) or to nothing (2.14).
    cpu_prof, _ = profiled("cpu", [])
    cpu_records = [e for e in cpu_prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    cpu_self_usage = sum(e.self_cpu_memory_usage for e in cpu_prof.key_averages())

    kept = []
    before = torch.openreg.memory_allocated()
    prof, b = profiled("openreg", kept)
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
        "frees_between_operators_counted": cpu_self_usage == sum(e.nbytes() for e in cpu_records),
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


@pytest.mark.slow
def test_profile_memory_records_openreg_allocations_and_frees(tmp_path):
    result = child_result(MEMORY_PROFILE % {"profile_memory": True, "tmp": str(tmp_path)})
    assert result["values_ok"]
    assert result["delta"] == result["allocated"] > 0
    sizes = result["record_bytes"]
    assert any(n > 0 for n in sizes) and any(n < 0 for n in sizes)  # allocations and frees
    assert sum(sizes) == result["delta"]
    # Per operator, as key_averages() shows it for the CPU with the same torch: every record, or the allocations
    # alone (each free here happens between operators).
    counted = sizes if result["frees_between_operators_counted"] else [n for n in sizes if n > 0]
    assert result["self_usage"] == sum(counted) > 0
    assert result["record_devices"] == [0]
    # The memory timeline of the device ends at what the allocator holds.
    assert result["timeline_len"] > 0
    assert result["timeline_final"] == result["allocated"]


@pytest.mark.slow
def test_without_profile_memory_nothing_is_recorded_and_allocation_is_unchanged(tmp_path):
    result = child_result(MEMORY_PROFILE % {"profile_memory": False, "tmp": str(tmp_path)})
    assert result["values_ok"]
    assert result["record_bytes"] == []
    assert result["self_usage"] == 0
    # The same allocations as with memory profiling on: 4 KiB blocks for b and b + 1.
    assert result["delta"] == result["allocated"] == 2 * 4096


EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "profile_training.py"


@pytest.mark.long
def test_profile_training_example_writes_a_trace_and_prints_top_ops(tmp_path):
    """Without --out-dir the files go to the system's temporary directory,
    not the working directory (a checkout, when run from the repository)."""
    working = tmp_path / "working"
    working.mkdir()
    proc = run_python(
        f"""
        import os, runpy, sys
        os.chdir({str(working)!r})
        sys.argv = ["profile_training.py", "--steps", "2"]
        runpy.run_path({str(EXAMPLE)!r}, run_name="__main__")
        """,
        timeout=300,
        TMPDIR=tmp_path,
    )
    stdout = check_ok(proc)
    assert list(working.iterdir()) == []
    tmp_path = tmp_path / "openreg_profile"
    assert f"Chrome trace: {tmp_path / 'openreg_trace.json'}" in stdout
    assert "OPENREG total" in stdout  # the key_averages table, by device time
    with open(tmp_path / "openreg_trace.json") as f:
        events = json.load(f)["traceEvents"]
    assert [e for e in events if e.get("cat") == "kernel" and e["pid"] == 0]
    assert sum(1 for e in events if e.get("cat") == "gpu_user_annotation" and e["name"] == "step") == 2
    snapshot = tmp_path / "openreg_memory_snapshot.pickle"
    if "no memory snapshot" in stdout:
        assert not snapshot.exists()
    else:
        with open(snapshot, "rb") as f:
            assert {"segments", "device_traces"} <= set(pickle.load(f))
