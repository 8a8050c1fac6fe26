"""Memory safety and process boundaries: sizes, ranges, forked children, events, IPC.

Each test is the regression test of a defect found from outside: a path that crashed, corrupted
another tensor, or answered where CUDA raises. Where the CPU defines the behaviour the test compares
with it.
"""

import subprocess
import sys
import textwrap

import pytest
import torch

from conftest import DEVICE, check_ok, parse_key_values, run_python

NEGATIVE_STORAGE_PATHS = {
    "UntypedStorage(-1)": lambda device: torch.UntypedStorage(-1, device=device),
    # Sizes whose rounding to the allocator's 512-byte or 2 MiB granularity would wrap near SIZE_MAX.
    "UntypedStorage(-511)": lambda device: torch.UntypedStorage(-511, device=device),
    "UntypedStorage(-2MiB)": lambda device: torch.UntypedStorage(-(2 << 20), device=device),
    "TypedStorage(-1)": lambda device: torch.TypedStorage(-1, dtype=torch.float32, device=device),
    "storage.resize_(-1)": lambda device: torch.UntypedStorage(16, device=device).resize_(-1),
    "tensor storage resize_(-1)": lambda device: torch.ones(4, device=device).untyped_storage().resize_(-1),
}


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
@pytest.mark.parametrize("path", NEGATIVE_STORAGE_PATHS)
def test_negative_storage_size_is_rejected_as_on_cpu(path):
    make = NEGATIVE_STORAGE_PATHS[path]
    with pytest.raises(RuntimeError, match="negative number"):
        make("cpu")
    # Allocated right before and after the failed request: neither may be handed out twice.
    before = torch.zeros(256, device=DEVICE)
    with pytest.raises(RuntimeError, match="negative number of bytes: -"):
        make(DEVICE)
    after = torch.zeros(256, device=DEVICE)
    assert before.data_ptr() != after.data_ptr()
    after.fill_(7)
    assert torch.equal(before.cpu(), torch.zeros(256))


def test_failed_negative_resize_keeps_the_storage():
    for device in ("cpu", DEVICE):
        t = torch.arange(4.0, device=device)
        storage = t.untyped_storage()
        with pytest.raises(RuntimeError, match="negative number"):
            storage.resize_(-8)
        assert storage.nbytes() == 16
        assert t.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_negative_storage_cannot_reach_another_tensor():
    # The original exploit: a storage claiming SIZE_MAX bytes over a small block, set_ into a
    # neighbour's bytes, then a copy. Creating that storage now fails, and with it the exploit.
    victim = torch.zeros(1024, device=DEVICE)
    with pytest.raises(RuntimeError, match="negative"):
        storage = torch.UntypedStorage(-1, device=DEVICE)
        offset = (victim.data_ptr() - storage.data_ptr()) // 4
        torch.empty(0, device=DEVICE).set_(storage, offset, (4,), (1,)).copy_(torch.ones(4))
    assert torch.equal(victim.cpu(), torch.zeros(1024))


def test_huge_request_is_out_of_memory():
    # Representable, but beyond any capacity: CUDA's caching allocator answers OutOfMemoryError.
    with pytest.raises(torch.OutOfMemoryError, match="openreg out of memory"):
        torch.UntypedStorage(2**63 - 1, device=DEVICE)
    with pytest.raises(RuntimeError):
        torch.UntypedStorage(2**63 - 1)  # the CPU fails too
    assert torch.ones(3, device=DEVICE).sum().item() == 3.0


def _shrunk(numel=1024, keep_bytes=0):
    """A tensor whose storage was resized below its extent afterwards (as FSDP frees parameters)."""
    t = torch.ones(numel, device=DEVICE)
    t.untyped_storage().resize_(keep_bytes)
    return t


USES_OF_A_SHRUNK_TENSOR = {
    "in-place kernel": ("aten::add_", lambda t: t.add_(1)),
    "functional kernel": ("aten::sin", lambda t: torch.sin(t)),
    "fallback kernel": ("aten::cumsum", lambda t: torch.cumsum(t, 0)),
    "copy into it": ("aten::_copy_from", lambda t: t.copy_(torch.ones(t.numel()))),
    "copy out of it": ("aten::_copy_from", lambda t: t.cpu()),
    "device copy out of it": ("aten::_copy_from", lambda t: torch.empty_like(t).copy_(t)),
}


@pytest.mark.parametrize("use", USES_OF_A_SHRUNK_TENSOR)
@pytest.mark.parametrize("keep_bytes", [0, 8])
def test_tensor_beyond_its_shrunk_storage_is_an_error(use, keep_bytes):
    # The CPU reads and writes out of bounds here (a crash, or another tensor's bytes); CUDA faults.
    # openreg refuses before touching a byte: the neighbour allocated after the shrink keeps its values.
    op, run = USES_OF_A_SHRUNK_TENSOR[use]
    t = _shrunk(keep_bytes=keep_bytes)
    neighbour = torch.zeros(4096, device=DEVICE)
    with pytest.raises(RuntimeError) as info:
        run(t)
    message = str(info.value)
    assert op in message and "openreg:0" in message, message
    assert f"needs 4096 bytes of its storage, which holds only {keep_bytes} bytes" in message, message
    assert torch.equal(neighbour.cpu(), torch.zeros(4096))


def test_non_contiguous_tensor_beyond_its_shrunk_storage_is_an_error():
    t = torch.ones(32, 32, device=DEVICE).t()
    t.untyped_storage().resize_(8)
    neighbour = torch.zeros(4096, device=DEVICE)
    with pytest.raises(RuntimeError, match=r"aten::mul_.*strides \[1, 32\].* needs 4096 bytes"):
        t.mul_(2)
    assert torch.equal(neighbour.cpu(), torch.zeros(4096))


def test_shrunk_storage_grown_back_is_usable():
    t = _shrunk(numel=8)
    t.untyped_storage().resize_(32)
    t.fill_(2)
    assert t.cpu().tolist() == [2.0] * 8


_FORK_PARENT = """
import gc, os, signal, sys, time
import torch

x = torch.ones(4, device="openreg")
pinned = torch.ones(4).pin_memory()
event = torch.openreg.Event(enable_timing=True)
event.record()
sys.stdout.flush()
pid = os.fork()
if pid == 0:
{child}
    sys.exit(0)
deadline = time.monotonic() + 60
while True:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        print("child_exit=%s" % os.waitstatus_to_exitcode(status))
        break
    if time.monotonic() > deadline:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        print("child_exit=timeout")
        break
    time.sleep(0.05)
print("parent_after=%s" % (x + 1).cpu().tolist())
"""


def _fork_report(child_body):
    """Runs, in a fresh interpreter that made openreg objects, ``child_body`` in a forked child.

    The child prints KEY=VALUE lines; the parent waits at most 60 s for it, kills it otherwise, and
    prints its exit code.
    """
    child = textwrap.indent(textwrap.dedent(child_body).strip(), "    ")
    return check_ok(run_python(_FORK_PARENT.format(child=child), timeout=180))


@pytest.mark.slow
def test_forked_child_freeing_inherited_tensors_exits_cleanly():
    out = _fork_report(
        """
        print("child_cpu=%s" % (torch.arange(3.0) * 2).tolist())
        del x, pinned, event
        gc.collect()
        sys.stdout.flush()
        """
    )
    r = parse_key_values(out)
    assert r["child_cpu"] == "[0.0, 2.0, 4.0]", out
    assert r["child_exit"] == "0", out
    assert r["parent_after"] == "[2.0, 2.0, 2.0, 2.0]", out


@pytest.mark.slow
def test_forked_child_using_the_device_gets_a_clear_error():
    out = _fork_report(
        """
        for name, use in [("read", lambda: x.cpu()), ("compute", lambda: x + 1),
                          ("create", lambda: torch.ones(2, device="openreg"))]:
            try:
                use()
            except RuntimeError as e:
                print(name + "_err=" + " ".join(str(e).split()))
            else:
                print(name + "_err=none")
        del x
        gc.collect()
        sys.stdout.flush()
        """
    )
    r = parse_key_values(out)
    for name in ("read", "compute", "create"):
        assert "fork" in r[name + "_err"] and "spawn" in r[name + "_err"], out
    assert r["child_exit"] == "0", out
    assert r["parent_after"] == "[2.0, 2.0, 2.0, 2.0]", out


@pytest.mark.parametrize("event_class", ["torch.openreg.Event", "torch.Event"])
def test_elapsed_time_between_devices_raises(event_class):
    if torch.openreg.device_count() < 2:
        pytest.skip("needs two openreg devices")

    def timed_event(index):
        if event_class == "torch.Event":
            event = torch.Event(device=f"openreg:{index}", enable_timing=True)
        else:
            event = torch.openreg.Event(enable_timing=True)
        event.record(torch.openreg.current_stream(index))
        event.synchronize()
        return event

    on_zero, on_one, also_on_zero = timed_event(0), timed_event(1), timed_event(0)
    for start, end, devices in [(on_zero, on_one, (0, 1)), (on_one, on_zero, (1, 0))]:
        with pytest.raises(RuntimeError) as info:
            torch.openreg.Event.elapsed_time(start, end)
        message = str(info.value)
        assert f"recorded on device {devices[0]} and the end event" in message, message
        assert f"on device {devices[1]}" in message, message
    assert torch.openreg.Event.elapsed_time(on_zero, also_on_zero) >= 0


@pytest.mark.filterwarnings("ignore:Sparse invariant checks", "ignore:Sparse CSR tensor support")
@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_sparse_operator_without_cpu_kernel_names_openreg(layout):
    dense = torch.tensor([[0.0, 1.0], [2.0, 0.0]])
    cpu = dense.to_sparse() if layout == "coo" else dense.to_sparse_csr()
    device = cpu.to(DEVICE)
    # COO has no resize_ kernel on the CPU (sparse_resize_ is its way); CSR has no flip.
    use = (lambda t: t.resize_(3, 3)) if layout == "coo" else (lambda t: torch.flip(t, [0]))
    with pytest.raises(NotImplementedError):
        use(cpu)
    with pytest.raises(NotImplementedError) as info:
        use(device)
    message = str(info.value)
    assert "SparseCPU" not in message.split(":")[0] and "openreg" in message, message
    key = "SparsePrivateUse1" if layout == "coo" else "SparseCsrPrivateUse1"
    assert f"from the '{key}' backend" in message, message
    assert torch.equal(device.to_dense().cpu(), dense)


# ---------------------------------------------------------------- multiprocessing (spawn)


@pytest.mark.slow
def test_cpu_copy_of_an_openreg_tensor_crosses_a_spawned_process(tmp_path):
    # torch's own reducer still handles CPU tensors (openreg's delegates them); tests/test_ipc.py shares
    # openreg tensors themselves.
    # A script file: a spawned child imports the parent's __main__, which `python -c` does not have.
    script = tmp_path / "spawn_cpu_copy.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch
            import torch.multiprocessing as mp

            def child(inbox, outbox):
                t = inbox.get(timeout=120)
                # A list back: a tensor sent by a process that exits at once may be gone before
                # the receiver fetches its shared memory (torch.multiprocessing's documented rule).
                outbox.put((t.to("openreg") * 2).cpu().tolist())

            if __name__ == "__main__":
                ctx = mp.get_context("spawn")
                inbox, outbox = ctx.Queue(), ctx.Queue()
                p = ctx.Process(target=child, args=(inbox, outbox))
                p.start()
                try:
                    inbox.put(torch.arange(4.0, device="openreg").cpu())
                    print("result=%s" % outbox.get(timeout=150))
                finally:
                    p.join(timeout=30)
                    if p.is_alive():
                        p.kill()
                        p.join()
                print("exitcode=%s" % p.exitcode)
            """
        )
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    out = check_ok(proc)
    r = parse_key_values(out)
    assert r["result"] == "[0.0, 2.0, 4.0, 6.0]", out
    assert r["exitcode"] == "0", out
