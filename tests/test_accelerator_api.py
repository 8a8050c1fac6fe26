"""Every public name of torch.accelerator and torch.accelerator.memory, called
meaningfully with openreg as the accelerator. CHECKS maps each name to a test
of it; test_every_public_name_is_checked fails when a newer torch adds a name
that has no check here (and so, maybe, no openreg support).

torch.accelerator.Graph is checked to CUDA-graph semantics: capture on a side
stream, then replay recomputes into the captured outputs, seeing inputs that
were refreshed in place."""

import threading
import warnings

import pytest
import torch

from conftest import DEVICE, assert_same, make_cpu

MiB = 1 << 20
BIG = 16 << 20  # float32 elements: a few async copies keep a stream busy


pytestmark = pytest.mark.usefixtures("default_streams")


def _fresh_segment_bytes():
    """Frees the cache so the next >10 MiB request gets a new segment of its own."""
    torch.accelerator.synchronize()
    torch.accelerator.empty_cache()


def _device_args(index):
    return (index, f"openreg:{index}", torch.device("openreg", index))


# --------------------------------------------------------------------------
# one check per public name
# --------------------------------------------------------------------------


def check_current_accelerator():
    acc = torch.accelerator.current_accelerator()
    assert acc == torch.device("openreg")
    assert acc.type == "openreg" and acc.index is None
    assert torch.accelerator.current_accelerator(check_available=True) == torch.device("openreg")


def check_device_count():
    assert torch.accelerator.device_count() == 2 == torch.openreg.device_count()


def check_is_available():
    assert torch.accelerator.is_available() is True


def check_current_device_index():
    assert torch.accelerator.current_device_index() == 0
    torch.openreg.set_device(1)
    assert torch.accelerator.current_device_index() == 1
    torch.openreg.set_device(0)
    assert torch.accelerator.current_device_index() == 0


def check_current_device_idx():
    with pytest.warns(FutureWarning, match="current_device_index"):
        assert torch.accelerator.current_device_idx() == 0


def check_set_device_index():
    for arg in _device_args(1):
        torch.accelerator.set_device_index(arg)
        assert torch.openreg.current_device() == 1
        assert torch.ones(1, device=DEVICE).device == torch.device("openreg:1")
        torch.accelerator.set_device_index(0)
        assert torch.openreg.current_device() == 0
    torch.accelerator.set_device_index(-1)  # negative: no-op
    assert torch.openreg.current_device() == 0
    with pytest.raises(RuntimeError, match="openreg"):
        torch.accelerator.set_device_index(9)


def check_set_device_idx():
    with pytest.warns(FutureWarning, match="set_device_index"):
        torch.accelerator.set_device_idx(1)
    assert torch.openreg.current_device() == 1
    with pytest.warns(FutureWarning):
        torch.accelerator.set_device_idx(0)
    assert torch.openreg.current_device() == 0


def check_device_index():
    with torch.accelerator.device_index(1):
        assert torch.accelerator.current_device_index() == 1
        assert torch.empty(1, device=DEVICE).device == torch.device("openreg:1")
        with torch.accelerator.device_index(0):
            assert torch.accelerator.current_device_index() == 0
        assert torch.accelerator.current_device_index() == 1
    assert torch.accelerator.current_device_index() == 0
    with torch.accelerator.device_index(None):  # no-op
        assert torch.accelerator.current_device_index() == 0
    # restored on exception too
    with pytest.raises(ZeroDivisionError):
        with torch.accelerator.device_index(1):
            1 / 0
    assert torch.accelerator.current_device_index() == 0


def check_current_stream():
    s = torch.accelerator.current_stream()
    assert isinstance(s, torch.Stream)
    assert s.device == torch.device("openreg:0")
    assert s == torch.openreg.default_stream(0)
    for arg in _device_args(1):
        assert torch.accelerator.current_stream(arg) == torch.openreg.default_stream(1)
    side = torch.openreg.Stream(device=1)
    torch.openreg.set_stream(side)
    assert torch.accelerator.current_stream(1) == side


def check_set_stream():
    side = torch.Stream(device="openreg")
    torch.accelerator.set_stream(side)
    assert torch.accelerator.current_stream() == side
    assert torch.openreg.current_stream() == side
    # work issued now is queued on `side`
    expected = make_cpu(1000, seed=1)
    host = expected.pin_memory()
    dev = host.to(DEVICE, non_blocking=True)
    side.synchronize()
    assert_same(dev, expected)
    # a stream on the other device makes that device current
    side1 = torch.Stream(device="openreg:1")
    torch.accelerator.set_stream(side1)
    assert torch.accelerator.current_device_index() == 1
    assert torch.accelerator.current_stream(1) == side1
    assert torch.accelerator.current_stream(0) == side
    torch.accelerator.set_stream(torch.openreg.default_stream(0))
    # a thread starts on the default stream
    seen = []
    t = threading.Thread(target=lambda: seen.append(torch.accelerator.current_stream(0)))
    t.start()
    t.join()
    assert seen == [torch.openreg.default_stream(0)]


def check_synchronize():
    expected = make_cpu(BIG, seed=2)
    host = expected.pin_memory()
    for index in (0, 1):
        side = torch.openreg.Stream(device=index)
        dev = torch.empty(BIG, device=f"openreg:{index}")
        with torch.openreg.stream(side):
            for _ in range(3):
                dev.copy_(host, non_blocking=True)
        if index == 0:
            torch.accelerator.synchronize()
        else:
            torch.accelerator.synchronize(f"openreg:{index}")
        assert side.query() is True
        assert_same(dev, expected)
        torch.accelerator.set_device_index(0)


def check_get_device_capability():
    for arg in (None,) + _device_args(1):
        capability = (
            torch.accelerator.get_device_capability() if arg is None else torch.accelerator.get_device_capability(arg)
        )
        dtypes = capability["supported_dtypes"]
        for dtype in (
            torch.float32,
            torch.float64,
            torch.float16,
            torch.bfloat16,
            torch.int64,
            torch.int8,
            torch.uint8,
            torch.bool,
            torch.complex64,
            torch.complex128,
        ):
            assert dtype in dtypes, dtype
        for dtype in (torch.qint8, torch.quint8, torch.qint32):  # quantized tensors, as CUDA's kernels
            assert dtype in dtypes, dtype
        for dtype in (torch.quint4x2, torch.quint2x4):  # sub-byte quantized tensors stay CPU-only
            assert dtype not in dtypes, dtype


def check_empty_cache():
    for module in (torch.accelerator, torch.accelerator.memory):
        _fresh_segment_bytes()
        before = torch.accelerator.memory_reserved(0)
        x = torch.empty(30 * MiB, dtype=torch.uint8, device=DEVICE)
        del x
        assert torch.accelerator.memory_reserved(0) == before + 30 * MiB  # cached
        module.empty_cache()
        assert torch.accelerator.memory_reserved(0) == before


def check_empty_host_cache():
    for module in (torch.accelerator, torch.accelerator.memory):
        pinned = torch.empty(1 * MiB, dtype=torch.uint8, pin_memory=True)
        ptr = pinned.data_ptr()
        del pinned
        again = torch.empty(1 * MiB, dtype=torch.uint8, pin_memory=True)
        assert again.data_ptr() == ptr  # cached by the host allocator
        del again
        module.empty_host_cache()
        expected = make_cpu(100, seed=3)
        assert_same(expected.pin_memory().to(DEVICE, non_blocking=True), expected)


def check_get_memory_info():
    for module in (torch.accelerator, torch.accelerator.memory):
        for index in (0, 1):
            _fresh_segment_bytes()
            free, total = module.get_memory_info(index)
            assert 0 < free <= total
            assert (free, total) == module.get_memory_info(f"openreg:{index}")
            assert (free, total) == torch.openreg.mem_get_info(index)
            x = torch.empty(30 * MiB, dtype=torch.uint8, device=f"openreg:{index}")
            free2, total2 = module.get_memory_info(torch.device("openreg", index))
            assert total2 == total
            assert free - free2 == 30 * MiB
            del x
    torch.accelerator.empty_cache()


def _check_allocated(fn, index, expected_delta, alloc_bytes=30 * MiB):
    _fresh_segment_bytes()
    before = fn(index)
    x = torch.empty(alloc_bytes, dtype=torch.uint8, device=f"openreg:{index}")
    for arg in _device_args(index):
        assert fn(arg) - before == expected_delta, (fn, arg)
    del x


def check_memory_allocated():
    for module in (torch.accelerator, torch.accelerator.memory):
        for index in (0, 1):
            _check_allocated(module.memory_allocated, index, 30 * MiB)
            assert module.memory_allocated(index) == torch.openreg.memory_allocated(index)
        assert module.memory_allocated() == module.memory_allocated(0)


def check_memory_reserved():
    for module in (torch.accelerator, torch.accelerator.memory):
        for index in (0, 1):
            _check_allocated(module.memory_reserved, index, 30 * MiB)
            assert module.memory_reserved(index) >= module.memory_allocated(index)
        assert module.memory_reserved() == module.memory_reserved(0)


def check_max_memory_allocated():
    for module in (torch.accelerator, torch.accelerator.memory):
        for index in (0, 1):
            module.reset_peak_memory_stats(index)
            base = module.memory_allocated(index)
            assert module.max_memory_allocated(index) == base
            x = torch.empty(30 * MiB, dtype=torch.uint8, device=f"openreg:{index}")
            peak = module.memory_allocated(index)
            del x
            for arg in _device_args(index):
                assert module.max_memory_allocated(arg) == peak >= base + 30 * MiB


def check_max_memory_reserved():
    for module in (torch.accelerator, torch.accelerator.memory):
        for index in (0, 1):
            _fresh_segment_bytes()
            module.reset_peak_memory_stats(index)
            base = module.memory_reserved(index)
            assert module.max_memory_reserved(index) == base
            x = torch.empty(30 * MiB, dtype=torch.uint8, device=f"openreg:{index}")
            del x
            module.empty_cache()
            for arg in _device_args(index):
                assert module.max_memory_reserved(arg) == base + 30 * MiB


def check_memory_stats():
    for module in (torch.accelerator, torch.accelerator.memory):
        for index in (0, 1):
            stats = module.memory_stats(index)
            assert stats["allocated_bytes.all.current"] == module.memory_allocated(index)
            assert stats["reserved_bytes.all.current"] == module.memory_reserved(index)
            before = stats["requested_bytes.all.current"]
            x = torch.empty(12345, dtype=torch.uint8, device=f"openreg:{index}")
            for arg in _device_args(index):
                assert module.memory_stats(arg)["requested_bytes.all.current"] - before == 12345
            del x
        assert module.memory_stats() == module.memory_stats(0)


def check_reset_peak_memory_stats():
    for module in (torch.accelerator, torch.accelerator.memory):
        for index in (0, 1):
            x = torch.empty(30 * MiB, dtype=torch.uint8, device=f"openreg:{index}")
            del x
            assert module.max_memory_allocated(index) > module.memory_allocated(index)
            module.reset_peak_memory_stats(f"openreg:{index}")
            assert module.max_memory_allocated(index) == module.memory_allocated(index)
            assert module.max_memory_reserved(index) == module.memory_reserved(index)
            stats = module.memory_stats(index)
            assert stats["allocation.all.peak"] == stats["allocation.all.current"]


def check_reset_accumulated_memory_stats():
    for module in (torch.accelerator, torch.accelerator.memory):
        for index in (0, 1):
            x = torch.empty(1000, dtype=torch.uint8, device=f"openreg:{index}")
            del x
            stats = module.memory_stats(index)
            assert stats["allocation.all.allocated"] > 0 and stats["allocation.all.freed"] > 0
            module.reset_accumulated_memory_stats(torch.device("openreg", index))
            stats = module.memory_stats(index)
            for key in (
                "allocation.all.allocated",
                "allocation.all.freed",
                "allocated_bytes.all.allocated",
                "allocated_bytes.all.freed",
                "num_alloc_retries",
                "num_ooms",
            ):
                assert stats[key] == 0, key
            assert stats["allocated_bytes.all.current"] == module.memory_allocated(index)


def check_graph():
    _graph_basic()
    _graph_in_place()
    _graph_context_manager()


CHECKS = {
    "Graph": check_graph,
    "current_accelerator": check_current_accelerator,
    "current_device_idx": check_current_device_idx,
    "current_device_index": check_current_device_index,
    "current_stream": check_current_stream,
    "device_count": check_device_count,
    "device_index": check_device_index,
    "empty_cache": check_empty_cache,
    "empty_host_cache": check_empty_host_cache,
    "get_device_capability": check_get_device_capability,
    "get_memory_info": check_get_memory_info,
    "is_available": check_is_available,
    "max_memory_allocated": check_max_memory_allocated,
    "max_memory_reserved": check_max_memory_reserved,
    "memory_allocated": check_memory_allocated,
    "memory_reserved": check_memory_reserved,
    "memory_stats": check_memory_stats,
    "reset_accumulated_memory_stats": check_reset_accumulated_memory_stats,
    "reset_peak_memory_stats": check_reset_peak_memory_stats,
    "set_device_idx": check_set_device_idx,
    "set_device_index": check_set_device_index,
    "set_stream": check_set_stream,
    "synchronize": check_synchronize,
}


def test_every_public_name_is_checked():
    public = set(torch.accelerator.__all__) | set(torch.accelerator.memory.__all__)
    assert public == set(CHECKS), (
        f"unchecked: {sorted(public - set(CHECKS))}, no longer public: {sorted(set(CHECKS) - public)}"
    )
    for name in torch.accelerator.memory.__all__:
        # the memory functions are re-exported unchanged
        assert getattr(torch.accelerator, name) is getattr(torch.accelerator.memory, name), name


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CHECKS))
def test_public_name(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no warning for a supported device
        CHECKS[name]()


# --------------------------------------------------------------------------
# torch.accelerator.Graph, CUDA-graph semantics
# --------------------------------------------------------------------------


def _graph_basic():
    x_cpu = make_cpu((8, 5), seed=10)
    x = x_cpu.to(DEVICE)
    g = torch.accelerator.Graph()
    s = torch.openreg.Stream()
    s.wait_stream(torch.openreg.current_stream())
    with torch.openreg.stream(s):
        g.capture_begin()
        y = x * 2 + 1
        z = y.sum(dim=1)
        g.capture_end()
    torch.openreg.current_stream().wait_stream(s)
    assert y.device == torch.device("openreg:0")
    for seed in (11, 12, 13):
        new = make_cpu((8, 5), seed=seed)
        x.copy_(new.to(DEVICE))  # refresh the input in place
        g.replay()
        torch.accelerator.synchronize()
        assert_same(y, new * 2 + 1)
        assert_same(z, (new * 2 + 1).sum(dim=1))


def _graph_in_place():
    acc_cpu = make_cpu(6, seed=20)
    acc = acc_cpu.to(DEVICE)
    step = make_cpu(6, seed=21).to(DEVICE)
    g = torch.accelerator.Graph()
    s = torch.openreg.Stream()
    with torch.openreg.stream(s):
        g.capture_begin()
        acc.add_(step)
        g.capture_end()
    torch.accelerator.synchronize()
    # capture ran once (openreg executes while capturing) or not at all: measure from here
    start = acc.cpu()
    for _ in range(3):
        g.replay()
    torch.accelerator.synchronize()
    expected = start.clone()
    for _ in range(3):
        expected.add_(step.cpu())
    assert_same(acc, expected)


def _graph_context_manager():
    x_cpu = make_cpu(16, seed=30)
    x = x_cpu.to(DEVICE)
    w = make_cpu(16, seed=31).to(DEVICE)
    g = torch.accelerator.Graph()
    s = torch.Stream(device="openreg")
    with s, g:
        out = torch.sin(x) * w
    new = make_cpu(16, seed=32)
    x.copy_(new.to(DEVICE))
    g.replay()
    torch.accelerator.synchronize()
    assert_same(out, torch.sin(new) * w.cpu())


def test_graph_linear_forward_replay():
    torch.manual_seed(0)
    cpu_model = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.ReLU(), torch.nn.Linear(20, 4))
    model = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.ReLU(), torch.nn.Linear(20, 4))
    model.load_state_dict(cpu_model.state_dict())
    model.to(DEVICE)
    static_in = torch.zeros(3, 10, device=DEVICE)
    g = torch.accelerator.Graph()
    s = torch.openreg.Stream()
    with torch.no_grad(), torch.openreg.stream(s):
        g.capture_begin()
        static_out = model(static_in)
        g.capture_end()
    for seed in (40, 41):
        data = make_cpu((3, 10), seed=seed)
        static_in.copy_(data.to(DEVICE))
        g.replay()
        torch.accelerator.synchronize()
        with torch.no_grad():
            assert_same(static_out, cpu_model(data))


def test_graph_reset_and_recapture():
    x = make_cpu(4, seed=50).to(DEVICE)
    g = torch.accelerator.Graph()
    s = torch.openreg.Stream()
    with torch.openreg.stream(s):
        g.capture_begin()
        y = x + 1
        g.capture_end()
    g.reset()
    with torch.openreg.stream(s):
        g.capture_begin()
        z = x * 3
        g.capture_end()
    new = make_cpu(4, seed=51)
    x.copy_(new.to(DEVICE))
    g.replay()
    torch.accelerator.synchronize()
    assert_same(z, new * 3)
    del y


def test_graph_keep_graph_and_instantiate():
    x = make_cpu(5, seed=60).to(DEVICE)
    g = torch.accelerator.Graph(keep_graph=True)
    s = torch.openreg.Stream()
    with torch.openreg.stream(s):
        g.capture_begin()
        y = x.exp()
        g.capture_end()
    g.instantiate()
    new = make_cpu(5, seed=61)
    x.copy_(new.to(DEVICE))
    g.replay()
    torch.accelerator.synchronize()
    assert_same(y, new.exp())
    pool = g.pool()
    assert isinstance(pool, tuple) and len(pool) == 2


def test_graph_capture_on_default_stream_fails():
    g = torch.accelerator.Graph()
    with pytest.raises(RuntimeError, match="stream"):
        g.capture_begin()


def test_graph_misuse_errors():
    g = torch.accelerator.Graph()
    with pytest.raises(RuntimeError):
        g.capture_end()  # never began
    s = torch.openreg.Stream()
    x = torch.ones(2, device=DEVICE)
    with torch.openreg.stream(s):
        g.capture_begin()
        x.add_(1)
        with pytest.raises(RuntimeError):
            g.replay()  # while capturing
        g.capture_end()
