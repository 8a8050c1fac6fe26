"""The caching device allocator (csrc/runtime/OpenRegDeviceAllocator.cpp and OpenRegDeviceCache.h):
exact statistics under CUDA's names, size classes, block reuse, splitting and
merging, empty_cache, peaks and resets, per-device accounting, out of memory,
and a multi-threaded stress run that must leave nothing allocated.

Scenarios whose exact numbers depend on what the cache already holds run in a
fresh interpreter (``run_python``), where the baseline is known to be empty."""

import json

import pytest
import torch

from conftest import DEVICE, assert_same, check_ok, make_cpu, run_python

KiB = 1 << 10
MiB = 1 << 20

# Runs in a fresh interpreter: every scenario starts from an empty cache on
# both devices and records the statistics it needs; the tests below check them.
_SCENARIOS = r"""
import gc, json
import torch

MiB = 1 << 20
stats = torch.openreg.memory_stats
results = {}

def clean():
    gc.collect()
    torch.openreg.synchronize(0)
    torch.openreg.synchronize(1)
    torch.openreg.empty_cache()
    for d in (0, 1):
        s = stats(d)
        assert s["allocated_bytes.all.current"] == 0, (d, s["allocated_bytes.all.current"])
        assert s["reserved_bytes.all.current"] == 0, (d, s["reserved_bytes.all.current"])

def empty(nbytes, device="openreg:0"):
    return torch.empty(nbytes, dtype=torch.uint8, device=device)

def record(name, before, after, **extra):
    results[name] = {"before": dict(before), "after": dict(after), **extra}

torch.ones(1, device="openreg:0"); torch.ones(1, device="openreg:1")

# one small tensor: one 2 MiB segment in the small pool
clean()
before, free_before = stats(0), torch.openreg.mem_get_info(0)[0]
x = empty(4000)
record("small", before, stats(0), free_before=free_before, free_after=torch.openreg.mem_get_info(0)[0])
del x

# 5 MiB: carved from a 20 MiB segment in the large pool
clean()
before, free_before = stats(0), torch.openreg.mem_get_info(0)[0]
x = empty(5 * MiB)
record("medium", before, stats(0), free_before=free_before, free_after=torch.openreg.mem_get_info(0)[0])
del x

# 30 MiB: a segment of exactly its size
clean()
before = stats(0)
x = empty(30 * MiB)
record("large", before, stats(0))
del x

# 21 MiB + 100 bytes: its own segment, rounded up to 2 MiB
clean()
before = stats(0)
x = empty(21 * MiB + 100)
record("large_rounded", before, stats(0))
del x

# reuse: free then allocate the same size, small and large
for name, n in (("reuse_small", 4000), ("reuse_large", 30 * MiB)):
    clean()
    x = empty(n)
    ptr = x.data_ptr()
    del x
    before = stats(0)
    y = empty(n)
    record(name, before, stats(0), same_ptr=y.data_ptr() == ptr)
    del y

# splitting and merging within one small segment
clean()
base = stats(0)
a = empty(4000)
b = empty(4000)
both = stats(0)
adjacent = b.data_ptr() == a.data_ptr() + 4096
del a
one_freed = stats(0)
del b
all_freed = stats(0)
torch.openreg.empty_cache()
emptied = stats(0)
results["split_merge"] = {"base": dict(base), "both": dict(both), "one_freed": dict(one_freed),
                          "all_freed": dict(all_freed), "emptied": dict(emptied), "adjacent": adjacent}

# a freed block that a larger request may split (large pool, remainder > 1 MiB)
clean()
x = empty(16 * MiB)
ptr = x.data_ptr()
del x
before = stats(0)
y = empty(4 * MiB)  # medium request, served from the cached 16 MiB segment
record("split_cached_large", before, stats(0), same_ptr=y.data_ptr() == ptr)
del y

# peaks and resets
clean()
torch.openreg.reset_peak_memory_stats(0)
torch.openreg.reset_accumulated_memory_stats(0)
b = empty(12 * MiB)  # a segment of its own
a = empty(3 * MiB)  # carved from a new 20 MiB segment
peak_with_both = torch.openreg.max_memory_allocated(0)
allocated_with_both = torch.openreg.memory_allocated(0)
reserved_peak_with_both = torch.openreg.max_memory_reserved(0)
del b
after_del = {"max_allocated": torch.openreg.max_memory_allocated(0),
             "allocated": torch.openreg.memory_allocated(0),
             "max_reserved": torch.openreg.max_memory_reserved(0),
             "reserved": torch.openreg.memory_reserved(0)}
accumulated = stats(0)
torch.openreg.reset_peak_memory_stats(0)
after_reset_peak = {"max_allocated": torch.openreg.max_memory_allocated(0),
                    "allocated": torch.openreg.memory_allocated(0),
                    "max_reserved": torch.openreg.max_memory_reserved(0),
                    "reserved": torch.openreg.memory_reserved(0)}
torch.openreg.reset_accumulated_memory_stats(0)
after_reset_accumulated = stats(0)
results["peaks"] = {"peak_with_both": peak_with_both, "allocated_with_both": allocated_with_both,
                    "reserved_peak_with_both": reserved_peak_with_both, "after_del": after_del,
                    "accumulated": dict(accumulated), "after_reset_peak": after_reset_peak,
                    "after_reset_accumulated": dict(after_reset_accumulated)}
del a

# per device: allocating on openreg:1 leaves openreg:0 alone
clean()
before0, before1 = stats(0), stats(1)
x = empty(4000, "openreg:1")
results["per_device"] = {"before0": dict(before0), "after0": dict(stats(0)),
                         "before1": dict(before1), "after1": dict(stats(1))}
del x

# empty_cache returns everything once all is freed
clean()
keep = [empty(n) for n in (25 * MiB, 11 * MiB, 3 * MiB, 700 * 1024, 4000, 100)]
reserved_live = stats(0)["reserved_bytes.all.current"]
torch.openreg.empty_cache()  # live blocks stay
reserved_after_partial = stats(0)["reserved_bytes.all.current"]
del keep
gc.collect()
torch.openreg.empty_cache()
results["empty_cache"] = {"reserved_live": reserved_live, "reserved_after_partial": reserved_after_partial,
                          "final": dict(stats(0)), "free_total": list(torch.openreg.mem_get_info(0))}

print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def fresh():
    out = check_ok(run_python(_SCENARIOS))
    return json.loads(out.strip().splitlines()[-1])


def _delta(scenario, key):
    return scenario["after"][key] - scenario["before"][key]


def _pool_keys(pool):
    prefixes = (
        "allocation",
        "segment",
        "active",
        "allocated_bytes",
        "reserved_bytes",
        "active_bytes",
        "requested_bytes",
        "inactive_split",
        "inactive_split_bytes",
    )
    return [f"{p}.{pool}.{field}" for p in prefixes for field in ("current", "peak", "allocated", "freed")]


# --------------------------------------------------------------------------
# exact statistics, fresh interpreter
# --------------------------------------------------------------------------


@pytest.mark.slow
def test_small_allocation_statistics(fresh):
    s = fresh["small"]
    for pool in ("all", "small_pool"):
        assert _delta(s, f"allocated_bytes.{pool}.current") == 4096
        assert _delta(s, f"active_bytes.{pool}.current") == 4096
        assert _delta(s, f"requested_bytes.{pool}.current") == 4000
        assert _delta(s, f"reserved_bytes.{pool}.current") == 2 * MiB
        assert _delta(s, f"segment.{pool}.current") == 1
        assert _delta(s, f"allocation.{pool}.current") == 1
        assert _delta(s, f"active.{pool}.current") == 1
        assert _delta(s, f"allocation.{pool}.allocated") == 1
        # the rest of the segment is a cached, split-off block
        assert _delta(s, f"inactive_split.{pool}.current") == 1
        assert _delta(s, f"inactive_split_bytes.{pool}.current") == 2 * MiB - 4096
    for key in _pool_keys("large_pool"):
        assert _delta(s, key) == 0, key
    assert _delta(s, "num_device_alloc") == 1
    assert _delta(s, "num_alloc_retries") == 0
    assert _delta(s, "num_ooms") == 0
    assert s["after"]["allocated_bytes.all.peak"] >= 4096
    # the runtime gave exactly one 2 MiB segment
    assert s["free_before"] - s["free_after"] == 2 * MiB


def test_medium_allocation_uses_20mib_segment(fresh):
    s = fresh["medium"]
    for pool in ("all", "large_pool"):
        assert _delta(s, f"allocated_bytes.{pool}.current") == 5 * MiB
        assert _delta(s, f"requested_bytes.{pool}.current") == 5 * MiB
        assert _delta(s, f"reserved_bytes.{pool}.current") == 20 * MiB
        assert _delta(s, f"segment.{pool}.current") == 1
        assert _delta(s, f"allocation.{pool}.current") == 1
        assert _delta(s, f"inactive_split_bytes.{pool}.current") == 15 * MiB
    for key in _pool_keys("small_pool"):
        assert _delta(s, key) == 0, key
    assert s["free_before"] - s["free_after"] == 20 * MiB


def test_large_allocation_gets_its_own_segment(fresh):
    s = fresh["large"]
    for pool in ("all", "large_pool"):
        assert _delta(s, f"reserved_bytes.{pool}.current") == 30 * MiB
        assert _delta(s, f"allocated_bytes.{pool}.current") == 30 * MiB
        assert _delta(s, f"segment.{pool}.current") == 1
        assert _delta(s, f"inactive_split.{pool}.current") == 0
    assert _delta(s, "reserved_bytes.small_pool.current") == 0
    r = fresh["large_rounded"]
    assert _delta(r, "reserved_bytes.large_pool.current") == 22 * MiB
    assert _delta(r, "requested_bytes.large_pool.current") == 21 * MiB + 100
    # the tail (1 MiB - 512) is too small to split off a large block: the block is the whole segment
    assert _delta(r, "allocated_bytes.large_pool.current") == 22 * MiB
    assert _delta(r, "inactive_split.large_pool.current") == 0


@pytest.mark.parametrize("name", ["reuse_small", "reuse_large"])
def test_block_reuse(fresh, name):
    s = fresh[name]
    assert s["same_ptr"] is True
    assert _delta(s, "reserved_bytes.all.current") == 0
    assert _delta(s, "segment.all.current") == 0
    assert _delta(s, "num_device_alloc") == 0
    assert _delta(s, "allocation.all.current") == 1
    assert _delta(s, "allocation.all.allocated") == 1


def test_split_and_merge(fresh):
    s = fresh["split_merge"]
    base, both, one, freed, emptied = s["base"], s["both"], s["one_freed"], s["all_freed"], s["emptied"]
    assert s["adjacent"] is True  # the second block is carved right after the first
    assert both["segment.all.current"] - base["segment.all.current"] == 1
    assert both["reserved_bytes.all.current"] - base["reserved_bytes.all.current"] == 2 * MiB
    assert both["allocation.all.current"] == 2
    assert both["inactive_split.all.current"] == 1  # the segment's tail
    # one of the two freed: it stays a separate cached piece while the other lives
    assert one["allocation.all.current"] == 1
    assert one["active.all.current"] == 1
    assert one["inactive_split.all.current"] == 2
    assert one["inactive_split_bytes.all.current"] == 2 * MiB - 4096
    # both freed: the pieces merge back into the whole segment, no longer split
    assert freed["allocation.all.current"] == 0
    assert freed["active.all.current"] == 0
    assert freed["inactive_split.all.current"] == 0
    assert freed["inactive_split_bytes.all.current"] == 0
    assert freed["reserved_bytes.all.current"] == 2 * MiB
    assert freed["segment.all.current"] == 1
    assert emptied["reserved_bytes.all.current"] == 0
    assert emptied["segment.all.current"] == 0
    assert emptied["num_device_free"] - base["num_device_free"] == 1


def test_cached_large_block_is_split(fresh):
    s = fresh["split_cached_large"]
    assert s["same_ptr"] is True
    assert _delta(s, "reserved_bytes.all.current") == 0
    assert _delta(s, "num_device_alloc") == 0
    assert _delta(s, "allocated_bytes.large_pool.current") == 4 * MiB
    assert s["after"]["inactive_split_bytes.large_pool.current"] == 12 * MiB


def test_peaks_and_resets(fresh):
    s = fresh["peaks"]
    assert s["allocated_with_both"] == 15 * MiB
    assert s["peak_with_both"] == 15 * MiB
    assert s["reserved_peak_with_both"] == 20 * MiB + 12 * MiB
    after_del = s["after_del"]
    assert after_del["allocated"] == 3 * MiB
    assert after_del["max_allocated"] == 15 * MiB
    assert after_del["max_reserved"] == 32 * MiB
    acc = s["accumulated"]
    assert acc["allocation.all.allocated"] == 2
    assert acc["allocation.all.freed"] == 1
    assert acc["allocated_bytes.all.allocated"] == 15 * MiB
    assert acc["allocated_bytes.all.freed"] == 12 * MiB
    assert acc["num_device_alloc"] == 2
    reset_peak = s["after_reset_peak"]
    assert reset_peak["max_allocated"] == reset_peak["allocated"] == 3 * MiB
    assert reset_peak["max_reserved"] == reset_peak["reserved"] == 32 * MiB
    reset = s["after_reset_accumulated"]
    for key in (
        "allocation.all.allocated",
        "allocation.all.freed",
        "allocated_bytes.all.allocated",
        "allocated_bytes.all.freed",
        "segment.all.allocated",
        "num_device_alloc",
        "num_device_free",
        "num_alloc_retries",
        "num_ooms",
    ):
        assert reset[key] == 0, key
    # current values are not accumulated counters
    assert reset["allocated_bytes.all.current"] == 3 * MiB
    assert reset["allocation.all.current"] == 1


def test_statistics_are_per_device(fresh):
    s = fresh["per_device"]
    for key in s["before0"]:
        assert s["after0"][key] == s["before0"][key], key
    assert s["after1"]["allocated_bytes.all.current"] - s["before1"]["allocated_bytes.all.current"] == 4096
    assert s["after1"]["reserved_bytes.all.current"] - s["before1"]["reserved_bytes.all.current"] == 2 * MiB


def test_empty_cache_releases_everything_once_freed(fresh):
    s = fresh["empty_cache"]
    # 25 MiB and 11 MiB get segments of their own, rounded to 26 and 12 MiB; 3 MiB takes a
    # 20 MiB one; the three small requests share one 2 MiB segment
    assert s["reserved_live"] == (2 + 20 + 12 + 26) * MiB
    # nothing cached but the live blocks' segments: nothing to release
    assert s["reserved_after_partial"] == s["reserved_live"]
    final = s["final"]
    assert final["reserved_bytes.all.current"] == 0
    assert final["allocated_bytes.all.current"] == 0
    assert final["segment.all.current"] == 0
    assert final["inactive_split.all.current"] == 0
    free, total = s["free_total"]
    assert free == total


# --------------------------------------------------------------------------
# in-process: the Python entry points and device arguments
# --------------------------------------------------------------------------


def test_openreg_memory_functions_agree_with_accelerator():
    keep = [torch.empty(3 * MiB, dtype=torch.uint8, device="openreg:1"), torch.ones(100, device="openreg:0")]
    for index in (0, 1):
        for arg in (index, f"openreg:{index}", torch.device("openreg", index)):
            assert torch.openreg.memory_allocated(arg) == torch.accelerator.memory_allocated(index)
            assert torch.openreg.memory_reserved(arg) == torch.accelerator.memory_reserved(index)
            assert torch.openreg.max_memory_allocated(arg) == torch.accelerator.max_memory_allocated(index)
            assert torch.openreg.max_memory_reserved(arg) == torch.accelerator.max_memory_reserved(index)
            assert torch.openreg.memory_stats(arg) == torch.accelerator.memory_stats(index)
            assert torch.openreg.mem_get_info(arg) == torch.accelerator.get_memory_info(index)
            stats = torch.openreg.memory_stats(arg)
            assert stats["allocated_bytes.all.current"] == torch.openreg.memory_allocated(arg)
            assert stats["reserved_bytes.all.current"] == torch.openreg.memory_reserved(arg)
            assert stats["allocated_bytes.all.peak"] == torch.openreg.max_memory_allocated(arg)
            assert stats["reserved_bytes.all.peak"] == torch.openreg.max_memory_reserved(arg)
    # no argument: the current device
    assert torch.openreg.memory_stats() == torch.openreg.memory_stats(torch.openreg.current_device())
    assert torch.openreg.memory_allocated("openreg") == torch.openreg.memory_allocated(0)
    del keep


def test_memory_functions_reject_bad_devices():
    with pytest.raises(ValueError, match="Expected an openreg device"):
        torch.openreg.memory_allocated("cpu")
    with pytest.raises(RuntimeError, match="openreg"):
        torch.openreg.memory_stats(7)


def test_cuda_stat_names():
    stats = torch.openreg.memory_stats(0)
    for prefix in (
        "allocation",
        "segment",
        "active",
        "inactive_split",
        "allocated_bytes",
        "reserved_bytes",
        "active_bytes",
        "inactive_split_bytes",
        "requested_bytes",
    ):
        for pool in ("all", "small_pool", "large_pool"):
            for field in ("current", "peak", "allocated", "freed"):
                assert f"{prefix}.{pool}.{field}" in stats, f"{prefix}.{pool}.{field}"
    for key in ("num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free"):
        assert key in stats, key
    assert list(stats) == sorted(stats)


def test_requested_bytes_and_counts_per_device_in_process():
    before0 = torch.openreg.memory_stats(0)
    before1 = torch.openreg.memory_stats(1)
    x = torch.empty(777_777, dtype=torch.uint8, device="openreg:1")
    after0 = torch.openreg.memory_stats(0)
    after1 = torch.openreg.memory_stats(1)
    assert after1["requested_bytes.all.current"] - before1["requested_bytes.all.current"] == 777_777
    assert after1["allocation.all.current"] - before1["allocation.all.current"] == 1
    assert after0["requested_bytes.all.current"] == before0["requested_bytes.all.current"]
    assert after0["allocation.all.current"] == before0["allocation.all.current"]
    del x
    assert torch.openreg.memory_stats(1)["requested_bytes.all.current"] == before1["requested_bytes.all.current"]


def test_mem_get_info_tracks_reserved_in_process():
    torch.openreg.synchronize()
    torch.openreg.empty_cache()
    free0, total = torch.openreg.mem_get_info(0)
    reserved0 = torch.openreg.memory_reserved(0)
    x = torch.empty(30 * MiB, dtype=torch.uint8, device="openreg:0")
    free1, total1 = torch.openreg.mem_get_info(0)
    reserved1 = torch.openreg.memory_reserved(0)
    assert total1 == total
    assert reserved1 - reserved0 == 30 * MiB
    assert free0 - free1 == reserved1 - reserved0
    del x
    torch.openreg.empty_cache()
    assert torch.openreg.mem_get_info(0)[0] == free0


def test_values_survive_reuse():
    # a reused block holds the new tensor's values, not stale ones
    for n in (1, 100, 4000, 300_000):
        a = make_cpu(n, seed=n)
        x = a.to(DEVICE)
        del x
        b = make_cpu(n, seed=n + 1)
        y = b.to(DEVICE)
        assert_same(y, b)


# --------------------------------------------------------------------------
# out of memory, 64 MiB devices
# --------------------------------------------------------------------------

_OOM = r"""
import json
import torch

MiB = 1 << 20
stats = torch.openreg.memory_stats
out = {}

a = torch.empty(40 * MiB, dtype=torch.uint8, device="openreg:0")
del a
out["cached_reserved"] = stats(0)["reserved_bytes.all.current"]
before = stats(0)
b = torch.empty(50 * MiB, dtype=torch.uint8, device="openreg:0")  # needs the cached 40 MiB back
after = stats(0)
out["retry"] = {"retries": after["num_alloc_retries"] - before["num_alloc_retries"],
                "device_free": after["num_device_free"] - before["num_device_free"],
                "reserved": after["reserved_bytes.all.current"],
                "ooms": after["num_ooms"] - before["num_ooms"]}

# 5 MiB: the standard 20 MiB segment does not fit (14 MiB free): exactly 5 MiB
before = stats(0)
c = torch.empty(5 * MiB, dtype=torch.uint8, device="openreg:0")
after = stats(0)
out["exact_segment"] = {"reserved_delta": after["reserved_bytes.all.current"] - before["reserved_bytes.all.current"],
                        "retries": after["num_alloc_retries"] - before["num_alloc_retries"]}

before = stats(0)
try:
    torch.empty(100 * MiB, dtype=torch.uint8, device="openreg:0")
    out["oom"] = None
except torch.OutOfMemoryError as e:
    out["oom"] = {"message": str(e), "is_runtime_error": isinstance(e, RuntimeError)}
after = stats(0)
out["oom_counts"] = {"ooms": after["num_ooms"] - before["num_ooms"],
                     "retries": after["num_alloc_retries"] - before["num_alloc_retries"],
                     "allocated": after["allocated_bytes.all.current"]}

# device 1 names itself
try:
    torch.empty(65 * MiB, dtype=torch.uint8, device="openreg:1")
    out["oom1"] = None
except torch.OutOfMemoryError as e:
    out["oom1"] = str(e)

# still working: free, reuse the cached blocks, compute, check values
del b, c
g = torch.Generator().manual_seed(0)
host = torch.randn(MiB, generator=g)  # 4 MiB of float32
x = host.to("openreg:0")
big = torch.empty(50 * MiB, dtype=torch.uint8, device="openreg:0")
ok = torch.equal((x * 2).cpu(), host * 2)
del big, x
before = stats(0)
# 58 MiB fits only once both cached segments (50 and 5 MiB) are returned
pattern = torch.arange(58 * MiB, dtype=torch.int64).remainder(251).to(torch.uint8)
bigger = pattern.to("openreg:0")
out["recovered"] = ok and torch.equal(bigger.cpu(), pattern)
out["second_retry"] = stats(0)["num_alloc_retries"] - before["num_alloc_retries"]
out["final_ooms"] = stats(0)["num_ooms"]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def oom():
    out = check_ok(run_python(_OOM, OPENREG_DEVICE_MEMORY="64M"))
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow
def test_cached_block_released_and_allocation_retried(oom):
    assert oom["cached_reserved"] == 40 * MiB
    retry = oom["retry"]
    assert retry["retries"] == 1
    assert retry["device_free"] == 1
    assert retry["ooms"] == 0
    assert retry["reserved"] == 50 * MiB


def test_segment_of_exact_size_when_standard_does_not_fit(oom):
    assert oom["exact_segment"]["reserved_delta"] == 5 * MiB
    assert oom["exact_segment"]["retries"] == 0


def test_out_of_memory_error(oom):
    assert oom["oom"] is not None, "a 100 MiB allocation on a 64 MiB device succeeded"
    assert oom["oom"]["is_runtime_error"] is True
    message = oom["oom"]["message"]
    assert "openreg:0" in message
    assert "Tried to allocate 100.00 MiB" in message
    assert "total capacity of 64.00 MiB" in message
    assert "55.00 MiB is allocated by PyTorch" in message
    assert "is reserved by PyTorch but unallocated" in message
    assert "OPENREG_DEVICE_MEMORY" in message
    counts = oom["oom_counts"]
    assert counts["ooms"] == 1
    assert counts["retries"] == 1
    assert counts["allocated"] == 55 * MiB
    assert oom["oom1"] is not None and "openreg:1" in oom["oom1"]
    assert "Tried to allocate 65.00 MiB" in oom["oom1"]


def test_process_keeps_working_after_oom(oom):
    assert oom["recovered"] is True
    assert oom["second_retry"] == 1
    assert oom["final_ooms"] == 1


# --------------------------------------------------------------------------
# multi-threaded stress
# --------------------------------------------------------------------------

_STRESS = r"""
import gc, threading
import torch

ITERS = 400
SIZES = [16, 100, 512, 513, 4000, 65536, 300_001, 1 << 20, (1 << 20) + 1, 3 << 20, 4 << 20]
errors = []

def worker(tid):
    try:
        g = torch.Generator().manual_seed(tid)
        side = [torch.openreg.Stream(device=0), torch.openreg.Stream(device=1)]
        live = []
        for i in range(ITERS):
            nbytes = SIZES[(i * 7 + tid * 3) % len(SIZES)]
            if nbytes >= (1 << 20) and i % 3:
                nbytes = SIZES[i % 5]  # keep big ones rarer
            dev = (i + tid) % 2
            n = max(1, nbytes // 4)
            host = torch.randn(n, generator=g)
            if i % 4 == 0:
                s = side[dev]
                pinned = host.pin_memory()
                with torch.openreg.stream(s):
                    x = pinned.to(f"openreg:{dev}", non_blocking=True)
                    y = x * 2
                s.synchronize()
            else:
                x = host.to(f"openreg:{dev}")
                y = x * 2
            z = y.to(f"openreg:{1 - dev}")
            scratch = torch.empty(nbytes, dtype=torch.uint8, device=f"openreg:{dev}")
            if not torch.equal(z.cpu(), host * 2):
                errors.append(f"thread {tid} iteration {i}: wrong values ({nbytes} bytes)")
                return
            live.append(z if i % 5 == 0 else scratch)
            if len(live) > 8:
                live.pop(0)
            del x, y, z, scratch
        live.clear()
    except Exception as e:  # reported by the main thread
        errors.append(f"thread {tid}: {type(e).__name__}: {e}")

threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors
gc.collect()
for d in (0, 1):
    torch.openreg.synchronize(d)
torch.openreg.empty_cache()
torch.accelerator.empty_host_cache()
for d in (0, 1):
    s = torch.openreg.memory_stats(d)
    print(d, s["allocated_bytes.all.current"], s["reserved_bytes.all.current"], s["allocation.all.allocated"],
          s["allocation.all.current"], s["active.all.current"], s["segment.all.current"])
    assert s["allocated_bytes.all.current"] == 0, (d, s["allocated_bytes.all.current"])
    assert s["reserved_bytes.all.current"] == 0, (d, s["reserved_bytes.all.current"])
    assert s["allocation.all.current"] == 0, d
    assert s["active.all.current"] == 0, d
    assert s["segment.all.current"] == 0, d
    assert s["inactive_split.all.current"] == 0, d
    assert s["allocation.all.allocated"] > 500, (d, s["allocation.all.allocated"])
    free, total = torch.openreg.mem_get_info(d)
    assert free == total, (d, free, total)
print("OK")
"""


@pytest.mark.slow
def test_multithreaded_stress_leaves_nothing_allocated():
    out = check_ok(run_python(_STRESS, timeout=120))
    assert out.strip().endswith("OK")


# --------------------------------------------------------------------------
# set_per_process_memory_fraction
# --------------------------------------------------------------------------

_FRACTION = r"""
import json
import torch

MiB = 1 << 20
out = {"default": torch.openreg.get_per_process_memory_fraction(0)}
torch.openreg.set_per_process_memory_fraction(0.25, 0)  # 16 MiB of the 64 MiB device
out["set"] = torch.openreg.get_per_process_memory_fraction("openreg:0")
out["other_device"] = torch.openreg.get_per_process_memory_fraction(1)
a = torch.empty(12 * MiB, dtype=torch.uint8, device="openreg:0")
ooms = torch.openreg.memory_stats(0)["num_ooms"]
try:
    torch.empty(8 * MiB, dtype=torch.uint8, device="openreg:0")
except torch.OutOfMemoryError as e:
    out["oom"] = str(e)
out["ooms"] = torch.openreg.memory_stats(0)["num_ooms"] - ooms
out["reserved_after_oom"] = torch.openreg.memory_reserved(0)
b = torch.empty(MiB, dtype=torch.uint8, device="openreg:0")  # a 2 MiB small segment: 14 of 16 MiB
b.fill_(3)
out["b_sum"] = int(b.sum())
c = torch.empty(40 * MiB, dtype=torch.uint8, device="openreg:1")  # device 1 is not capped
del a, b
torch.openreg.set_per_process_memory_fraction(1.0, 0)
d = torch.empty(40 * MiB, dtype=torch.uint8, device="openreg:0")
out["lifted"] = torch.openreg.memory_allocated(0)
print(json.dumps(out))
"""


@pytest.mark.slow
def test_memory_fraction_is_enforced():
    out = json.loads(check_ok(run_python(_FRACTION, OPENREG_DEVICE_MEMORY="64M")).strip().splitlines()[-1])
    assert out["default"] == 1.0
    assert out["set"] == 0.25
    assert out["other_device"] == 1.0
    message = out["oom"]
    assert "Tried to allocate 8.00 MiB" in message
    assert "openreg:0" in message
    assert "with 16.00 MiB allowed (set_per_process_memory_fraction(0.25))" in message
    assert "Raise the per-process memory fraction" in message
    assert out["ooms"] == 1
    assert out["reserved_after_oom"] == 12 * MiB
    assert out["b_sum"] == 3 * MiB
    assert out["lifted"] == 40 * MiB


@pytest.mark.parametrize("fraction", [0.0, -0.5, 1.5, float("nan"), float("inf")])
def test_memory_fraction_out_of_range(fraction):
    with pytest.raises(ValueError, match=r"Invalid fraction value: .*Allowed range: 0~1"):
        torch.openreg.set_per_process_memory_fraction(fraction, 0)
    assert torch.openreg.get_per_process_memory_fraction(0) == 1.0


def test_memory_fraction_bad_type_and_device():
    with pytest.raises(TypeError, match="Invalid type for fraction argument, must be `float`"):
        torch.openreg.set_per_process_memory_fraction(1, 0)
    with pytest.raises(RuntimeError, match="openreg"):
        torch.openreg.set_per_process_memory_fraction(0.5, 7)
    with pytest.raises(ValueError, match="Expected an openreg device"):
        torch.openreg.set_per_process_memory_fraction(0.5, "cpu")
    with pytest.raises(RuntimeError, match="openreg"):
        torch.openreg.get_per_process_memory_fraction(7)


# --------------------------------------------------------------------------
# PYTORCH_ALLOC_CONF (read once per process, so each case runs in a child)
# --------------------------------------------------------------------------

_CONF_REPORT = r"""
import json
import torch

MiB = 1 << 20
stats = lambda: torch.openreg.memory_stats(0)
def report(**values):
    print(json.dumps(values))
"""


def _run_with_conf(code, **env):
    proc = run_python(_CONF_REPORT + code, **env)
    return json.loads(check_ok(proc).strip().splitlines()[-1])


_MAX_SPLIT = r"""
big = torch.empty(30 * MiB, dtype=torch.uint8, device="openreg:0")
oversize_while_live = stats()["oversize_allocations.current"]
del big
medium = torch.empty(12 * MiB, dtype=torch.uint8, device="openreg:0")
s = stats()
report(segments=s["segment.all.current"], oversize_segments=s["oversize_segments.current"],
       oversize_while_live=oversize_while_live, oversize_now=s["oversize_allocations.current"],
       max_split_size=s["max_split_size"], reserved=s["reserved_bytes.all.current"])
"""


@pytest.mark.slow
def test_alloc_conf_max_split_size():
    limited = _run_with_conf(_MAX_SPLIT, PYTORCH_ALLOC_CONF="max_split_size_mb:20")
    # The cached 30 MiB block is not split for a 12 MiB request: a new segment.
    assert limited["segments"] == 2
    assert limited["reserved"] == (30 + 12) * MiB
    assert limited["oversize_segments"] == 1
    assert limited["oversize_while_live"] == 1
    assert limited["oversize_now"] == 0
    assert limited["max_split_size"] == 20 * MiB
    default = _run_with_conf(_MAX_SPLIT, PYTORCH_ALLOC_CONF=None, PYTORCH_CUDA_ALLOC_CONF=None)
    assert default["segments"] == 1  # the 30 MiB block was split
    assert default["reserved"] == 30 * MiB
    assert default["oversize_segments"] == 0


_ROUNDUP = r"""
x = torch.empty(1100 * 1024, dtype=torch.uint8, device="openreg:0")
y = torch.empty(3 * MiB + 1, dtype=torch.uint8, device="openreg:0")
x.fill_(1)
report(allocated=stats()["allocated_bytes.all.current"], requested=stats()["requested_bytes.all.current"],
       x_sum=int(x.sum()))
"""


@pytest.mark.slow
@pytest.mark.parametrize("variable", ["PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"])
def test_alloc_conf_roundup_power2_divisions(variable):
    env = {"PYTORCH_ALLOC_CONF": None, "PYTORCH_CUDA_ALLOC_CONF": None, variable: "roundup_power2_divisions:4"}
    out = _run_with_conf(_ROUNDUP, **env)
    # 1100 KiB lies in [1, 2) MiB, cut in steps of 256 KiB: 1280 KiB; 3 MiB + 1
    # lies in [2, 4) MiB, steps of 512 KiB: 3.5 MiB.
    assert out["allocated"] == 1280 * 1024 + 3584 * 1024
    assert out["requested"] == 1100 * 1024 + 3 * MiB + 1
    assert out["x_sum"] == 1100 * 1024
    default = _run_with_conf(_ROUNDUP, PYTORCH_ALLOC_CONF=None, PYTORCH_CUDA_ALLOC_CONF=None)
    assert default["allocated"] == 1100 * 1024 + 3 * MiB + 512


@pytest.mark.slow
def test_alloc_conf_roundup_per_interval():
    # Interval keys are in MiB: 8 divisions for [1, 2) MiB (and below), none
    # (1) for [2, 4) MiB. 1100 KiB: steps of 128 KiB; 3 MiB + 1: 512 bytes.
    out = _run_with_conf(_ROUNDUP, PYTORCH_ALLOC_CONF="roundup_power2_divisions:[1:8,2:1]")
    assert out["allocated"] == 1152 * 1024 + 3 * MiB + 512


_GARBAGE_COLLECTION = r"""
torch.openreg.set_per_process_memory_fraction(0.01, 0)  # about 82 MiB of 8 GiB
a, b, c = (torch.empty(12 * MiB, dtype=torch.uint8, device="openreg:0") for _ in range(3))
del a, b
d = torch.empty(16 * MiB, dtype=torch.uint8, device="openreg:0")
before = stats()
del c, d
e = torch.empty(20 * MiB, dtype=torch.uint8, device="openreg:0")
after = stats()
report(reserved_before=before["reserved_bytes.all.current"], reserved=after["reserved_bytes.all.current"],
       freed=after["num_device_free"] - before["num_device_free"])
"""


@pytest.mark.slow
def test_alloc_conf_garbage_collection_threshold():
    out = _run_with_conf(_GARBAGE_COLLECTION, PYTORCH_ALLOC_CONF="garbage_collection_threshold:0.5")
    # 52 MiB reserved passes half of the allowed ~82 MiB: the longest-cached
    # 12 MiB segment goes back before the 20 MiB one is reserved.
    assert out["reserved_before"] == 52 * MiB
    assert out["freed"] == 1
    assert out["reserved"] == (52 - 12 + 20) * MiB
    default = _run_with_conf(_GARBAGE_COLLECTION, PYTORCH_ALLOC_CONF=None, PYTORCH_CUDA_ALLOC_CONF=None)
    assert default["freed"] == 0
    assert default["reserved"] == 72 * MiB


@pytest.mark.slow
def test_alloc_conf_expandable_segments():
    code = r"""
try:
    torch.ones(4, device="openreg:0")
    report(error=None)
except NotImplementedError as e:
    report(error=str(e))
"""
    refused = _run_with_conf(code, PYTORCH_ALLOC_CONF="expandable_segments:True")
    assert "expandable_segments:True" in refused["error"]
    assert "not supported" in refused["error"]
    accepted = _run_with_conf(code, PYTORCH_ALLOC_CONF="expandable_segments:False")
    assert accepted["error"] is None


@pytest.mark.slow
def test_alloc_conf_invalid_value_is_an_error():
    proc = run_python(
        "import torch; torch.ones(4, device='openreg')", PYTORCH_ALLOC_CONF="garbage_collection_threshold:1.5"
    )
    assert proc.returncode != 0
    assert "garbage_collect_threshold is invalid" in proc.stderr


# --------------------------------------------------------------------------
# the fast path: freed small blocks wait unmerged in exact-size bins
# (OpenRegSizeBins.h); every observable behaviour stays CUDA's
# --------------------------------------------------------------------------

_FAST_PATH = r"""
import gc, json, threading
import torch

KiB, MiB = 1 << 10, 1 << 20
stats = torch.openreg.memory_stats
out = {}

def empty(nbytes, device="openreg:0"):
    return torch.empty(nbytes, dtype=torch.uint8, device=device)

def pattern(nbytes, seed):
    return torch.arange(seed, seed + nbytes, dtype=torch.int64).remainder(251).to(torch.uint8)

# allocated on one thread, freed on another, reused by a third with its values intact
made = []
maker = threading.Thread(target=lambda: made.extend(pattern(4000, i).to("openreg:0") for i in range(6)))
maker.start(); maker.join()
addresses = {t.data_ptr() for t in made}
freer = threading.Thread(target=made.clear)
freer.start(); freer.join()
after_free = stats(0)
again = [pattern(4000, 100 + i).to("openreg:0") for i in range(6)]
out["cross_thread"] = {
    "allocated_after_free": after_free["allocated_bytes.all.current"],
    "active_after_free": after_free["active.all.current"],
    "reused": sorted(t.data_ptr() for t in again) == sorted(addresses),
    "values": all(torch.equal(t.cpu(), pattern(4000, 100 + i)) for i, t in enumerate(again)),
}
del again

# a block freed on a side stream serves only that stream
side = torch.openreg.Stream()
with torch.openreg.stream(side):
    x = empty(8 * KiB)
side_ptr = x.data_ptr()
del x
on_default = empty(8 * KiB)
with torch.openreg.stream(side):
    on_side = empty(8 * KiB)
out["cross_stream"] = {"default_got_side_block": on_default.data_ptr() == side_ptr,
                       "side_got_its_block": on_side.data_ptr() == side_ptr}
del on_default, on_side

# a block recorded on a busy stream is not handed out again until it passes
host = torch.ones(16 << 20).pin_memory()
busy_buffer = torch.empty(16 << 20, device="openreg:0")
busy = torch.openreg.Stream()
copies, out["record_stream"] = 4, None
for _ in range(6):
    x = empty(8 * KiB)
    ptr = x.data_ptr()
    with torch.openreg.stream(busy):
        for _ in range(copies):
            busy_buffer.copy_(host, non_blocking=True)
    x.record_stream(busy)
    del x
    y = empty(8 * KiB)
    if not busy.query():  # still busy after the allocation
        out["record_stream"] = {"reused_while_busy": y.data_ptr() == ptr}
        break
    busy.synchronize()
    del y
    copies *= 2
busy.synchronize()
del y, host, busy_buffer

# churn on four threads over both devices: every count and byte accounted for
gc.collect()
torch.openreg.synchronize(0); torch.openreg.synchronize(1)
torch.openreg.empty_cache()
before = [stats(d) for d in (0, 1)]
SIZES = [16, 512, 513, 4000, 8192, 65536, 65537, 300_000]
handoff, lock, requested = [], threading.Lock(), [0, 0]

def churn(tid):
    ring = [None] * 8
    for i in range(3000):
        device, nbytes = (i + tid) % 2, SIZES[(i * 5 + tid) % len(SIZES)]
        ring[i % 8] = empty(nbytes, f"openreg:{device}")
        with lock:
            requested[device] += nbytes
            if i % 7 == 0:  # some are freed by another thread
                handoff.append(ring[i % 8])
            if i % 11 == 0:
                handoff.clear()

threads = [threading.Thread(target=churn, args=(t,)) for t in range(4)]
for t in threads: t.start()
for t in threads: t.join()
handoff.clear()
after = [stats(d) for d in (0, 1)]
out["churn"] = [{
    "allocations": after[d]["allocation.all.allocated"] - before[d]["allocation.all.allocated"],
    "frees": after[d]["allocation.all.freed"] - before[d]["allocation.all.freed"],
    "requested": after[d]["requested_bytes.all.allocated"] - before[d]["requested_bytes.all.allocated"],
    "requested_expected": requested[d],
    "allocated_bytes": after[d]["allocated_bytes.all.current"],
    "active": after[d]["active.all.current"],
    "active_bytes": after[d]["active_bytes.all.current"],
    "inactive_split": after[d]["inactive_split.all.current"],
    "segments": after[d]["segment.all.current"],
} for d in (0, 1)]

# peaks: binned blocks are free, their reuse is a new allocation
torch.openreg.reset_peak_memory_stats(0)
blocks = [empty(4 * KiB) for _ in range(3)]
del blocks
one = empty(4 * KiB)
out["peak"] = {"allocated": torch.openreg.memory_allocated(0), "peak": torch.openreg.max_memory_allocated(0)}
torch.openreg.reset_peak_memory_stats(0)
out["peak"]["after_reset"] = torch.openreg.max_memory_allocated(0)
del one

# a snapshot shows a binned block as the inactive block it is
keep_first, freed, keep_last = empty(4 * KiB), empty(4 * KiB), empty(4 * KiB)
freed_ptr = freed.data_ptr()
del freed
blocks = {b["address"]: b for s in torch.openreg.memory_snapshot() for b in s["blocks"]}
out["snapshot"] = {"state": blocks[freed_ptr]["state"], "size": blocks[freed_ptr]["size"],
                   "neighbours": [blocks[keep_first.data_ptr()]["state"], blocks[keep_last.data_ptr()]["state"]]}
del keep_first, keep_last

# empty_cache on this thread returns what another, still running, thread freed
freed_event, done_event = threading.Event(), threading.Event()
def worker():
    for _ in range(50):
        ring = [empty(n * KiB) for n in (1, 4, 16, 64)]
        del ring
    freed_event.set()
    done_event.wait()
gc.collect()
torch.openreg.synchronize(0); torch.openreg.synchronize(1)
torch.openreg.empty_cache()
t = threading.Thread(target=worker)
t.start()
freed_event.wait()
torch.openreg.empty_cache()
out["empty_cache_other_thread"] = [torch.openreg.memory_reserved(d) for d in (0, 1)]
done_event.set(); t.join()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def fast_path():
    out = check_ok(run_python(_FAST_PATH, timeout=240))
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow
def test_fast_path_block_freed_on_another_thread(fast_path):
    s = fast_path["cross_thread"]
    assert s["allocated_after_free"] == 0
    assert s["active_after_free"] == 0
    assert s["reused"] is True  # the freed blocks served the next requests of their size
    assert s["values"] is True


def test_fast_path_keeps_blocks_on_their_stream(fast_path):
    s = fast_path["cross_stream"]
    assert s["default_got_side_block"] is False
    assert s["side_got_its_block"] is True


def test_fast_path_record_stream_delays_reuse(fast_path):
    s = fast_path["record_stream"]
    assert s is not None, "could not keep a stream busy long enough to test record_stream"
    assert s["reused_while_busy"] is False


def test_fast_path_statistics_exact_after_threaded_churn(fast_path):
    for device in fast_path["churn"]:
        assert device["allocations"] == device["frees"] == 6000
        assert device["requested"] == device["requested_expected"]
        assert device["allocated_bytes"] == 0
        assert device["active"] == 0
        assert device["active_bytes"] == 0
        # settled: the freed blocks merged back into whole segments
        assert device["inactive_split"] == 0
        assert device["segments"] >= 1


def test_fast_path_peak(fast_path):
    s = fast_path["peak"]
    assert s["allocated"] == 4 * KiB
    assert s["peak"] == 12 * KiB
    assert s["after_reset"] == 4 * KiB


def test_fast_path_snapshot_shows_freed_block_inactive(fast_path):
    s = fast_path["snapshot"]
    assert s["state"] == "inactive"
    assert s["size"] == 4 * KiB
    assert s["neighbours"] == ["active_allocated", "active_allocated"]


def test_fast_path_empty_cache_from_another_thread(fast_path):
    assert fast_path["empty_cache_other_thread"] == [0, 0]


_FAST_PATH_OOM = r"""
import json
import torch

KiB, MiB = 1 << 10, 1 << 20
stats = torch.openreg.memory_stats
keep = torch.empty(40 * MiB, dtype=torch.uint8, device="openreg:0")
small = [torch.empty(16 * KiB, dtype=torch.uint8, device="openreg:0") for _ in range(1024)]  # 8 segments
before = stats(0)
del small  # binned, 16 MiB held by segments nothing uses
big = torch.empty(20 * MiB, dtype=torch.uint8, device="openreg:0")  # fits once they are returned
after = stats(0)
print(json.dumps({"reserved_before": before["reserved_bytes.all.current"],
                  "retries": after["num_alloc_retries"] - before["num_alloc_retries"],
                  "ooms": after["num_ooms"] - before["num_ooms"],
                  "reserved_after": after["reserved_bytes.all.current"]}))
"""


@pytest.mark.slow
def test_fast_path_out_of_memory_retry_returns_binned_blocks():
    out = json.loads(check_ok(run_python(_FAST_PATH_OOM, OPENREG_DEVICE_MEMORY="64M")).strip().splitlines()[-1])
    assert out["reserved_before"] == 56 * MiB
    assert out["retries"] == 1
    assert out["ooms"] == 0
    assert out["reserved_after"] == 60 * MiB
