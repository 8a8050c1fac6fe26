"""Memory history and snapshots: torch.openreg.memory._record_memory_history,
_snapshot, _dump_snapshot and memory_snapshot produce torch.cuda's snapshot
format, which PyTorch's own visualizer (torch.cuda._memory_viz) reads."""

import base64
import ctypes
import gc
import json
import pickle
import subprocess
import sys
import threading

import pytest
import torch
from torch.cuda import _memory_viz

import torch_openreg

# The keys torch.cuda.memory._snapshot() produces (torch/csrc/cuda's snapshot
# code and the _snapshot docstring).
SNAPSHOT_KEYS = {"segments", "device_traces", "allocator_settings", "external_annotations"}
SEGMENT_KEYS = {
    "device",
    "address",
    "total_size",
    "allocated_size",
    "active_size",
    "requested_size",
    "stream",
    "segment_type",
    "segment_pool_id",
    "is_expandable",
    "frames",
    "blocks",
}
BLOCK_KEYS = {"address", "size", "requested_size", "state", "frames"}
BLOCK_STATES = {"active_allocated", "active_pending_free", "inactive"}
TRACE_KEYS = {"action", "addr", "size", "stream", "frames", "time_us", "compile_context", "user_metadata"}
ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom", "snapshot"}
FRAME_KEYS = {"filename", "line", "name"}

memory = torch.openreg.memory


@pytest.fixture
def history():
    """Records with Python stacks from a clean history; stops afterwards."""
    gc.collect()  # frees of earlier tests' garbage stay out of the history
    memory.empty_cache()  # so that a block cached by an earlier test serves no allocation expecting a new segment
    memory._record_memory_history("all", stacks="python", clear_history=True)
    yield
    memory._record_memory_history(None)


def _entries(snapshot, device=0):
    return snapshot["device_traces"][device]


def _frames_here(frames):
    """The recorded frames of this file, innermost first (a dispatch mode such as the sanitizer's adds its own)."""
    return [frame for frame in frames if frame["filename"] == __file__]


def _allocate_in_named_function(numel):
    return torch.empty(numel, dtype=torch.uint8, device="openreg:0")


@pytest.mark.slow
def test_snapshot_has_torch_cuda_format(history):
    keep = [torch.ones(n, device="openreg:0") for n in (10, 1000, 400_000)]
    keep.append(torch.ones(100, device="openreg:1"))
    side = torch.ones(100, device="openreg:0")
    del side
    # Nothing may be freed between the snapshot and the statistics it is compared with.
    gc.collect()
    gc.disable()
    try:
        snapshot = memory._snapshot()
        stats = [
            (torch.openreg.memory_reserved(i), torch.openreg.memory_allocated(i))
            for i in range(torch.openreg.device_count())
        ]
    finally:
        gc.enable()
    assert set(snapshot) == SNAPSHOT_KEYS
    assert len(snapshot["device_traces"]) == torch.openreg.device_count()
    for segment in snapshot["segments"]:
        assert set(segment) == SEGMENT_KEYS
        assert segment["segment_type"] in {"small", "large"}
        assert segment["segment_pool_id"] == (0, 0)
        assert segment["is_expandable"] is False
        # The blocks tile the segment from its start.
        address = segment["address"]
        for block in segment["blocks"]:
            assert set(block) == BLOCK_KEYS
            assert block["state"] in BLOCK_STATES
            assert block["address"] == address
            address += block["size"]
            for frame in block["frames"]:
                assert set(frame) == FRAME_KEYS
        assert address == segment["address"] + segment["total_size"]
        allocated = [b for b in segment["blocks"] if b["state"] == "active_allocated"]
        assert segment["allocated_size"] == sum(b["size"] for b in allocated)
        assert segment["requested_size"] == sum(b["requested_size"] for b in allocated)
    for index in range(torch.openreg.device_count()):
        segments = [s for s in snapshot["segments"] if s["device"] == index]
        assert (sum(s["total_size"] for s in segments), sum(s["allocated_size"] for s in segments)) == stats[index]
        for entry in _entries(snapshot, index):
            assert set(entry) == TRACE_KEYS
            assert entry["action"] in ACTIONS
    assert _entries(snapshot)[-1]["action"] == "snapshot"
    settings = snapshot["allocator_settings"]
    assert {
        "PYTORCH_ALLOC_CONF",
        "max_split_size",
        "garbage_collection_threshold",
        "expandable_segments",
        "roundup_power2_divisions",
    } <= set(settings)


@pytest.mark.slow
def test_trace_sums_to_memory_allocated(history):
    before = torch.openreg.memory_allocated(0)
    big = _allocate_in_named_function(30 << 20)  # a segment of its own
    kept = [_allocate_in_named_function(n * 512) for n in (1, 3, 700)]
    dropped = [_allocate_in_named_function(n * 512) for n in (2, 5000)]
    del dropped
    entries = _entries(memory._snapshot())
    allocated = sum(e["size"] for e in entries if e["action"] == "alloc")
    freed = sum(e["size"] for e in entries if e["action"] == "free_requested")
    # Every size here is a multiple of 512, so requested == allocated bytes.
    assert allocated - freed == torch.openreg.memory_allocated(0) - before
    assert [e["action"] for e in entries].count("alloc") == 6
    assert [e["action"] for e in entries].count("free_completed") == 2
    segment_allocs = [e for e in entries if e["action"] == "segment_alloc"]
    assert any(e["addr"] == big.data_ptr() and e["size"] == 30 << 20 for e in segment_allocs)
    del big, kept


@pytest.mark.slow
def test_frames_name_the_allocating_python_function(history):
    tensor = _allocate_in_named_function(4096)
    snapshot = memory._snapshot()
    block = next(b for s in snapshot["segments"] for b in s["blocks"] if b["address"] == tensor.data_ptr())
    assert block["state"] == "active_allocated"
    assert block["requested_size"] == 4096
    here = _frames_here(block["frames"])
    assert here[0]["name"] == "_allocate_in_named_function"
    assert here[1]["name"] == "test_frames_name_the_allocating_python_function"
    alloc = next(e for e in _entries(snapshot) if e["action"] == "alloc" and e["addr"] == tensor.data_ptr())
    assert alloc["frames"] == block["frames"]


@pytest.mark.slow
def test_freed_block_becomes_inactive_and_segment_free_is_recorded(history):
    tensor = _allocate_in_named_function(40 << 20)
    address = tensor.data_ptr()
    del tensor
    snapshot = memory._snapshot()
    block = next(b for s in snapshot["segments"] for b in s["blocks"] if b["address"] == address)
    assert block["state"] == "inactive" and block["frames"] == []
    # History APIs keep working across empty_cache, which returns the segment.
    torch.openreg.empty_cache()
    snapshot = memory._snapshot()
    assert all(s["address"] != address for s in snapshot["segments"])
    actions = [(e["action"], e["addr"]) for e in _entries(snapshot)]
    assert ("segment_free", address) in actions
    assert actions.index(("free_completed", address)) < actions.index(("segment_free", address))
    again = _allocate_in_named_function(512)
    assert any(e["addr"] == again.data_ptr() for e in _entries(memory._snapshot()) if e["action"] == "alloc")


@pytest.mark.slow
def test_pending_free_while_another_stream_uses_the_block(history):
    runtime = ctypes.CDLL(torch_openreg._C.__file__)
    host_fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    runtime.orLaunchHostFunc.argtypes = [ctypes.c_void_p, host_fn, ctypes.c_void_p]
    release = threading.Event()
    hold = host_fn(lambda _: release.wait(60))
    side = torch.openreg.Stream(0)
    tensor = _allocate_in_named_function(1024)
    address = tensor.data_ptr()
    try:
        # The side stream is busy until `release`: a block it used cannot be reused before.
        assert runtime.orLaunchHostFunc(side.openreg_stream, hold, None) == 0
        tensor.record_stream(side)
        del tensor
        snapshot = memory._snapshot()
        block = next(b for s in snapshot["segments"] for b in s["blocks"] if b["address"] == address)
        assert block["state"] == "active_pending_free"
        assert _frames_here(block["frames"])[0]["name"] == "_allocate_in_named_function"
        segment = next(s for s in snapshot["segments"] if s["address"] <= address < s["address"] + s["total_size"])
        assert segment["active_size"] - segment["allocated_size"] >= block["size"]
        assert ("free_requested", address) in [(e["action"], e["addr"]) for e in _entries(snapshot)]
        assert ("free_completed", address) not in [(e["action"], e["addr"]) for e in _entries(snapshot)]
    finally:
        release.set()
        side.synchronize()
    torch.empty(1, device="openreg:0")  # the allocator completes finished frees when it next allocates
    entries = _entries(memory._snapshot())
    assert ("free_completed", address) in [(e["action"], e["addr"]) for e in entries]


@pytest.mark.slow
def test_out_of_memory_is_recorded(history):
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(1 << 50, dtype=torch.uint8, device="openreg:0")
    oom = [e for e in _entries(memory._snapshot()) if e["action"] == "oom"]
    assert len(oom) == 1
    assert oom[0]["size"] == 1 << 50
    assert "device_free" in oom[0] and "addr" not in oom[0]
    assert 0 <= oom[0]["device_free"] <= torch.openreg.mem_get_info(0)[1]


def test_state_mode_keeps_stacks_without_history():
    memory._record_memory_history("state", stacks="python")
    try:
        tensor = _allocate_in_named_function(2048)
        for _ in range(3):
            torch.empty(512, dtype=torch.uint8, device="openreg:0")
        snapshot = memory._snapshot()
        assert len(_entries(snapshot)) == 1  # the newest action only, as on CUDA
        block = next(b for s in snapshot["segments"] for b in s["blocks"] if b["address"] == tensor.data_ptr())
        assert _frames_here(block["frames"])[0]["name"] == "_allocate_in_named_function"
    finally:
        memory._record_memory_history(None)


@pytest.mark.slow
def test_max_entries_keeps_the_newest_and_skip_actions_drops(history):
    memory._record_memory_history(
        "all", stacks="python", max_entries=4, clear_history=True, skip_actions=["free_requested", "free_completed"]
    )
    tensors = [_allocate_in_named_function(512) for _ in range(6)]
    entries = _entries(memory._snapshot())
    assert len(entries) == 4
    assert [e["action"] for e in entries][-1] == "snapshot"
    assert [e["addr"] for e in entries if e["action"] == "alloc"] == [t.data_ptr() for t in tensors[-3:]]
    del tensors
    assert not {"free_requested", "free_completed"} & {e["action"] for e in _entries(memory._snapshot())}


def test_context_levels():
    try:
        memory._record_memory_history("all", context="state", stacks="python", clear_history=True)
        tensor = _allocate_in_named_function(512)
        del tensor
        entries = _entries(memory._snapshot())
        assert all(e["frames"] == [] for e in entries)  # the trace keeps no stacks
        memory._record_memory_history("all", context="alloc", stacks="python", clear_history=True)
        tensor = _allocate_in_named_function(512)
        address = tensor.data_ptr()
        del tensor
        entries = {e["action"]: e for e in _entries(memory._snapshot()) if e.get("addr") == address}
        assert _frames_here(entries["alloc"]["frames"])[0]["name"] == "_allocate_in_named_function"
        # The free carries the allocation's stack; with context="all" its own.
        assert _frames_here(entries["free_requested"]["frames"])[0]["name"] == "_allocate_in_named_function"
        memory._record_memory_history("all", context="all", stacks="python", clear_history=True)
        tensor = _allocate_in_named_function(512)
        address = tensor.data_ptr()
        del tensor
        free = next(e for e in _entries(memory._snapshot()) if e["action"] == "free_requested")
        assert free["addr"] == address
        assert _frames_here(free["frames"])[0]["name"] == "test_context_levels"
        memory._record_memory_history("all", context=None, stacks="python", clear_history=True)
        tensor = _allocate_in_named_function(512)
        snapshot = memory._snapshot()
        assert all(e["frames"] == [] for e in _entries(snapshot))
    finally:
        memory._record_memory_history(None)


def test_recording_off_records_nothing():
    memory._record_memory_history(None)
    tensor = _allocate_in_named_function(512)
    snapshot = memory._snapshot()
    assert all(trace == [] for trace in snapshot["device_traces"])
    block = next(b for s in snapshot["segments"] for b in s["blocks"] if b["address"] == tensor.data_ptr())
    assert block["state"] == "active_allocated" and block["frames"] == []


def test_legacy_boolean_form():
    try:
        memory._record_memory_history(True, trace_alloc_max_entries=10, trace_alloc_record_context=True)
        tensor = _allocate_in_named_function(512)
        alloc = next(e for e in _entries(memory._snapshot()) if e["action"] == "alloc")
        assert alloc["addr"] == tensor.data_ptr()
        assert _frames_here(alloc["frames"])[0]["name"] == "_allocate_in_named_function"
    finally:
        memory._record_memory_history(False)
    assert all(trace == [] for trace in memory._snapshot()["device_traces"])


@pytest.mark.slow
def test_memory_snapshot_and_accelerator_snapshot(history):
    tensor = _allocate_in_named_function(512)
    segments = torch.openreg.memory_snapshot()
    assert any(b["address"] == tensor.data_ptr() for s in segments for b in s["blocks"])
    assert all(set(s) == SEGMENT_KEYS for s in segments)
    assert torch.openreg.memory_snapshot is memory.memory_snapshot
    # torch 2.13 routes every accelerator but XPU to torch.cuda here.
    routed = torch.accelerator.memory._snapshot()
    assert set(routed) == SNAPSHOT_KEYS
    assert any(b["address"] == tensor.data_ptr() for s in routed["segments"] for b in s["blocks"])


def _embedded_snapshot(html):
    """The snapshot a _memory_viz page carries (base64 of its pickle)."""
    line = next(line for line in html.splitlines() if line.startswith("const local_files = "))
    files = json.loads(line[len("const local_files = ") :])
    return pickle.loads(base64.b64decode(files[0]["base64"]))


@pytest.mark.slow
def test_memory_viz_renders_every_view(history, tmp_path):
    keep = [_allocate_in_named_function(n) for n in (512, 100_000, 3 << 20)]
    dropped = _allocate_in_named_function(4096)
    del dropped
    snapshot = memory._snapshot()
    flame_lines = lambda lines: lines  # noqa: E731  (the flamegraph script is not needed to check the input)
    segments = _memory_viz.segments(snapshot, format_flamegraph=flame_lines)
    assert "active_allocated;" in segments and "_allocate_in_named_function" in segments
    assert "_allocate_in_named_function" in _memory_viz.memory(snapshot, format_flamegraph=flame_lines)
    assert "segments:" in _memory_viz.segsum(snapshot)
    assert "Device 0" in _memory_viz.trace(snapshot)
    for plot in (
        _memory_viz.trace_plot(snapshot),
        _memory_viz.trace_plot(snapshot, plot_segments=True),
        _memory_viz.segment_plot(snapshot),
    ):
        assert "<!DOCTYPE html>" in plot
        assert _embedded_snapshot(plot) == snapshot
    path = tmp_path / "snapshot.pickle"
    memory._dump_snapshot(str(path))
    with open(path, "rb") as f:
        assert set(pickle.load(f)) == SNAPSHOT_KEYS
    stats = subprocess.run(
        [sys.executable, "-m", "torch.cuda._memory_viz", "stats", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert stats.returncode == 0, stats.stderr
    assert "total_reserved" in stats.stdout
    del keep


def test_bad_input():
    with pytest.raises(ValueError, match="expected state to be 'state', 'all', or None"):
        memory._record_memory_history("everything")
    with pytest.raises(ValueError, match="expected context to be"):
        memory._record_memory_history("all", context="some")
    with pytest.raises(ValueError, match="expected stacks to be 'python', or 'all'"):
        memory._record_memory_history("all", stacks="cpp")
    with pytest.raises(ValueError, match="max_entries must be positive"):
        memory._record_memory_history("all", max_entries=0)
    with pytest.raises(RuntimeError, match="Unknown TraceEntry action: frees"):
        memory._record_memory_history("all", skip_actions=["frees"])
    with pytest.raises(RuntimeError, match="Invalid openreg device index 5"):
        memory._record_memory_history("all", device=5)
    with pytest.raises(RuntimeError, match="Invalid openreg device index 7"):
        memory._snapshot("openreg:7")
    with pytest.raises(ValueError, match="Expected an openreg device"):
        memory._snapshot("cpu")
    with pytest.raises(NotImplementedError, match="compile contexts"):
        memory._record_memory_history("all", compile_context=True)
    assert torch.openreg.memory_snapshot(mempool_id=(3, 4)) == []  # no such pool, as on CUDA
    # None of these started recording.
    assert all(trace == [] for trace in memory._snapshot()["device_traces"])


@pytest.mark.long  # symbolizing C++ frames runs addr2line (seconds)
def test_all_stacks_include_cpp_frames():
    memory._record_memory_history("all", stacks="all", clear_history=True)
    try:
        tensor = _allocate_in_named_function(512)
        snapshot = memory._snapshot()
    finally:
        memory._record_memory_history(None)
    block = next(b for s in snapshot["segments"] for b in s["blocks"] if b["address"] == tensor.data_ptr())
    names = [frame["name"] for frame in block["frames"]]
    # An allocator frame by name: torch 2.15's default symbolizer reads DWARF only, so in a build without debug
    # information it names the exported functions (gather_context) and not the internal ones (DeviceCache::malloc,
    # which 2.13 and 2.14's addr2line name from the symbol table).
    assert any(name.startswith("c10::openreg::") for name in names), names
    assert "_allocate_in_named_function" in names
