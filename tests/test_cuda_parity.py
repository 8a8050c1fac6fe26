"""torch.openreg against torch.cuda's public API: docs/cuda-parity.md maps
every public name of torch.cuda (and torch.cuda.memory, torch.cuda.amp) to
openreg, and the functions that exist behave as torch.cuda documents."""

import ctypes
import os
import pathlib
import re
import threading
import uuid
import warnings

import pytest
import torch
import torch.cuda.amp

import torch_openreg
from conftest import DEVICE, assert_same, check_ok, make_cpu, parse_key_values, run_python

PARITY_DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "cuda-parity.md"
STATUSES = {"implemented", "not applicable", "not provided"}


# Provided by the autocast change (torch.openreg.amp, is_bf16_supported); until
# it is merged these may be absent. Once torch.openreg.amp exists every one of
# them is checked like any other implemented name.
def _parity_tables() -> dict[str, dict[str, tuple[str, str]]]:
    """{section heading: {name: (status, notes)}} from docs/cuda-parity.md."""
    tables, section = {}, None
    for line in PARITY_DOC.read_text().splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
            continue
        match = re.match(r"^\| `([A-Za-z_0-9]+)` \| ([a-z ]+) \|(.*)\|$", line)
        if match and section is not None:
            name, status, notes = match.groups()
            assert name not in tables.setdefault(section, {}), f"{name} listed twice in {section}"
            tables[section][name] = (status, notes.strip())
    return tables


TABLES = _parity_tables()
CUDA_TABLE = TABLES["torch.cuda and torch.cuda.memory"]
AMP_TABLE = TABLES["torch.cuda.amp"]


def _check_table(table, cuda_names, openreg_module):
    missing = sorted(set(cuda_names) - set(table))
    assert not missing, f"public torch names missing from docs/cuda-parity.md: {missing}"
    for name in cuda_names:
        status, notes = table[name]
        assert status in STATUSES, (name, status)
        if status == "implemented":
            # A device-named class has an openreg-named counterpart: "as `OpenRegGraph`, ...".
            counterpart = re.match(r"as `([A-Za-z_0-9]+)`", notes)
            name = counterpart.group(1) if counterpart else name
            assert hasattr(openreg_module, name), f"{name} is marked implemented but missing from openreg"
        else:
            assert notes, f"{name} is {status} without a reason"


def _added_after_this_release(notes):
    """True for a row whose notes start "torch 2.14 and later:" when the running torch is older."""
    since = re.match(r"torch (\d+)\.(\d+) and later:", notes)
    running = tuple(int(part) for part in torch.__version__.split(".")[:2])
    return since is not None and running < (int(since.group(1)), int(since.group(2)))


def test_parity_table_covers_torch_cuda():
    cuda_names = set(torch.cuda.__all__) | set(torch.cuda.memory.__all__)
    _check_table(CUDA_TABLE, cuda_names, torch.openreg)
    later = {name for name, (_, notes) in CUDA_TABLE.items() if _added_after_this_release(notes)}
    assert not later & cuda_names, (
        f"rows marked as added by a later torch, though this one has them: {later & cuda_names}"
    )
    stale = sorted(set(CUDA_TABLE) - cuda_names - later)
    assert not stale, f"docs/cuda-parity.md lists names torch.cuda no longer has: {stale}"


def test_parity_table_memory_names_live_in_openreg_memory():
    for name in torch.cuda.memory.__all__:
        status, notes = CUDA_TABLE[name]
        if status == "implemented":
            # CUDAPluggableAllocator lives there as OpenRegPluggableAllocator.
            counterpart = re.match(r"as `([A-Za-z_0-9]+)`", notes)
            name = counterpart.group(1) if counterpart else name
            assert name in torch.openreg.memory.__all__, name
            assert getattr(torch.openreg.memory, name) is getattr(torch.openreg, name), name


def test_parity_table_covers_torch_cuda_amp():
    _check_table(AMP_TABLE, torch.cuda.amp.__all__, torch.openreg.amp)
    assert set(AMP_TABLE) == set(torch.cuda.amp.__all__)


LEGACY_STORAGE_DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.complex64,
    torch.complex128,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.bool,
]


@pytest.mark.parametrize("dtype", LEGACY_STORAGE_DTYPES)
def test_legacy_typed_storage_classes_as_torch_cuda_has_them(dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # TypedStorage is deprecated, on every device
        cpu_class = torch.zeros(3, dtype=dtype).storage_type()
        openreg_class = torch.zeros(3, dtype=dtype, device=DEVICE).storage_type()
        assert openreg_class is getattr(torch.openreg, cpu_class.__name__)
        assert openreg_class.dtype == dtype
        storage = openreg_class(4)
        assert (storage.device, storage.size(), storage.dtype) == (torch.device(DEVICE, 0), 4, dtype)
        assert isinstance(storage, openreg_class) and not isinstance(storage, cpu_class)
        assert torch.is_storage(storage)
        assert torch.zeros(3, dtype=dtype, device=DEVICE).storage().type() == f"torch.openreg.{cpu_class.__name__}"
        with pytest.raises(RuntimeError, match="from_buffer: Not available for openreg storage"):
            openreg_class.from_buffer(b"\0" * 16)


def test_public_names_are_all():
    public = {name for name in dir(torch.openreg) if not name.startswith("_")}
    assert public == set(torch.openreg.__all__)
    for stray in ("atexit", "threading", "time", "torch", "os", "uuid"):
        assert stray not in public


# --------------------------------------------------------------------------
# Device properties
# --------------------------------------------------------------------------


def test_get_device_properties():
    for index in range(torch.openreg.device_count()):
        props = torch.openreg.get_device_properties(index)
        assert props.name == torch.openreg.get_device_name(index)
        assert isinstance(props.name, str) and props.name
        assert (props.major, props.minor) == torch.openreg.get_device_capability(index)
        assert all(isinstance(v, int) for v in (props.major, props.minor))
        assert props.total_memory == torch.openreg.mem_get_info(index)[1]
        assert props.multi_processor_count == len(os.sched_getaffinity(0))
        assert isinstance(props.uuid, uuid.UUID)
        assert props.uuid == torch.openreg.get_device_properties(f"openreg:{index}").uuid
        text = repr(props)
        for field in ("name=", "major=", "minor=", "total_memory=", "multi_processor_count=", "uuid="):
            assert field in text
        assert str(props.total_memory // (1 << 20)) + "MB" in text
    assert torch.openreg.get_device_properties(0).uuid != torch.openreg.get_device_properties(1).uuid


def test_device_properties_default_to_current_device(restore_device):
    torch.openreg.set_device(1)
    assert torch.openreg.get_device_properties().uuid == torch.openreg.get_device_properties(1).uuid
    assert torch.openreg.get_device_properties("openreg").uuid == torch.openreg.get_device_properties(1).uuid


def test_device_properties_are_read_only():
    props = torch.openreg.get_device_properties(0)
    with pytest.raises(AttributeError, match="read-only"):
        props.total_memory = 1


@pytest.mark.slow
def test_device_properties_uuid_is_stable_across_processes():
    out = check_ok(run_python("import torch; print('uuid=%s' % torch.openreg.get_device_properties(1).uuid)"))
    assert parse_key_values(out)["uuid"] == str(torch.openreg.get_device_properties(1).uuid)


@pytest.mark.parametrize("bad", [2, -1, 99, "openreg:5"])
def test_device_properties_bad_index(bad):
    # torch.cuda's error for an index outside [0, device_count)
    for fn in (torch.openreg.get_device_properties, torch.openreg.get_device_name, torch.openreg.get_device_capability):
        with pytest.raises(AssertionError, match="Invalid device id"):
            fn(bad)


def test_device_properties_wrong_device_type():
    with pytest.raises(ValueError, match="Expected an openreg device"):
        torch.openreg.get_device_properties("cpu")


# --------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------


def test_mem_get_info_counts_reserved_memory_as_used():
    torch.openreg.empty_cache()  # an earlier test's cached segment would serve the allocation below
    for index in range(torch.openreg.device_count()):
        free, total = torch.openreg.mem_get_info(index)
        assert 0 <= free <= total
        assert free + torch.openreg.memory_reserved(index) == total
    before_free = torch.openreg.mem_get_info(0)[0]
    before_reserved = torch.openreg.memory_reserved(0)
    x = torch.empty(30 << 20, dtype=torch.uint8, device="openreg:0")  # a new 30 MiB segment
    grown = torch.openreg.memory_reserved(0) - before_reserved
    assert grown >= 30 << 20
    assert torch.openreg.mem_get_info(0)[0] == before_free - grown
    del x
    assert torch.openreg.mem_get_info("openreg:0") == torch.openreg.mem_get_info(0)


def _cuda_summary_of(stats, device, abbreviated, monkeypatch):
    """torch.cuda.memory_summary's own table for `stats`, labelled for openreg."""
    monkeypatch.setattr(torch.cuda.memory, "memory_stats", lambda device=None: stats)
    table = torch.cuda.memory.memory_summary(device, abbreviated=abbreviated)
    for cuda, openreg in [
        (
            "PyTorch CUDA memory summary, device ID %-17d" % device,
            "PyTorch openreg memory summary, device ID %-14d" % device,
        ),
        (
            "   CUDA OOMs: %-12d |        cudaMalloc retries: %-8d" % (stats["num_ooms"], stats["num_alloc_retries"]),
            "openreg OOMs: %-12d |        orMalloc retries: %-10d" % (stats["num_ooms"], stats["num_alloc_retries"]),
        ),
        ("GPU reserved memory  ", "Device reserved mem  "),
        ("GPU reserved segments", "Device reserved segs "),
        ("Oversize GPU segments", "Oversize device segs "),
    ]:
        assert cuda in table, cuda
        table = table.replace(cuda, openreg)
    return table


@pytest.mark.parametrize("abbreviated", [False, True])
def test_memory_summary_has_torch_cuda_layout(abbreviated, monkeypatch):
    keep = [torch.empty(n, device="openreg:1") for n in (10, 300_000, 3_000_000)]
    del keep[1]
    stats = torch.openreg.memory_stats(1)
    summary = torch.openreg.memory_summary(1, abbreviated=abbreviated)
    assert summary == _cuda_summary_of(stats, 1, abbreviated, monkeypatch)
    lines = summary.splitlines()
    assert all(len(line) == 77 and line[0] == line[-1] == "|" for line in lines)
    assert len(lines) == (29 if abbreviated else 47)


def test_memory_summary_defaults_to_current_device(restore_device):
    torch.openreg.set_device(1)
    assert "device ID 1 " in torch.openreg.memory_summary()


def test_memory_stats_as_nested_dict():
    torch.ones(5, device=DEVICE)
    flat = torch.openreg.memory_stats(0)
    nested = torch.openreg.memory_stats_as_nested_dict(0)
    assert nested["allocated_bytes"]["all"]["current"] == flat["allocated_bytes.all.current"]
    assert nested["num_ooms"] == flat["num_ooms"]
    assert sum(len(pools) for pools in nested["reserved_bytes"].values()) == 12


def test_deprecated_memory_aliases_warn_like_cuda():
    with pytest.warns(FutureWarning):
        assert torch.openreg.memory_cached(0) == torch.openreg.memory_reserved(0)
    with pytest.warns(FutureWarning):
        assert torch.openreg.max_memory_cached(0) == torch.openreg.max_memory_reserved(0)
    x = torch.empty(1 << 20, device=DEVICE)
    del x
    with pytest.warns(FutureWarning):
        torch.openreg.reset_max_memory_allocated(0)
    assert torch.openreg.max_memory_allocated(0) == torch.openreg.memory_allocated(0)
    with pytest.warns(FutureWarning):
        torch.openreg.reset_max_memory_cached(0)
    assert torch.openreg.max_memory_reserved(0) == torch.openreg.memory_reserved(0)


def test_allocator_backend_and_tf32():
    assert torch.openreg.get_allocator_backend() == "native"
    assert torch.openreg.is_tf32_supported() is False


def test_host_memory_stats_follow_pinned_memory():
    torch.openreg.empty_host_cache()
    before = torch.openreg.host_memory_stats()
    keys = {"allocations", "allocated_bytes", "active_requests", "active_bytes"}
    for key in keys:
        for field in ("current", "peak", "allocated", "freed"):
            assert f"{key}.{field}" in before
    for key in ("host_alloc_time", "host_free_time"):
        for field in ("total", "max", "min", "count", "avg"):
            assert f"{key}.{field}" in before
    pinned = torch.ones(100_000, pin_memory=True)
    assert pinned.is_pinned()
    during = torch.openreg.host_memory_stats()
    assert during["active_requests.current"] == before["active_requests.current"] + 1
    assert during["allocations.current"] == before["allocations.current"] + 1
    assert during["allocated_bytes.current"] - before["allocated_bytes.current"] >= 400_000
    assert during["num_host_alloc"] == before["num_host_alloc"] + 1
    nested = torch.openreg.host_memory_stats_as_nested_dict()
    assert nested["allocations"]["current"] == during["allocations.current"]
    del pinned
    torch.openreg.empty_host_cache()
    after = torch.openreg.host_memory_stats()
    assert after["allocations.current"] == before["allocations.current"]
    assert after["num_host_free"] == during["num_host_free"] + 1
    torch.openreg.reset_peak_host_memory_stats()
    torch.openreg.reset_accumulated_host_memory_stats()
    reset = torch.openreg.host_memory_stats()
    assert reset["allocations.peak"] == reset["allocations.current"]
    assert reset["allocations.allocated"] == 0


def test_caching_allocator_alloc_and_delete(default_streams):
    for index in range(torch.openreg.device_count()):
        before = torch.openreg.memory_allocated(index)
        ptr = torch.openreg.caching_allocator_alloc(1000, index)
        assert ptr != 0
        assert torch.openreg.memory_allocated(index) == before + 1024
        torch.openreg.caching_allocator_delete(ptr)
        assert torch.openreg.memory_allocated(index) == before
    side = torch.openreg.Stream(1)
    ptr = torch.openreg.caching_allocator_alloc(4096, "openreg:1", side)
    torch.openreg.caching_allocator_delete(ptr)
    ptr = torch.openreg.caching_allocator_alloc(4096, 1, side.openreg_stream)  # a runtime handle
    torch.openreg.caching_allocator_delete(ptr)
    ptr = torch.openreg.caching_allocator_alloc(4096, 0, 0)  # handle 0: the default stream
    torch.openreg.caching_allocator_delete(ptr)
    assert torch.openreg.caching_allocator_alloc(0) == 0
    torch.openreg.caching_allocator_delete(0)


def test_caching_allocator_bad_input():
    ptr = torch.openreg.caching_allocator_alloc(512)
    torch.openreg.caching_allocator_delete(ptr)
    with pytest.raises(ValueError, match="was not allocated by the openreg allocator"):
        torch.openreg.caching_allocator_delete(ptr)
    with pytest.raises(ValueError, match="non-negative"):
        torch.openreg.caching_allocator_alloc(-1)
    with pytest.raises(TypeError, match="Invalid type for stream argument"):
        torch.openreg.caching_allocator_alloc(512, 0, "stream")
    with pytest.raises(ValueError, match="the stream is on openreg:1, not openreg:0"):
        torch.openreg.caching_allocator_alloc(512, 0, torch.openreg.Stream(1))
    with pytest.raises(torch.OutOfMemoryError, match="Tried to allocate"):
        torch.openreg.caching_allocator_alloc(1 << 50)


# --------------------------------------------------------------------------
# Streams and generators
# --------------------------------------------------------------------------


@pytest.fixture
def runtime():
    """The openreg runtime's C API, which torch_openreg._C exports."""
    lib = ctypes.CDLL(torch_openreg._C.__file__)
    lib.orStreamCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    lib.orStreamDestroy.argtypes = [ctypes.c_void_p]
    lib.orStreamSynchronize.argtypes = [ctypes.c_void_p]
    return lib


def _create_runtime_stream(runtime, device):
    handle = ctypes.c_void_p()
    with torch.openreg.device(device):
        assert runtime.orStreamCreate(ctypes.byref(handle)) == 0
    return handle.value


def test_external_stream_runs_work(runtime, default_streams):
    handle = _create_runtime_stream(runtime, 1)
    try:
        external = torch.openreg.ExternalStream(handle)
        assert isinstance(external, torch.openreg.Stream)
        assert external.device == torch.device("openreg:1")
        assert external.openreg_stream == handle
        assert torch.openreg.get_stream_from_external(handle, 1) == external
        cpu = make_cpu((64, 64))
        with torch.openreg.stream(external):
            assert torch.openreg.current_stream(1) == external
            x = cpu.to("openreg:1", non_blocking=True)
            y = (x @ x).relu()
            event = external.record_event()
        event.synchronize()
        assert_same(y, (cpu @ cpu).relu())
        assert runtime.orStreamSynchronize(ctypes.c_void_p(handle)) == 0
    finally:
        torch.openreg.synchronize(1)
        assert runtime.orStreamDestroy(ctypes.c_void_p(handle)) == 0


def test_external_stream_bad_input(runtime):
    handle = _create_runtime_stream(runtime, 0)
    try:
        with pytest.raises(ValueError, match="belongs to openreg:0, not openreg:1"):
            torch.openreg.ExternalStream(handle, device=1)
    finally:
        assert runtime.orStreamDestroy(ctypes.c_void_p(handle)) == 0
    with pytest.raises(ValueError, match="default stream"):
        torch.openreg.ExternalStream(0)
    with pytest.raises(RuntimeError, match="orStreamGetDevice"):
        torch.openreg.ExternalStream(handle)  # destroyed


def test_stream_handle_of_default_stream_is_zero():
    assert torch.openreg.default_stream(0).openreg_stream == 0
    assert torch.openreg.Stream(0).openreg_stream != 0


def test_default_generators():
    torch.ones(1, device=DEVICE)  # initialized
    generators = torch.openreg.default_generators
    assert isinstance(generators, tuple) and len(generators) == torch.openreg.device_count()
    assert all(isinstance(g, torch.Generator) for g in generators)
    assert generators[1].device == torch.device("openreg:1")
    torch.openreg.manual_seed_all(1234)
    assert [g.initial_seed() for g in generators] == [1234, 1234]
    generators[0].manual_seed(7)
    drawn = torch.rand(8, device="openreg:0")
    torch.openreg.manual_seed(7)
    assert_same(torch.rand(8, device="openreg:0"), drawn.cpu())


@pytest.mark.slow
def test_default_generators_empty_until_initialized():
    out = check_ok(
        run_python("""
        import torch
        print("before=%d" % len(torch.openreg.default_generators))
        torch.openreg.init()
        print("after=%d" % len(torch.openreg.default_generators))
        print("same=%s" % (torch.openreg.default_generators[0] is torch.openreg.default_generators[0]))
    """)
    )
    assert parse_key_values(out) == {"before": "0", "after": "2", "same": "True"}


# --------------------------------------------------------------------------
# Memory pools and the caching switch
# --------------------------------------------------------------------------


def _pool_segments(pool):
    return [s for s in torch.openreg.memory_snapshot() if s["segment_pool_id"] == pool.id]


def test_mem_pool_routes_allocations_and_releases_memory(default_streams):
    torch.openreg.empty_cache()
    reserved = torch.openreg.memory_reserved(0)
    pool = torch.openreg.MemPool()
    assert pool.id[0] == 0 and pool.id[1] > 0 and pool.use_count() == 1
    outside_before = torch.ones(10, device="openreg:0")
    with torch.openreg.use_mem_pool(pool):
        assert pool.use_count() == 2
        small = torch.ones(1000, device="openreg:0")
        large = torch.ones(3 << 20, device="openreg:0")
        cpu = make_cpu(1000)
        copied = cpu.to("openreg:0")
    assert pool.use_count() == 1
    outside_after = torch.ones(1000, device="openreg:0")
    assert_same(copied, cpu)
    segments = _pool_segments(pool)
    addresses = {b["address"] for s in segments for b in s["blocks"] if b["state"] == "active_allocated"}
    assert {small.data_ptr(), large.data_ptr(), copied.data_ptr()} <= addresses
    assert outside_before.data_ptr() not in addresses and outside_after.data_ptr() not in addresses
    assert pool.snapshot() == segments
    assert torch.openreg.memory_snapshot(pool.id) == segments
    # A freed pool block serves only the pool: the same request outside gets another block.
    address = small.data_ptr()
    del small
    again = torch.ones(1000, device="openreg:0")
    assert again.data_ptr() != address
    pool_bytes = sum(s["total_size"] for s in segments)
    assert torch.openreg.memory_reserved(0) >= reserved + pool_bytes
    del pool  # the pool's memory goes once its tensors are freed too
    assert torch.openreg.memory_reserved(0) >= reserved + pool_bytes - (2 << 20)
    del large, copied
    assert not [s for s in torch.openreg.memory_snapshot() if s["segment_pool_id"] != (0, 0)]
    del outside_before, outside_after, again
    torch.openreg.empty_cache()
    assert torch.openreg.memory_reserved(0) == reserved


def test_mem_pool_is_per_thread_and_nests():
    first, second = torch.openreg.MemPool(), torch.openreg.MemPool()
    seen = {}

    def other_thread():
        seen["tensor"] = torch.ones(10, device="openreg:0")

    with torch.openreg.use_mem_pool(first):
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        with torch.openreg.use_mem_pool(second):
            inner = torch.ones(10, device="openreg:0")
        outer = torch.ones(10, device="openreg:0")
    pools = {b["address"]: s["segment_pool_id"] for s in torch.openreg.memory_snapshot() for b in s["blocks"]}
    assert pools[inner.data_ptr()] == second.id
    assert pools[outer.data_ptr()] == first.id
    assert pools[seen["tensor"].data_ptr()] == (0, 0)


def test_mem_pool_no_split_gives_each_allocation_a_segment():
    pool = torch.openreg.MemPool(no_split=True)
    with torch.openreg.use_mem_pool(pool):
        tensors = [torch.ones(10, device="openreg:0") for _ in range(3)]
    assert len(_pool_segments(pool)) == 3
    del tensors


def test_mem_pool_bad_input():
    with pytest.raises(NotImplementedError, match="pluggable allocators"):
        torch.openreg.MemPool(allocator=object())
    with pytest.raises(NotImplementedError, match="use_on_oom"):
        torch.openreg.MemPool(use_on_oom=True)
    with pytest.raises(TypeError, match="MemPool"):
        with torch.openreg.use_mem_pool((0, 1)):
            pass
    with pytest.raises(RuntimeError, match="Invalid openreg device index 4"):
        with torch.openreg.use_mem_pool(torch.openreg.MemPool(), device=4):
            pass


def test_caching_allocator_enable():
    keep = torch.ones(10, device="openreg:0")
    with torch.openreg.caching_allocator_disabled():
        assert torch.openreg.memory_reserved(0) == torch.openreg.memory.memory_reserved(0)
        reserved = torch.openreg.memory_reserved(0)
        big = torch.ones(3 << 20, device="openreg:0")
        assert torch.openreg.memory_reserved(0) > reserved
        del big
        assert torch.openreg.memory_reserved(0) == reserved  # returned at once
    big = torch.ones(3 << 20, device="openreg:0")
    cached = torch.openreg.memory_reserved(0)
    del big
    assert torch.openreg.memory_reserved(0) == cached  # cached again
    torch.openreg.caching_allocator_enable(True)
    del keep


# --------------------------------------------------------------------------
# Sync debug mode
# --------------------------------------------------------------------------


@pytest.fixture
def sync_debug_mode():
    yield torch.openreg.set_sync_debug_mode
    torch.openreg.set_sync_debug_mode(0)


def test_sync_debug_mode_warns_on_synchronizing_calls(sync_debug_mode):
    x = make_cpu(8).to(DEVICE)
    assert torch.openreg.get_sync_debug_mode() == 0
    sync_debug_mode("warn")
    assert torch.openreg.get_sync_debug_mode() == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = (x * 2 + 1).relu()  # device work: no warning
        torch.ones(4).to(DEVICE)  # host to device: no warning
        pinned = torch.empty(8, pin_memory=True)
        pinned.copy_(x, non_blocking=True)  # asynchronous: no warning
    for call, what in [
        (lambda: x.sum().item(), "_local_scalar_dense"),
        (lambda: y.cpu(), "copy from openreg to the CPU"),
        (lambda: torch.nonzero(x), "aten::nonzero"),
        (lambda: x.masked_select(x > 0), "aten::masked_select"),
        (lambda: torch.openreg.synchronize(), "device synchronize"),
        (lambda: torch.openreg.current_stream().synchronize(), "stream synchronize"),
    ]:
        with pytest.warns(UserWarning, match=f"called a synchronizing openreg operation: .*{what}"):
            call()
    sync_debug_mode(0)
    assert_same(y, (x.cpu() * 2 + 1).relu())


def test_sync_debug_mode_error_and_bad_input(sync_debug_mode):
    x = torch.ones(3, device=DEVICE)
    sync_debug_mode("error")
    assert torch.openreg.get_sync_debug_mode() == 2
    with pytest.raises(RuntimeError, match="called a synchronizing openreg operation"):
        x.cpu()
    with pytest.raises(RuntimeError, match="called a synchronizing openreg operation"):
        x[0].item()
    sync_debug_mode("default")
    assert x.cpu().tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(RuntimeError, match="expected one of `default`, `warn`, `error`"):
        sync_debug_mode("loud")
    with pytest.raises(RuntimeError, match="expected one of 0,1,2"):
        sync_debug_mode(3)


# --------------------------------------------------------------------------
# Graphs
# --------------------------------------------------------------------------


def test_openreg_graph_and_graph_context():
    x_cpu = make_cpu(16, seed=70)
    x = x_cpu.to(DEVICE)
    g = torch.openreg.OpenRegGraph()
    assert isinstance(g, torch.accelerator.Graph)
    assert not torch.openreg.is_current_stream_capturing()
    with torch.openreg.graph(g):
        assert torch.openreg.is_current_stream_capturing()
        assert torch.openreg.current_stream() != torch.openreg.default_stream()
        y = torch.sin(x) * 2
    assert not torch.openreg.is_current_stream_capturing()
    for seed in (71, 72):
        new = make_cpu(16, seed=seed)
        x.copy_(new.to(DEVICE))
        g.replay()
        torch.openreg.synchronize()
        assert_same(y, torch.sin(new) * 2)
    handle = torch.openreg.graph_pool_handle()
    assert handle[0] == 0 and handle != torch.openreg.graph_pool_handle()
    shared = torch.openreg.OpenRegGraph()
    side = torch.openreg.Stream()
    with torch.openreg.graph(shared, pool=handle, stream=side):
        assert torch.openreg.current_stream() == side
        z = x + 1
    assert shared.pool() == handle
    shared.replay()
    assert_same(z, x.cpu() + 1)
    with pytest.raises(RuntimeError, match="stream"):
        torch.openreg.OpenRegGraph().capture_begin()  # the default stream cannot capture


@pytest.mark.filterwarnings("ignore:The AccumulateGrad node's stream")
def test_make_graphed_callables_matches_cpu():
    torch.manual_seed(0)
    cpu_model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    model.load_state_dict(cpu_model.state_dict())
    model.to(DEVICE)
    scale = lambda a, b: a * b.sigmoid()  # noqa: E731
    sample = torch.zeros(4, 6, device=DEVICE, requires_grad=True)
    graphed_model, graphed_scale = torch.openreg.make_graphed_callables(
        (model, scale),
        ((sample,), (torch.zeros(4, 3, device=DEVICE, requires_grad=True), torch.zeros(4, 3, device=DEVICE))),
    )
    assert graphed_model is model
    for seed in (80, 81):
        data, weight = make_cpu((4, 6), seed=seed), make_cpu((4, 3), seed=seed + 10)
        x_cpu, x = data.clone().requires_grad_(), data.to(DEVICE).requires_grad_()
        out_cpu = scale(cpu_model(x_cpu), weight)
        out = graphed_scale(graphed_model(x), weight.to(DEVICE))
        out_cpu.square().sum().backward()
        out.square().sum().backward()
        assert_same(out, out_cpu.detach())
        assert_same(x.grad, x_cpu.grad)
        for p_cpu, p in zip(cpu_model.parameters(), model.parameters()):
            assert_same(p.grad, p_cpu.grad)
        cpu_model.zero_grad()
        model.zero_grad()
    model.eval()  # graphed in training mode: eval runs eagerly
    with torch.no_grad():
        assert_same(model(torch.ones(2, 6, device=DEVICE)), cpu_model.eval()(torch.ones(2, 6)))
    with pytest.raises(TypeError, match="only tensors"):
        torch.openreg.make_graphed_callables(scale, (sample, 2.0))
