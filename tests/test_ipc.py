"""openreg tensors shared between processes through device memory (torch.multiprocessing, DataLoader workers).

Every flow runs in a script file (a spawned child imports the parent's ``__main__``, which ``python -c`` does
not have). Each flow is run twice by the same script, on openreg and on CPU tensors, and the results must be
bit-identical. Every wait in the scripts has a timeout and every child is joined (or killed and joined), so a
broken backend fails the test instead of hanging it.
"""

import sys
import textwrap

import pytest

from conftest import check_ok, parse_key_values, run_in_own_session

# Imported by every script: a spawned child must be able to import these helpers from a file.
HELPERS = '''
import torch
import torch.multiprocessing as mp

TIMEOUT = 120


def finish(process):
    process.join(timeout=TIMEOUT)
    if process.is_alive():
        process.kill()
        process.join()
    return process.exitcode


def same(a, b):
    """Bit-exact: device aside, dtype, shape, strides, offset and bytes agree."""
    a, b = a.detach(), b.detach()
    return (a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
            and a.storage_offset() == b.storage_offset()
            and torch.equal(a.cpu().view(torch.uint8) if a.dtype.itemsize == 1 else a.cpu(), b.cpu()))
'''


def run_script(tmp_path, body, timeout=400):
    (tmp_path / "ipc_helpers.py").write_text(textwrap.dedent(HELPERS))
    script = tmp_path / "ipc_flow.py"
    script.write_text(textwrap.dedent(body))
    completed = run_in_own_session([sys.executable, str(script)], timeout, cwd=tmp_path)
    return parse_key_values(check_ok(completed)), completed.stdout + completed.stderr


@pytest.mark.slow
def test_tensors_cross_a_spawned_process_through_device_memory(tmp_path):
    r, out = run_script(
        tmp_path,
        """
        import gc
        from multiprocessing.reduction import ForkingPickler
        from ipc_helpers import *


        def consumer(inbox, outbox):
            sent = inbox.get(timeout=TIMEOUT)
            again = inbox.get(timeout=TIMEOUT)
            # Results go back as CPU tensors, and as flags.
            with torch.no_grad():
                computed = {name: (t * 2 + 1).cpu() if t.is_floating_point() else (t + 1).cpu()
                            for name, t in sent.items() if not t.is_sparse}
            outbox.put({
                "computed": computed,
                "sparse": (sent["sparse"] * 3).to_dense().cpu(),
                "devices": sorted({str(t.device) for t in sent.values()}),
                "param": isinstance(sent["param"], torch.nn.Parameter) and sent["param"].requires_grad,
                "one_storage": again["base"].untyped_storage().data_ptr()
                               == sent["base"].untyped_storage().data_ptr(),
                "same_storage_view": sent["view"].untyped_storage().data_ptr()
                                     == sent["base"].untyped_storage().data_ptr(),
            })
            # A write here is seen by the producer after synchronization. record_stream ignores memory
            # received from another process, as CUDA's does.
            if sent["base"].device.type == "openreg":
                sent["base"].record_stream(torch.openreg.Stream())
            sent["base"].mul_(3)
            if sent["base"].device.type == "openreg":
                torch.openreg.synchronize()
            outbox.put("written")
            # Sending on a tensor received from another process is refused, as for CUDA.
            try:
                ForkingPickler.dumps(sent["view"])
                outbox.put("sent")
            except RuntimeError as e:
                outbox.put(str(e))
            # The producer frees its tensor and reuses memory: what this process holds keeps its values.
            inbox.get(timeout=TIMEOUT)
            outbox.put(sent["held"].cpu())
            del sent, again
            gc.collect()
            outbox.put("released")
            inbox.get(timeout=TIMEOUT)


        def flow(device):
            ctx = mp.get_context("spawn")
            inbox, outbox = ctx.Queue(), ctx.Queue()
            child = ctx.Process(target=consumer, args=(inbox, outbox))
            child.start()
            try:
                base = torch.arange(24, dtype=torch.float32).reshape(4, 6).to(device)
                sent = {
                    "base": base,
                    "view": base[1:, 2:].t(),  # offset and strides
                    "int64": torch.arange(-5, 5, dtype=torch.int64).to(device),
                    "half": torch.linspace(-2, 2, 7, dtype=torch.float16).to(device),
                    "bool": (torch.arange(5) % 2 == 0).to(device),
                    "empty": torch.empty(0, 3).to(device),
                    "param": torch.nn.Parameter(torch.ones(2, 2).to(device)),
                    "on_device_1": torch.arange(3.0).to(device if device == "cpu" else "openreg:1"),
                    "held": torch.full((1000,), 7.5).to(device),
                    "sparse": torch.eye(3).to_sparse().to(device),
                }
                inbox.put(sent)
                inbox.put({"base": base})
                results = outbox.get(timeout=TIMEOUT)
                assert outbox.get(timeout=TIMEOUT) == "written"
                results["after_write"] = base.cpu()
                results["resend"] = outbox.get(timeout=TIMEOUT)
                if device != "cpu":
                    held_ptr = sent["held"].data_ptr()
                    allocated = torch.openreg.memory_allocated()
                    sent.pop("held")
                    torch.openreg.ipc_collect()
                    # The receiver still maps the block: it stays allocated and is not handed out again.
                    results["held_allocated"] = torch.openreg.memory_allocated() == allocated
                    fresh = [torch.full((1000,), -1.0, device=device) for _ in range(4)]
                    results["not_reused"] = all(t.data_ptr() != held_ptr for t in fresh)
                else:
                    sent.pop("held")
                inbox.put("freed")
                results["held"] = outbox.get(timeout=TIMEOUT)
                assert outbox.get(timeout=TIMEOUT) == "released"
                if device != "cpu":
                    before = torch.openreg.memory_allocated()
                    torch.openreg.ipc_collect()
                    results["collected_bytes"] = before - torch.openreg.memory_allocated()
                inbox.put("finish")
            finally:
                results["exitcode"] = finish(child)
            return results


        if __name__ == "__main__":
            got, want = flow("openreg"), flow("cpu")
            print("names=%s" % sorted(got["computed"]))
            for name in want["computed"]:
                print("%s=%s" % (name, same(got["computed"][name], want["computed"][name])))
            for name in ("sparse", "after_write", "held"):
                print("%s=%s" % (name, same(got[name], want[name])))
            print("devices=%s" % got["devices"])
            for name in ("param", "one_storage", "same_storage_view", "held_allocated", "not_reused"):
                print("%s=%s" % (name, got[name]))
            print("collected_bytes=%d" % got["collected_bytes"])
            print("resend=%s" % " ".join(str(got["resend"]).split()))
            print("exitcodes=%s,%s" % (got["exitcode"], want["exitcode"]))
        """,
    )
    names = ["base", "bool", "empty", "half", "held", "int64", "on_device_1", "param", "view"]
    assert r["names"] == str(names), out
    for name in names + ["sparse", "after_write", "held"]:
        assert r[name] == "True", (name, out)
    assert r["devices"] == "['openreg:0', 'openreg:1']", out
    for name in ("param", "one_storage", "same_storage_view", "held_allocated", "not_reused"):
        assert r[name] == "True", (name, out)
    # The 4000-byte block rounds to the allocator's 4096; the receiver's release made it collectable.
    assert int(r["collected_bytes"]) >= 4000, out
    assert "received from another process" in r["resend"] and "clon" in r["resend"], out
    assert r["exitcodes"] == "0,0", out


@pytest.mark.slow
def test_bad_shares_give_clear_errors(tmp_path):
    r, out = run_script(
        tmp_path,
        """
        import os
        from ipc_helpers import *


        def receive(inbox, outbox):
            try:
                t = inbox.get(timeout=TIMEOUT)
                outbox.put("received %s" % t.device)
            except RuntimeError as e:
                outbox.put(" ".join(str(e).split()))


        def produce_and_exit(outbox, argument):
            outbox.put((argument * 2).sum().item())  # an openreg tensor passed as a Process argument
            outbox.put(torch.arange(4.0, device="openreg"))


        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            x = torch.arange(4.0, device="openreg")
            far = torch.arange(4.0, device="openreg:1")

            # A receiver with one device cannot map memory of openreg:1.
            os.environ["OPENREG_DEVICE_COUNT"] = "1"
            inbox, outbox = ctx.Queue(), ctx.Queue()
            child = ctx.Process(target=receive, args=(inbox, outbox))
            child.start()
            del os.environ["OPENREG_DEVICE_COUNT"]
            try:
                inbox.put(far)
                print("missing_device=%s" % outbox.get(timeout=TIMEOUT))
            finally:
                print("missing_device_exit=%s" % finish(child))
            # That receiver returned the send's reference: the block is freed with the tensor.
            del far
            torch.openreg.ipc_collect()
            print("missing_device_freed=%s" % (torch.openreg.memory_allocated(1) == 0))

            # A tensor whose producer exited before it was received.
            outbox = ctx.Queue()
            child = ctx.Process(target=produce_and_exit, args=(outbox, x[1:]))
            child.start()
            print("argument=%s" % outbox.get(timeout=TIMEOUT))
            print("producer_exit=%s" % finish(child))
            try:
                outbox.get(timeout=TIMEOUT)
                print("producer_died=received")
            except RuntimeError as e:
                print("producer_died=%s" % " ".join(str(e).split()))

            # The producer itself reads its own queue: the same storage comes back.
            own = ctx.SimpleQueue()
            own.put(x)
            back = own.get()
            print("round_trip=%s" % (back.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()))
        """,
    )
    assert "openreg" in r["missing_device"] and "device 1" in r["missing_device"], out
    assert "has 1 device" in r["missing_device"], out
    assert r["missing_device_exit"] == "0", out
    assert r["missing_device_freed"] == "True", out
    assert r["argument"] == "12.0", out
    assert r["producer_exit"] == "0", out
    assert "has exited" in r["producer_died"] and "openreg" in r["producer_died"], out
    assert r["round_trip"] == "True", out


@pytest.mark.long
def test_dataloader_workers_follow_cuda_rules(tmp_path):
    r, out = run_script(
        tmp_path,
        """
        from torch.utils.data import DataLoader, Dataset
        from ipc_helpers import *


        class Rows(Dataset):
            def __init__(self, device):
                self.device = device

            def __len__(self):
                return 10

            def __getitem__(self, i):
                return torch.arange(i, i + 3, dtype=torch.float64).to(self.device) / 7


        def load(device, context):
            loader = DataLoader(Rows(device), batch_size=4, num_workers=2, multiprocessing_context=context)
            return list(loader)  # the workers have exited when the batches are read


        if __name__ == "__main__":
            want = load("cpu", "spawn")
            got = load("openreg", "spawn")
            print("spawn_devices=%s" % sorted({str(b.device) for b in got}))
            print("spawn_same=%s" % all(same(g, w) for g, w in zip(got, want, strict=True)))
            # As CUDA: a worker forked from a process that initialized the device cannot use it.
            try:
                load("openreg", "fork")
                print("fork=loaded")
            except RuntimeError as e:
                print("fork=%s" % " ".join(str(e).split()))
        """,
    )
    assert r["spawn_devices"] == "['openreg:0']", out
    assert r["spawn_same"] == "True", out
    assert "Cannot re-initialize openreg in forked subprocess" in r["fork"], out
    assert "'spawn' start method" in r["fork"], out


@pytest.mark.long
def test_forkserver_shares_like_spawn(tmp_path):
    r, out = run_script(
        tmp_path,
        """
        from ipc_helpers import *


        def double(inbox, outbox):
            t = inbox.get(timeout=TIMEOUT)
            t.mul_(2)
            torch.openreg.synchronize()
            outbox.put("done")
            inbox.get(timeout=TIMEOUT)


        def flow(device):
            ctx = mp.get_context("forkserver")
            inbox, outbox = ctx.Queue(), ctx.Queue()
            child = ctx.Process(target=double, args=(inbox, outbox))
            child.start()
            try:
                t = torch.linspace(-1, 1, 9, dtype=torch.float32).to(device)
                inbox.put(t)
                assert outbox.get(timeout=TIMEOUT) == "done"
                inbox.put("finish")
            finally:
                exitcode = finish(child)
            return t.cpu(), exitcode


        if __name__ == "__main__":
            (got, got_exit), (want, want_exit) = flow("openreg"), flow("cpu")
            print("same=%s" % same(got, want))
            print("exitcodes=%s,%s" % (got_exit, want_exit))
        """,
    )
    assert r["same"] == "True", out
    assert r["exitcodes"] == "0,0", out


def test_openreg_tensors_count_as_shared_as_cuda_tensors_do():
    # torch.cuda answers True (device memory is shared when sent) and share_memory_() leaves the tensor as it is.
    import torch

    x = torch.arange(4.0, device="openreg")
    before = x.data_ptr()
    assert x.is_shared()
    assert x.share_memory_() is x and x.data_ptr() == before and x.device == torch.device("openreg:0")
    assert not torch.arange(4.0).is_shared()
