"""The stream-order sanitizer (torch.openreg.sanitizer, docs/sanitizer.md): each class of missing synchronization is
reported every time (100 runs, 100 reports), goes unnoticed without the sanitizer, and its corrected program runs clean
under it."""

import os
import random
import subprocess
import sys
import threading

import pytest
import torch
from distributed_launcher import run_ranks

from torch.openreg import _gpu_trace, sanitizer
from torch.openreg.sanitizer import SynchronizationErrors

DEVICE = "openreg"
N = 1024
RUNS = 100
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def starts_off():
    """These tests switch the sanitizer on and off themselves; a suite run under OPENREG_SANITIZER=1 has it on (that it
    is off by default is checked by test_pytest_flag_and_fixture, in a process without the variable)."""
    was_on = sanitizer.is_enabled()
    sanitizer.disable()
    yield
    if was_on:
        sanitizer.enable()


def read_on_another_stream(fixed):
    a = torch.ones(N, device=DEVICE)  # written on the default stream
    side = torch.openreg.Stream()
    if fixed:
        side.wait_stream(torch.openreg.current_stream())
    with torch.openreg.stream(side):
        return a * 2


def free_while_another_stream_uses_it(fixed):
    side = torch.openreg.Stream()
    x = torch.ones(N, device=DEVICE)
    side.wait_stream(torch.openreg.current_stream())
    with torch.openreg.stream(side):
        y = x * 2
    if fixed:
        x.record_stream(side)
    address = x.data_ptr()
    del x
    z = torch.empty(N, device=DEVICE)  # the freed block, handed out again on the default stream
    return y, z, address


def read_copy_before_synchronizing(dtype, fixed):
    x = torch.arange(N, device=DEVICE).to(dtype)
    host = torch.empty(N, dtype=dtype, pin_memory=True)
    host.copy_(x, non_blocking=True)
    if fixed:
        torch.openreg.current_stream().synchronize()
    return host.clone(), x.cpu()


def write_pinned_source_before_the_copy_ran(fixed):
    source = torch.ones(N, pin_memory=True)
    target = torch.empty(N, device=DEVICE)
    target.copy_(source, non_blocking=True)
    if fixed:
        torch.openreg.current_stream().synchronize()
    source.fill_(2)
    torch.openreg.synchronize()
    return target


def wait_before_record(fixed):
    event = torch.openreg.Event()
    side = torch.openreg.Stream()
    if fixed:
        event.record()
    side.wait_event(event)


@pytest.mark.slow
def test_race_between_streams_is_reported_every_time():
    read_on_another_stream(fixed=False)  # unnoticed without the sanitizer
    for _ in range(RUNS):
        with pytest.raises(SynchronizationErrors) as raised, sanitizer.enabled():
            read_on_another_stream(fixed=False)
    message = str(raised.value)
    # The operator, both streams, the tensor, both stack traces (this file's frames in each).
    assert "aten::mul.Tensor" in message and "reading from argument(s) self" in message
    assert "Previous access by stream" in message and "aten::ones" in message
    assert message.count("read_on_another_stream") >= 2
    assert not sanitizer.is_enabled()


def test_ordered_streams_run_clean():
    for _ in range(RUNS):
        with sanitizer.enabled():
            result = read_on_another_stream(fixed=True)
        assert torch.equal(result.cpu(), torch.full((N,), 2.0))


def test_block_freed_while_another_stream_uses_it_is_reported_when_handed_out_again():
    *_, address = free_while_another_stream_uses_it(fixed=False)  # unnoticed without the sanitizer
    for _ in range(RUNS):
        with pytest.raises(SynchronizationErrors) as raised, sanitizer.enabled():
            free_while_another_stream_uses_it(fixed=False)
        message = str(raised.value)
        assert "is handed out again on stream" in message and "record_stream" in message
        assert "aten::mul.Tensor" in message  # the last access, on the side stream
        assert "Freed with stack trace" in message and "Handed out again with stack trace" in message


def test_block_kept_with_record_stream_runs_clean():
    for _ in range(RUNS):
        with sanitizer.enabled():
            y, _, _ = free_while_another_stream_uses_it(fixed=True)
        assert torch.equal(y.cpu(), torch.full((N,), 2.0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_device_to_host_copy_read_before_synchronizing_reads_poison(dtype):
    for _ in range(RUNS):
        with sanitizer.enabled():
            early, expected = read_copy_before_synchronizing(dtype, fixed=False)
        assert torch.isnan(early).all() if dtype.is_floating_point else (early == -1).all()
    with sanitizer.enabled():
        synchronized, expected = read_copy_before_synchronizing(dtype, fixed=True)
    assert torch.equal(synchronized, expected)


def test_pinned_source_written_before_the_copy_ran_is_reported():
    for _ in range(RUNS):
        with pytest.raises(RuntimeError, match="the host wrote into") as raised, sanitizer.enabled():
            write_pinned_source_before_the_copy_ran(fixed=False)
        assert not isinstance(raised.value, SynchronizationErrors)
    with sanitizer.enabled():
        target = write_pinned_source_before_the_copy_ran(fixed=True)
    assert torch.equal(target.cpu(), torch.ones(N))


def test_wait_on_an_event_never_recorded_is_reported():
    wait_before_record(fixed=False)  # unnoticed without the sanitizer
    for _ in range(RUNS):
        with pytest.raises(RuntimeError, match="never recorded"), sanitizer.enabled():
            wait_before_record(fixed=False)
    with sanitizer.enabled():
        wait_before_record(fixed=True)


def test_errors_inside_enabled_leave_it_off_and_asynchronous_work_released():
    with pytest.raises(SynchronizationErrors), sanitizer.enabled():
        read_on_another_stream(fixed=False)
    assert not sanitizer.is_enabled()
    x = torch.arange(N, dtype=torch.float32, device=DEVICE)
    host = torch.empty(N, pin_memory=True)
    host.copy_(x, non_blocking=True)
    torch.openreg.synchronize()
    assert torch.equal(host, torch.arange(N, dtype=torch.float32))


def listeners():
    return len(_gpu_trace.MemoryAllocationCallbacks.callback_list)


def test_disable_from_another_thread_turns_every_part_off():
    thread = threading.Thread(target=sanitizer.enable)
    thread.start()
    thread.join(timeout=60)
    assert not sanitizer.is_enabled()  # on, but this thread's operators are not checked
    sanitizer.disable()
    assert not sanitizer.is_enabled() and listeners() == 0
    # The runtime's completion checks are off: a non_blocking copy's destination is never poisoned.
    x = torch.arange(N, dtype=torch.float32, device=DEVICE)
    host = torch.zeros(N, pin_memory=True)
    host.copy_(x, non_blocking=True)
    assert not torch.isnan(host).any()
    torch.openreg.synchronize()
    with sanitizer.enabled():
        assert sanitizer.is_enabled() and listeners() == 1
    assert listeners() == 0


def test_disable_stops_the_checks_of_a_thread_still_inside_enabled():
    entered, disabled, seen = threading.Event(), threading.Event(), []

    def checked_thread():
        with sanitizer.enabled():
            entered.set()
            disabled.wait(timeout=60)
            seen.append(sanitizer.is_enabled())
            read_on_another_stream(fixed=False)  # no longer checked
        seen.append(sanitizer.is_enabled())

    thread = threading.Thread(target=checked_thread)
    thread.start()
    assert entered.wait(timeout=60)
    sanitizer.disable()
    disabled.set()
    thread.join(timeout=60)
    assert not thread.is_alive() and seen == [False, False] and listeners() == 0


def test_each_thread_that_enables_it_is_checked_by_one_checker():
    outcome = []

    def checked_thread():
        try:
            with sanitizer.enabled():
                outcome.append(listeners())
                read_on_another_stream(fixed=False)
        except SynchronizationErrors as errors:
            outcome.append(errors)

    with sanitizer.enabled():
        thread = threading.Thread(target=checked_thread)
        thread.start()
        thread.join(timeout=60)
        assert sanitizer.is_enabled()  # the other thread's exit left this one checked
        with pytest.raises(SynchronizationErrors):
            read_on_another_stream(fixed=False)
    count, errors = outcome
    assert count == 1 and "aten::mul.Tensor" in str(errors)
    assert not sanitizer.is_enabled() and listeners() == 0


def test_disable_under_a_mode_entered_after_enable_refuses_before_changing_anything():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Passthrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    sanitizer.enable()
    try:
        with Passthrough(), pytest.raises(RuntimeError, match="exit that mode before"):
            sanitizer.disable()
        assert sanitizer.is_enabled() and listeners() == 1
    finally:
        sanitizer.disable()
    assert not sanitizer.is_enabled() and listeners() == 0


def test_freed_blocks_are_remembered_only_while_another_stream_may_use_them():
    sizes = random.Random(0)
    side = torch.openreg.Stream()
    with sanitizer.enabled():
        checker = sanitizer._checker
        for _ in range(30):
            # One stream, sizes that vary (a freed block rarely comes back at its address): nothing to remember.
            a = torch.ones(sizes.randint(1, 200_000), device=DEVICE)
            (a * 2).sum()
            del a
            assert not checker.freed
            # Freed while the side stream's read is not ordered yet: remembered until it is.
            b = torch.ones(sizes.randint(1, 200_000), device=DEVICE)
            side.wait_stream(torch.openreg.current_stream())
            with torch.openreg.stream(side):
                c = b * 2
            del b
            assert len(checker.freed) == 1
            torch.openreg.current_stream().wait_stream(side)
            assert not checker.freed
            del c


def test_freed_memory_handed_out_from_another_address_is_checked():
    big = 1 << 20  # 4 MiB blocks, cut from one 20 MiB segment of a pool of their own
    for fixed in (False, True):
        side = torch.openreg.Stream()
        pool = torch.openreg.MemPool()
        with sanitizer.enabled(), torch.openreg.use_mem_pool(pool):
            a = torch.ones(big, device=DEVICE)
            b = torch.ones(big, device=DEVICE)
            side.wait_stream(torch.openreg.current_stream())
            with torch.openreg.stream(side):
                y = b * 2
            address = b.data_ptr()
            del a, b  # the two blocks merge with the rest of the segment
            if fixed:
                torch.openreg.current_stream().wait_stream(side)  # before anything is allocated there
                handed_out = torch.empty(big * 2, device=DEVICE).data_ptr()
            else:
                with pytest.raises(
                    SynchronizationErrors, match=f"memory at {address:#x} is handed out again"
                ) as raised:
                    torch.empty(big * 2, device=DEVICE)
                handed_out = raised.value.errors[0].block
            # Handed out from the start of the merged block, which covers the freed one.
            assert handed_out < address < handed_out + big * 2 * 4
            assert not sanitizer._checker.freed
        torch.openreg.synchronize()
        del y, pool


def test_memory_returned_to_the_runtime_is_ordered_as_after_cuda_free():
    # cudaFree synchronizes the device; so does orFree, which empty_cache calls for each segment it returns.
    size = 4 << 20  # 16 MiB: a segment of its own
    torch.openreg.empty_cache()
    side = torch.openreg.Stream()
    with sanitizer.enabled():
        x = torch.ones(size, device=DEVICE)
        side.wait_stream(torch.openreg.current_stream())
        with torch.openreg.stream(side):
            y = x * 2
        address = x.data_ptr()
        del x  # no record_stream
        torch.openreg.empty_cache()
        z = torch.zeros(size, device=DEVICE)
        assert z.data_ptr() == address  # the same memory, from the runtime again
        y.add_(1)  # the side stream's write is complete too
        assert torch.equal(y.cpu(), torch.full((size,), 3.0))
    del z


def test_training_step_with_side_stream_copies_runs_clean():
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)).to(DEVICE)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    copies = torch.openreg.Stream()
    with sanitizer.enabled():
        for step in range(3):
            batch = torch.randn(32, 64).pin_memory()
            with torch.openreg.stream(copies):
                inputs = batch.to(DEVICE, non_blocking=True)
            torch.openreg.current_stream().wait_stream(copies)
            inputs.record_stream(torch.openreg.current_stream())
            loss = model(inputs).square().mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        assert torch.isfinite(loss).item()


def test_graph_replays_are_checked_on_the_current_stream_and_captures_are_not():
    static_in = torch.zeros(N, device=DEVICE)
    graph = torch.openreg.OpenRegGraph()
    with sanitizer.enabled():
        # Capture runs nothing in CUDA's model: reading static_in on the capture stream is no race.
        with torch.openreg.graph(graph):
            static_out = static_in * 2
        # Replay is work on the current stream, as a CUDA graph launch is: ordered after the refresh queued there.
        static_in.copy_(torch.full((N,), 3.0).to(DEVICE))
        graph.replay()
        assert torch.equal(static_out.cpu(), torch.full((N,), 6.0))
        # A refresh on another stream, not waited for, races with the replay.
        side = torch.openreg.Stream()
        side.wait_stream(torch.openreg.current_stream())
        with torch.openreg.stream(side):
            static_in.fill_(4.0)
        with pytest.raises(SynchronizationErrors, match="aten::mul.Tensor"):
            graph.replay()


def test_copies_between_devices_are_ordered_both_ways_as_on_cuda():
    with sanitizer.enabled():
        for _ in range(3):
            x = torch.arange(N, dtype=torch.float32, device="openreg:0") * 2
            y = x.to("openreg:1")  # on openreg:1's current stream, after openreg:0's work
            del x  # reused on openreg:0's stream, which the copy orders after itself
            z = torch.empty(N, device="openreg:0").fill_(1.0)
            assert torch.equal((y.to("openreg:0") + z).cpu(), torch.arange(N, dtype=torch.float32) * 2 + 1)


@pytest.mark.slow
def test_compiled_code_is_compiled_and_its_operators_checked():
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b: (a @ b).relu() + 1, fullgraph=True)
    a = torch.randn(16, 16, device=DEVICE)
    with sanitizer.enabled():
        b = torch.randn(16, 16, device=DEVICE)
        torch.testing.assert_close(compiled(a, b).cpu(), (a.cpu() @ b.cpu()).relu() + 1)
        assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # compiled, not run eagerly
        # The matrix product is an extern kernel the compiled code calls through the dispatcher: checked.
        c = torch.randn(16, 16, device=DEVICE)  # written on the default stream
        with torch.openreg.stream(torch.openreg.Stream()), pytest.raises(SynchronizationErrors, match="aten::mm"):
            compiled(a, c)


def _run_checked(args, timeout):
    env = dict(os.environ, OPENREG_SANITIZER="1", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_environment_variable_checks_a_whole_program():
    program = "import torch\n" + "".join(
        f"{line}\n"
        for line in (
            "x = torch.ones(8, device='openreg')",
            "assert torch.openreg.sanitizer.is_enabled()",
            "side = torch.openreg.Stream()",
            "with torch.openreg.stream(side):",
            "    y = x + 1",
        )
    )
    proc = _run_checked([sys.executable, "-c", program], timeout=120)
    assert proc.returncode != 0
    assert "SynchronizationErrors" in proc.stderr and "aten::add.Tensor" in proc.stderr


# Runs an example as its own program, with the sanitizer on from the first device use, and says whether it was on.
RUN_EXAMPLE = """
import runpy, sys, torch
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as exit:
    if exit.code not in (None, 0):
        raise
print("sanitizer on:", torch.openreg.sanitizer.is_enabled())
"""


@pytest.mark.long
@pytest.mark.parametrize(
    "example",
    [
        ["examples/streams_training.py"],  # side streams, pinned DataLoader with non_blocking copies, checkpoints
        ["examples/compile_training.py", "--steps", "3"],  # compiled training against compiled CPU
    ],
    ids=["streams", "compiled"],
)
def test_example_runs_clean_under_the_sanitizer(example):
    proc = _run_checked([sys.executable, "-c", RUN_EXAMPLE, *example], timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.rstrip().endswith("sanitizer on: True")


@pytest.mark.long
def test_distributed_training_runs_clean_under_the_sanitizer(tmp_path):
    # DDP (buckets, no_sync) and FSDP2 with mixed precision, each rank checked and bit for bit with the CPU.
    scenarios = ["ddp_buckets", "ddp_no_sync", "fsdp2_mixed_precision"]
    ranks = run_ranks(
        os.path.join(ROOT, "tests", "distributed_workers", "training_scenarios.py"),
        2,
        args=("--device", DEVICE, "--out", tmp_path, *scenarios),
        timeout=600,
        env={"OPENREG_SANITIZER": "1"},
    )
    output = "\n".join(r.output for r in ranks)
    for r in ranks:
        assert [entry["scenario"] for entry in r.results] == scenarios, output
        for entry in r.results:
            assert entry["ok"] and entry["sanitized"], output


@pytest.mark.long
def test_stream_and_pinned_memory_tests_pass_under_the_sanitizer():
    # The suite's own tests of streams, events and asynchronous copies, with pytest's flag of the plugin.
    plugin = ["-p", "torch_openreg.testing.sanitizer_plugin", "--openreg-sanitizer", "-p", "no:cacheprovider", "-q"]
    files = ["tests/test_streams.py", "tests/test_pinned_memory.py"]
    proc = _run_checked([sys.executable, "-m", "pytest", *plugin, *files], timeout=900)
    assert proc.returncode == 0, proc.stdout[-5000:]


@pytest.mark.slow
def test_pytest_flag_and_fixture(tmp_path):
    (tmp_path / "test_checked.py").write_text(
        "import torch\n\n"
        "def test_fixture(openreg_sanitizer):\n"
        "    assert openreg_sanitizer.is_enabled()\n\n"
        "def test_flag(request):\n"
        "    assert torch.openreg.sanitizer.is_enabled() == request.config.getoption('--openreg-sanitizer')\n"
    )
    for flag in ([], ["--openreg-sanitizer"]):
        command = [sys.executable, "-m", "pytest", "-p", "torch_openreg.testing.sanitizer_plugin", *flag, "-q"]
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.pop("OPENREG_SANITIZER", None)
        proc = subprocess.run(
            [*command, "-p", "no:cacheprovider", str(tmp_path)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0 and "2 passed" in proc.stdout, proc.stdout[-3000:]
