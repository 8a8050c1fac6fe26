"""openreg streams and events: torch.openreg.Stream / Event, torch.Stream /
torch.Event on openreg, the current-stream machinery (per thread, per device),
torch.accelerator's stream functions, and the ordering guarantees of work
queued on streams (asynchronous copies, waits, record_stream), every value
checked against the CPU."""

import threading

import pytest
import torch

from conftest import ALL_DTYPES, DEVICE, assert_same, dtype_id, make_cpu

# Large enough that a few asynchronous copies of it keep a stream busy for
# tens of milliseconds, so an ordering bug shows up as wrong values.
BIG = 16 << 20  # float32 elements (64 MiB)


pytestmark = pytest.mark.usefixtures("default_streams")


def _busy(stream, host, device_buf, copies=4):
    """Queues `copies` asynchronous pinned->device copies of `host` on `stream`."""
    with torch.openreg.stream(stream):
        for _ in range(copies):
            device_buf.copy_(host, non_blocking=True)


# --------------------------------------------------------------------------
# torch.openreg.Stream
# --------------------------------------------------------------------------


def test_pool_streams_are_distinct_and_not_default():
    default = torch.openreg.default_stream()
    streams = [torch.openreg.Stream() for _ in range(4)]
    ids = [s.stream_id for s in streams]
    assert len(set(ids)) == 4, ids
    for s in streams:
        assert isinstance(s, torch.openreg.Stream)
        assert isinstance(s, torch.Stream)
        assert s != default
        assert s.stream_id != 0
        assert s.device == torch.device("openreg:0")
        assert s.device_index == 0
        assert s.device_type == int(torch._C._autograd.DeviceType.PrivateUse1)
    assert default.stream_id == 0


def test_stream_device_argument():
    for arg in ("openreg:1", 1, torch.device("openreg", 1), torch.device("openreg:1")):
        s = torch.openreg.Stream(device=arg)
        assert s.device == torch.device("openreg:1"), arg
        assert s.device_index == 1
    # no device: the current one
    torch.openreg.set_device(1)
    assert torch.openreg.Stream().device == torch.device("openreg:1")
    torch.openreg.set_device(0)
    assert torch.openreg.Stream().device == torch.device("openreg:0")
    assert torch.openreg.Stream(device="openreg").device == torch.device("openreg:0")
    with pytest.raises(ValueError, match="Expected an openreg device"):
        torch.openreg.Stream(device="cpu")


def test_stream_priority():
    """Priorities 0 (default, lowest) down to -2 (highest); out-of-range values
    are clamped into that range, as torch.cuda.Stream does."""
    assert torch.openreg.Stream().priority == 0
    assert torch.openreg.Stream(priority=0).priority == 0
    assert torch.openreg.Stream(priority=-1).priority == -1
    assert torch.openreg.Stream(priority=-2).priority == -2
    assert torch.openreg.Stream(priority=-7).priority == -2
    assert torch.openreg.Stream(priority=5).priority == 0
    assert torch.openreg.default_stream().priority == 0


def test_stream_priority_pools():
    """Each priority level has its own pool of streams (ids 1 + level * 32 + i,
    see OpenRegStream.cpp), handed out round-robin; out-of-range priorities
    land in the clamped level's pool."""

    def level(s):
        assert s.stream_id >= 1
        return (s.stream_id - 1) // 32

    assert level(torch.openreg.Stream(priority=0)) == 0
    assert level(torch.openreg.Stream(priority=-1)) == 1
    assert level(torch.openreg.Stream(priority=-2)) == 2
    assert level(torch.openreg.Stream(priority=-100)) == 2
    assert level(torch.openreg.Stream(priority=100)) == 0
    # round-robin over 32 streams: 32 consecutive requests are all distinct,
    # the 33rd wraps to the first
    first = [torch.openreg.Stream(priority=-1) for _ in range(32)]
    assert len({s.stream_id for s in first}) == 32
    assert torch.openreg.Stream(priority=-1).stream_id == first[0].stream_id
    # pools are per device
    assert torch.openreg.Stream(device=1, priority=-2).device_index == 1


def test_stream_repr():
    s = torch.openreg.Stream(device=1)
    text = repr(s)
    assert "torch.openreg.Stream" in text
    assert "openreg:1" in text
    assert f"stream_id={s.stream_id}" in text


def test_stream_equality_and_hash():
    s = torch.openreg.Stream()
    again = torch.openreg.Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)
    assert s == again
    assert hash(s) == hash(again)
    assert torch.openreg.default_stream(0) == torch.openreg.default_stream(0)
    assert torch.openreg.default_stream(0) != torch.openreg.default_stream(1)


# --------------------------------------------------------------------------
# current stream: set_stream, stream(...), per thread, per device
# --------------------------------------------------------------------------


def test_current_stream_starts_as_default():
    assert torch.openreg.current_stream() == torch.openreg.default_stream()
    assert torch.openreg.current_stream(1) == torch.openreg.default_stream(1)
    assert torch.openreg.current_stream().stream_id == 0
    assert torch.openreg.current_stream("openreg:1").device == torch.device("openreg:1")
    assert torch.openreg.current_stream(torch.device("openreg:1")) == torch.openreg.default_stream(1)


def test_set_stream():
    s = torch.openreg.Stream()
    torch.openreg.set_stream(s)
    assert torch.openreg.current_stream() == s
    assert torch.accelerator.current_stream() == s
    torch.openreg.set_stream(None)  # no-op
    assert torch.openreg.current_stream() == s
    torch.openreg.set_stream(torch.openreg.default_stream())
    assert torch.openreg.current_stream() == torch.openreg.default_stream()


def test_stream_context_restores_previous_stream():
    outer = torch.openreg.Stream()
    inner = torch.openreg.Stream()
    with torch.openreg.stream(outer) as entered:
        assert entered is outer
        assert torch.openreg.current_stream() == outer
        with torch.openreg.stream(inner):
            assert torch.openreg.current_stream() == inner
        assert torch.openreg.current_stream() == outer
    assert torch.openreg.current_stream() == torch.openreg.default_stream()


def test_stream_context_restores_on_exception():
    s = torch.openreg.Stream()
    with pytest.raises(KeyError):
        with torch.openreg.stream(s):
            raise KeyError("boom")
    assert torch.openreg.current_stream() == torch.openreg.default_stream()


def test_stream_context_none_is_noop():
    s = torch.openreg.Stream()
    torch.openreg.set_stream(s)
    with torch.openreg.stream(None) as entered:
        assert entered is None
        assert torch.openreg.current_stream() == s
    assert torch.openreg.current_stream() == s


def test_stream_context_on_other_device_restores_device():
    """As torch.cuda.stream: inside, the stream's device is current; on exit,
    both the previous device and that device's previous stream come back."""
    assert torch.openreg.current_device() == 0
    s1 = torch.openreg.Stream(device=1)
    with torch.openreg.stream(s1):
        assert torch.openreg.current_device() == 1
        assert torch.openreg.current_stream(1) == s1
        assert torch.openreg.current_stream(0) == torch.openreg.default_stream(0)
        assert torch.ones(1, device=DEVICE).device == torch.device("openreg:1")
    assert torch.openreg.current_stream(1) == torch.openreg.default_stream(1)
    assert torch.openreg.current_device() == 0


def test_current_stream_is_per_thread():
    s = torch.openreg.Stream()
    torch.openreg.set_stream(s)
    seen = {}
    ready = threading.Event()
    release = threading.Event()

    def other():
        seen["before"] = torch.openreg.current_stream()
        mine = torch.openreg.Stream()
        torch.openreg.set_stream(mine)
        seen["mine"] = mine
        seen["after"] = torch.openreg.current_stream()
        ready.set()
        release.wait(10)

    t = threading.Thread(target=other)
    t.start()
    assert ready.wait(10)
    # the other thread saw the default stream, not ours, and its change does not leak here
    assert seen["before"] == torch.openreg.default_stream()
    assert seen["after"] == seen["mine"]
    assert seen["mine"] != s
    assert torch.openreg.current_stream() == s
    release.set()
    t.join()


def test_current_stream_is_per_device():
    s0 = torch.openreg.Stream(device=0)
    s1 = torch.openreg.Stream(device=1)
    torch.openreg.set_stream(s1)
    assert torch.openreg.current_stream(1) == s1
    assert torch.openreg.current_stream(0) == torch.openreg.default_stream(0)
    torch.openreg.set_stream(s0)
    assert torch.openreg.current_stream(0) == s0
    assert torch.openreg.current_stream(1) == s1


def test_accelerator_set_stream_sets_device():
    s1 = torch.openreg.Stream(device=1)
    torch.accelerator.set_stream(s1)
    assert torch.accelerator.current_device_index() == 1
    assert torch.accelerator.current_stream() == s1
    assert torch.accelerator.current_stream(1) == s1
    assert torch.accelerator.current_stream(0) == torch.openreg.default_stream(0)


# --------------------------------------------------------------------------
# torch.Stream / torch.Event on openreg
# --------------------------------------------------------------------------


def test_torch_stream_on_openreg():
    s = torch.Stream(device="openreg")
    assert s.device == torch.device("openreg:0")
    assert s.stream_id != 0
    s1 = torch.Stream(device="openreg:1", priority=-1)
    assert s1.device_index == 1
    with s:  # torch.Stream is a context manager too
        assert torch.accelerator.current_stream() == s
        assert torch.openreg.current_stream() == s
    assert torch.openreg.current_stream() == torch.openreg.default_stream()
    assert s.query() is True
    s.synchronize()


def test_torch_event_record_query_synchronize():
    host = make_cpu(BIG).pin_memory()
    dev = torch.empty(BIG, device=DEVICE)
    side = torch.openreg.Stream()
    ev = torch.Event(device="openreg", enable_timing=True)
    assert ev.query() is True  # never recorded
    _busy(side, host, dev)
    ev.record(side)
    ev.synchronize()
    assert ev.query() is True
    # the event completed after the work queued before it
    assert side.query() is True
    assert_same(dev, host)


def test_openreg_event_class():
    ev = torch.openreg.Event(enable_timing=True)
    assert isinstance(ev, torch.Event)
    assert ev.query() is True
    s = torch.openreg.Stream()
    ev.record(s)
    ev.synchronize()
    assert ev.query() is True
    assert ev.device == torch.device("openreg:0")
    # record() without a stream uses the current stream
    with torch.openreg.stream(s):
        ev.record()
    ev.synchronize()


def test_elapsed_time_positive_and_ordered():
    host = make_cpu(BIG).pin_memory()
    dev = torch.empty(BIG, device=DEVICE)
    side = torch.openreg.Stream()
    start = torch.Event(device="openreg", enable_timing=True)
    middle = torch.Event(device="openreg", enable_timing=True)
    end = torch.Event(device="openreg", enable_timing=True)
    start.record(side)
    _busy(side, host, dev, copies=2)
    middle.record(side)
    _busy(side, host, dev, copies=2)
    end.record(side)
    end.synchronize()
    first = start.elapsed_time(middle)
    total = start.elapsed_time(end)
    assert first > 0
    assert total > 0
    assert total >= first
    assert middle.elapsed_time(end) > 0


def test_openreg_event_elapsed_time():
    """torch.openreg.Event times like torch.cuda.Event: between two of its own instances."""
    host = make_cpu(BIG).pin_memory()
    dev = torch.empty(BIG, device=DEVICE)
    side = torch.openreg.Stream()
    start = torch.openreg.Event(enable_timing=True)
    end = torch.openreg.Event(enable_timing=True)
    start.record(side)
    _busy(side, host, dev, copies=2)
    end.record(side)
    end.synchronize()
    assert start.elapsed_time(end) > 0
    # Mixed with a torch.Event. (torch.Event.elapsed_time itself accepts only
    # exact torch.Event arguments, a PyTorch restriction; the openreg method
    # accepts both.)
    generic = torch.Event(device="openreg", enable_timing=True)
    generic.record(side)
    generic.synchronize()
    assert end.elapsed_time(generic) >= 0


def test_elapsed_time_needs_timing_enabled():
    # torch.Event checks its flags itself and raises ValueError (for every backend).
    a = torch.Event(device="openreg")
    b = torch.Event(device="openreg")
    a.record()
    b.record()
    b.synchronize()
    with pytest.raises((RuntimeError, ValueError), match="enable_timing=True"):
        a.elapsed_time(b)
    timed = torch.Event(device="openreg", enable_timing=True)
    timed.record()
    timed.synchronize()
    with pytest.raises((RuntimeError, ValueError), match="enable_timing=True"):
        timed.elapsed_time(b)


def test_elapsed_time_needs_recorded_events():
    a = torch.Event(device="openreg", enable_timing=True)
    b = torch.Event(device="openreg", enable_timing=True)
    with pytest.raises((RuntimeError, ValueError), match="must be recorded"):
        a.elapsed_time(b)
    a.record()
    a.synchronize()
    with pytest.raises((RuntimeError, ValueError), match="must be recorded"):
        a.elapsed_time(b)
    with pytest.raises((RuntimeError, ValueError), match="must be recorded"):
        b.elapsed_time(a)


@pytest.mark.slow
def test_event_wait_orders_streams():
    host = make_cpu(BIG, seed=1).pin_memory()
    dev = torch.empty(BIG, device=DEVICE)
    copy = torch.empty(BIG, device=DEVICE)
    s1 = torch.openreg.Stream()
    s2 = torch.openreg.Stream()
    _busy(s1, host, dev)
    ev = torch.Event(device="openreg")
    ev.record(s1)
    ev.wait(s2)
    with torch.openreg.stream(s2):
        copy.copy_(dev, non_blocking=True)  # device->device on one device: queued on s2
    s2.synchronize()
    assert_same(copy, host)


def test_stream_wait_event_and_record_event():
    host = make_cpu(BIG, seed=2).pin_memory()
    dev = torch.empty(BIG, device=DEVICE)
    copy = torch.empty(BIG, device=DEVICE)
    s1 = torch.openreg.Stream()
    s2 = torch.openreg.Stream()
    _busy(s1, host, dev)
    ev = s1.record_event()
    assert isinstance(ev, torch.Event)
    s2.wait_event(ev)
    with torch.openreg.stream(s2):
        copy.copy_(dev, non_blocking=True)
    s2.synchronize()
    assert_same(copy, host)
    # record_event into an existing event
    mine = torch.openreg.Event()
    assert s2.record_event(mine) is mine
    mine.synchronize()
    assert mine.query() is True


@pytest.mark.slow
def test_stream_query_and_synchronize():
    host = make_cpu(BIG, seed=3).pin_memory()
    dev = torch.empty(BIG, device=DEVICE)
    side = torch.openreg.Stream()
    assert side.query() is True
    _busy(side, host, dev)
    side.synchronize()
    assert side.query() is True
    assert_same(dev, host)


# --------------------------------------------------------------------------
# correctness of work under streams
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_nonblocking_copy_from_pinned_on_side_stream(dtype):
    expected = make_cpu((257, 33), dtype=dtype, seed=4)
    host = expected.pin_memory()
    side = torch.openreg.Stream()
    with torch.openreg.stream(side):
        dev = host.to(DEVICE, non_blocking=True)
    side.synchronize()
    assert_same(dev, expected)


@pytest.mark.slow
def test_ops_on_stream_see_async_copies_of_that_stream():
    expected = make_cpu(BIG, seed=5)
    host = expected.pin_memory()
    side = torch.openreg.Stream()
    with torch.openreg.stream(side):
        dev = torch.empty(BIG, device=DEVICE)
        for _ in range(3):
            dev.copy_(host, non_blocking=True)
        # an operator on the same stream runs after the queued copies
        result = (dev * 2 + 1).sum()
        doubled = dev * 2
    side.synchronize()
    torch.testing.assert_close(result.cpu(), (expected * 2 + 1).sum(), rtol=0, atol=0)
    assert_same(doubled, expected * 2)


@pytest.mark.slow
def test_wait_stream_makes_copies_visible_to_other_stream():
    expected = make_cpu(BIG, seed=6)
    host = expected.pin_memory()
    producer = torch.openreg.Stream()
    consumer = torch.openreg.Stream()
    dev = torch.empty(BIG, device=DEVICE)
    _busy(producer, host, dev)
    consumer.wait_stream(producer)
    with torch.openreg.stream(consumer):
        doubled = dev * 2
    torch.openreg.current_stream().wait_stream(consumer)  # before the host reads what the consumer wrote
    assert_same(doubled, expected * 2)
    # the current (default) stream waiting on the producer works the same way
    expected2 = make_cpu(BIG, seed=7)
    host2 = expected2.pin_memory()
    _busy(producer, host2, dev)
    torch.openreg.current_stream().wait_stream(producer)
    assert_same(dev + 0, expected2)


def test_wait_stream_across_devices():
    expected = make_cpu(BIG, seed=14)
    host = expected.pin_memory()
    producer = torch.openreg.Stream(device=1)
    consumer = torch.openreg.Stream(device=0)
    dev1 = torch.empty(BIG, device="openreg:1")
    _busy(producer, host, dev1)
    consumer.wait_stream(producer)
    with torch.openreg.stream(consumer):
        on0 = dev1.to("openreg:0")  # peer copy, ordered after the producer's copies
    torch.openreg.current_stream().wait_stream(consumer)
    assert on0.device == torch.device("openreg:0")
    assert_same(on0, expected)


def test_generic_torch_stream_methods():
    expected = make_cpu(BIG, seed=15)
    host = expected.pin_memory()
    s1 = torch.Stream(device="openreg")
    s2 = torch.Stream(device="openreg")
    dev = torch.empty(BIG, device=DEVICE)
    _busy(s1, host, dev)
    s2.wait_stream(s1)
    with s2:
        doubled = dev * 2
    torch.accelerator.current_stream().wait_stream(s2)
    assert_same(doubled, expected * 2)
    ev = s1.record_event()
    assert isinstance(ev, torch.Event)
    s2.wait_event(ev)
    s2.synchronize()
    assert s1.query() is True and s2.query() is True


def test_nonblocking_copy_device_to_pinned_host():
    expected = make_cpu((1 << 20,), seed=8)
    dev = expected.to(DEVICE)
    out = torch.empty(expected.shape, pin_memory=True)
    assert out.is_pinned()
    side = torch.openreg.Stream()
    side.wait_stream(torch.openreg.current_stream())
    with torch.openreg.stream(side):
        out.copy_(dev * 3, non_blocking=True)
    side.synchronize()
    assert torch.equal(out, expected * 3)
    # .to("cpu", non_blocking=True) returns a pinned tensor, valid after synchronize
    with torch.openreg.stream(side):
        back = dev.to("cpu", non_blocking=True)
    side.synchronize()
    assert torch.equal(back, expected)


def test_nonblocking_round_trip_chain_on_one_stream():
    expected = make_cpu((1 << 20,), seed=9)
    host = expected.pin_memory()
    out = torch.empty_like(host).pin_memory()
    side = torch.openreg.Stream()
    with torch.openreg.stream(side):
        dev = host.to(DEVICE, non_blocking=True)
        dev2 = torch.empty_like(dev)
        dev2.copy_(dev, non_blocking=True)
        out.copy_(dev2, non_blocking=True)
    side.synchronize()
    assert torch.equal(out, expected)


def test_nonblocking_copy_on_other_devices_stream():
    expected = make_cpu((4096,), seed=10)
    host = expected.pin_memory()
    s1 = torch.openreg.Stream(device=1)
    with torch.openreg.stream(s1):
        dev = host.to("openreg:1", non_blocking=True)
    s1.synchronize()
    assert dev.device == torch.device("openreg:1")
    assert_same(dev, expected)
    # peer copy from device 1 to device 0 after the queued work
    assert_same(dev.to("openreg:0"), expected)


@pytest.mark.slow
def test_accelerator_synchronize_waits_for_streams():
    expected = make_cpu(BIG, seed=11)
    host = expected.pin_memory()
    dev = torch.empty(BIG, device=DEVICE)
    side = torch.openreg.Stream()
    _busy(side, host, dev)
    torch.accelerator.synchronize()
    assert side.query() is True
    side1 = torch.openreg.Stream(device=1)
    dev1 = torch.empty(BIG, device="openreg:1")
    _busy(side1, host, dev1)
    torch.accelerator.synchronize(1)
    assert side1.query() is True
    _busy(side, host, dev)
    torch.openreg.synchronize()
    assert side.query() is True
    assert_same(dev, expected)
    assert_same(dev1, expected)


# --------------------------------------------------------------------------
# record_stream
# --------------------------------------------------------------------------


def test_record_stream_accepts_openreg_streams():
    x = torch.ones(100, device=DEVICE)
    x.record_stream(torch.openreg.Stream())
    x.record_stream(torch.Stream(device="openreg"))
    x.record_stream(torch.openreg.default_stream())
    x.record_stream(torch.openreg.current_stream())
    # a view records its whole storage
    x[10:20].record_stream(torch.openreg.Stream())
    torch.openreg.synchronize()
    assert_same(x, torch.ones(100))


def test_record_stream_rejects_cpu_stream_and_cpu_tensor():
    x = torch.ones(10, device=DEVICE)
    with pytest.raises(RuntimeError, match="expected an openreg stream"):
        x.record_stream(torch.Stream(device="cpu"))
    with pytest.raises(NotImplementedError, match="record_stream.*CPU"):
        torch.ones(3).record_stream(torch.openreg.Stream())


@pytest.mark.slow
def test_record_stream_delays_reuse_until_stream_passes():
    """A block used on stream B (record_stream) and freed is not handed out
    again while B still has work queued before the free; after B finishes
    it is."""
    nbytes = 12 << 20  # large pool, a segment of its own: no splitting
    torch.openreg.synchronize()
    torch.openreg.empty_cache()  # no cached block of that size but the one under test
    host = make_cpu(BIG, seed=12).pin_memory()
    busy_dev = torch.empty(BIG, device=DEVICE)
    b = torch.openreg.Stream()
    copies = 4
    for _ in range(6):
        x = torch.empty(nbytes, dtype=torch.uint8, device=DEVICE)
        ptr = x.data_ptr()
        _busy(b, host, busy_dev, copies=copies)
        x.record_stream(b)
        del x
        y = torch.empty(nbytes, dtype=torch.uint8, device=DEVICE)
        still_busy = not b.query()  # checked after the allocation: B was busy during it
        if still_busy:
            assert y.data_ptr() != ptr, "a block recorded on a busy stream was reused"
            break
        b.synchronize()
        del y
        torch.openreg.empty_cache()
        copies *= 2
    else:
        pytest.fail("could not keep a stream busy long enough to test record_stream")
    b.synchronize()
    z = torch.empty(nbytes, dtype=torch.uint8, device=DEVICE)
    assert z.data_ptr() == ptr, "after the stream passed, the recorded block should be reused"
    del y, z


def test_record_stream_then_empty_cache_frees_memory():
    torch.openreg.synchronize()
    torch.openreg.empty_cache()
    before = torch.openreg.memory_reserved()
    allocated_before = torch.openreg.memory_allocated()
    host = make_cpu(BIG, seed=13).pin_memory()
    busy_dev = torch.empty(BIG, device=DEVICE)
    b = torch.openreg.Stream()
    x = torch.empty(12 << 20, dtype=torch.uint8, device=DEVICE)
    _busy(b, host, busy_dev)
    x.record_stream(b)
    del x, busy_dev
    # empty_cache waits for the streams the block was recorded on, then releases it
    torch.openreg.empty_cache()
    assert torch.openreg.memory_reserved() == before
    assert torch.openreg.memory_allocated() == allocated_before
