"""torch.openreg (the device module), torch.accelerator, and the methods that
torch.utils.generate_methods_for_privateuse1_backend adds for openreg."""

import threading

import pytest
import torch

from conftest import DEVICE, assert_same, check_ok, make_cpu, parse_key_values, run_python


# --------------------------------------------------------------------------
# torch.openreg
# --------------------------------------------------------------------------


def test_module_attributes():
    import torch_openreg.openreg as module

    assert torch.openreg is module
    assert torch.get_device_module("openreg") is module
    for name in module.__all__:
        assert hasattr(torch.openreg, name), name
    for name in (
        "is_available",
        "device_count",
        "current_device",
        "set_device",
        "device",
        "device_of",
        "synchronize",
        "is_initialized",
        "init",
        "_is_in_bad_fork",
        "_lazy_init",
    ):
        assert callable(getattr(torch.openreg, name)), name


def test_submodules_import_through_torch_openreg():
    # As `from torch.cuda.memory import MemPool`: the same module, bound to the extension.
    import torch_openreg.openreg.memory as package_memory
    from torch.openreg.memory import MemPool, memory_allocated

    import torch.openreg.memory

    assert torch.openreg.memory is package_memory
    assert MemPool is package_memory.MemPool
    assert MemPool().id[0] == 0
    assert memory_allocated() == package_memory.memory_allocated()


def test_is_available_and_device_count():
    assert torch.openreg.is_available() is True
    assert torch.openreg.device_count() == 2
    assert torch.accelerator.device_count() == 2
    assert torch.accelerator.is_available()


def test_is_initialized_and_not_in_bad_fork():
    torch.ones(1, device=DEVICE)
    assert torch.openreg.is_initialized() is True
    assert torch.openreg._is_in_bad_fork() is False
    torch.openreg.init()  # idempotent
    assert torch.openreg.is_initialized() is True


def test_set_device_moves_new_tensors(restore_device):
    assert torch.openreg.current_device() == 0
    torch.openreg.set_device(1)
    assert torch.openreg.current_device() == 1
    x = torch.ones(3, device=DEVICE)
    assert x.device == torch.device("openreg:1")
    assert x.untyped_storage().device == torch.device("openreg:1")
    # results of ops on that device stay there
    y = x * 2
    assert y.device == torch.device("openreg:1")
    assert_same(y, torch.full((3,), 2.0))
    # a CPU tensor moved with an index-less device lands on the current device
    assert torch.ones(2).to(DEVICE).device == torch.device("openreg:1")
    # explicit indices ignore the current device
    assert torch.ones(2, device="openreg:0").device == torch.device("openreg:0")
    torch.openreg.set_device("openreg:0")
    assert torch.openreg.current_device() == 0
    torch.openreg.set_device(torch.device("openreg", 1))
    assert torch.openreg.current_device() == 1
    # a negative index is ignored, as in torch.cuda
    torch.openreg.set_device(-1)
    assert torch.openreg.current_device() == 1
    torch.openreg.set_device(0)
    assert torch.ones(1, device=DEVICE).device == torch.device("openreg:0")


def test_set_device_rejects_bad_values(restore_device):
    with pytest.raises(RuntimeError, match=r"Invalid openreg device index 5.*2 openreg devices"):
        torch.openreg.set_device(5)
    with pytest.raises(ValueError, match="Expected an openreg device"):
        torch.openreg.set_device("cpu")
    assert torch.openreg.current_device() == 0


def test_device_context_manager_restores(restore_device):
    assert torch.openreg.current_device() == 0
    with torch.openreg.device(1):
        assert torch.openreg.current_device() == 1
        assert torch.empty(1, device=DEVICE).device.index == 1
        with torch.openreg.device("openreg:0"):
            assert torch.openreg.current_device() == 0
        assert torch.openreg.current_device() == 1
    assert torch.openreg.current_device() == 0
    # restored on exceptions too
    with pytest.raises(KeyError):
        with torch.openreg.device(torch.device("openreg:1")):
            raise KeyError("boom")
    assert torch.openreg.current_device() == 0
    # from a non-zero current device
    torch.openreg.set_device(1)
    with torch.openreg.device(0):
        assert torch.openreg.current_device() == 0
    assert torch.openreg.current_device() == 1


def test_device_of_context_manager(restore_device):
    x1 = torch.ones(2, device="openreg:1")
    with torch.openreg.device_of(x1):
        assert torch.openreg.current_device() == 1
        y = torch.zeros(2, device=DEVICE)
        assert y.device == x1.device
    assert torch.openreg.current_device() == 0
    # a CPU tensor does not change the current device
    torch.openreg.set_device(1)
    with torch.openreg.device_of(torch.ones(2)):
        assert torch.openreg.current_device() == 1
    assert torch.openreg.current_device() == 1


def test_synchronize(restore_device):
    x = torch.ones(4, device="openreg:1") + 1
    assert torch.openreg.synchronize() is None
    assert torch.openreg.synchronize(1) is None
    assert torch.openreg.synchronize("openreg:1") is None
    assert torch.openreg.synchronize(torch.device("openreg:0")) is None
    # synchronizing another device does not change the current one
    assert torch.openreg.current_device() == 0
    with pytest.raises(RuntimeError, match="Invalid openreg device index 3"):
        torch.openreg.synchronize(3)
    assert torch.openreg.current_device() == 0
    assert_same(x, torch.full((4,), 2.0))


def test_current_device_is_per_thread(restore_device):
    seen = {}

    def worker():
        seen["start"] = torch.openreg.current_device()
        torch.openreg.set_device(1)
        seen["after_set"] = torch.openreg.current_device()
        seen["tensor"] = torch.empty(1, device=DEVICE).device
        seen["accel"] = torch.accelerator.current_device_index()

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen["start"] == 0
    assert seen["after_set"] == 1
    assert seen["tensor"] == torch.device("openreg:1")
    assert seen["accel"] == 1
    # the main thread is unaffected
    assert torch.openreg.current_device() == 0
    assert torch.empty(1, device=DEVICE).device == torch.device("openreg:0")
    # and a device set in the main thread does not leak into a new thread
    torch.openreg.set_device(1)
    t = threading.Thread(target=lambda: seen.__setitem__("fresh", torch.openreg.current_device()))
    t.start()
    t.join()
    assert seen["fresh"] == 0
    assert torch.openreg.current_device() == 1


# --------------------------------------------------------------------------
# torch.accelerator
# --------------------------------------------------------------------------


def test_accelerator_api(restore_device):
    acc = torch.accelerator.current_accelerator()
    assert acc == torch.device("openreg")
    assert acc.type == "openreg"
    assert torch.accelerator.device_count() == 2
    assert torch.accelerator.current_device_index() == 0
    torch.accelerator.set_device_index(1)
    assert torch.accelerator.current_device_index() == 1
    assert torch.openreg.current_device() == 1
    assert torch.ones(1, device=DEVICE).device.index == 1
    torch.accelerator.set_device_index(0)
    with torch.accelerator.device_index(1):
        assert torch.accelerator.current_device_index() == 1
        assert torch.openreg.current_device() == 1
    assert torch.accelerator.current_device_index() == 0
    with torch.accelerator.device_index(None):
        assert torch.accelerator.current_device_index() == 0
    assert torch.accelerator.synchronize() is None
    assert torch.accelerator.synchronize(1) is None
    assert torch.accelerator.current_device_index() == 0
    with pytest.raises(RuntimeError, match="Invalid openreg device index 7"):
        torch.accelerator.set_device_index(7)
    assert torch.accelerator.current_device_index() == 0


# --------------------------------------------------------------------------
# Generated methods
# --------------------------------------------------------------------------


def test_tensor_methods():
    cpu = make_cpu((2, 3), torch.float32)
    x = cpu.openreg()
    assert x.is_openreg is True
    assert cpu.is_openreg is False
    assert x.device == torch.device("openreg:0")
    assert_same(x, cpu)
    x1 = cpu.openreg(1)
    assert x1.device == torch.device("openreg:1")
    assert_same(x1, cpu)
    # already there: no copy
    assert x.openreg() is x
    xt = cpu.t().openreg()
    assert_same(xt, cpu.t())


def test_module_methods():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    ref = [t.clone() for t in m.state_dict().values()]
    m.openreg()
    for t, r in zip(m.state_dict().values(), ref):
        assert t.device == torch.device("openreg:0")
        assert_same(t, r)
    m.openreg(1)
    assert all(p.device == torch.device("openreg:1") for p in m.parameters())


def test_untyped_storage_methods():
    cpu = make_cpu((2, 3), torch.float32)
    x = cpu.to(DEVICE)
    s = x.untyped_storage()
    assert s.device == torch.device("openreg:0")
    assert s.is_openreg
    assert s.nbytes() == 24
    assert s.data_ptr() == x.data_ptr()
    host = s.cpu()
    assert host.device.type == "cpu"
    assert bytes(host) == bytes(cpu.untyped_storage())
    s2 = cpu.untyped_storage().openreg()
    assert s2.device.type == "openreg" and s2.is_openreg
    assert bytes(s2.cpu()) == bytes(cpu.untyped_storage())
    new = torch.UntypedStorage(16, device=DEVICE)
    assert new.device.type == "openreg" and new.nbytes() == 16


def test_packed_sequence_methods():
    from torch.nn.utils.rnn import pack_padded_sequence

    padded = make_cpu((3, 4, 2), torch.float32)
    packed = pack_padded_sequence(padded, torch.tensor([4, 3, 1]), batch_first=True)
    assert not packed.is_openreg
    moved = packed.openreg()
    assert moved.is_openreg
    assert moved.data.device.type == "openreg"
    assert_same(moved.data, packed.data)


# --------------------------------------------------------------------------
# Environment (subprocesses)
# --------------------------------------------------------------------------


@pytest.mark.slow
def test_device_count_env_four():
    out = check_ok(
        run_python(
            """
            import torch
            print("count=", torch.openreg.device_count())
            print("acc_count=", torch.accelerator.device_count())
            x = torch.arange(3, device="openreg:3")
            print("dev=", x.device, (x * 2).cpu().tolist())
            try:
                torch.ones(1, device="openreg:4")
            except RuntimeError as e:
                print("err=", str(e).splitlines()[0])
            """,
            OPENREG_DEVICE_COUNT="4",
        )
    )
    r = parse_key_values(out)
    assert r["count"] == "4", out
    assert r["acc_count"] == "4", out
    assert r["dev"] == "openreg:3 [0, 2, 4]", out
    assert "index 4" in r["err"] and "4 openreg devices" in r["err"], out


@pytest.mark.slow
@pytest.mark.parametrize("value", ["0", "17", "abc"])
def test_invalid_device_count(value):
    out = check_ok(
        run_python(
            """
            import torch
            print("is_available=", torch.openreg.is_available())
            for what, fn in [
                ("tensor", lambda: torch.ones(2, device="openreg")),
                ("tensor_again", lambda: torch.ones(2, device="openreg")),
                ("to", lambda: torch.ones(2).to("openreg")),
            ]:
                try:
                    fn()
                except RuntimeError as e:
                    print(what + "_err=", " ".join(str(e).split()))
                else:
                    print(what + "_err=none")
            print("initialized=", torch.openreg.is_initialized())
            print("cpu_still_works=", (torch.ones(2) + 1).tolist())
            """,
            OPENREG_DEVICE_COUNT=value,
        )
    )
    r = parse_key_values(out)
    assert r["is_available"] == "False", out
    for what in ("tensor", "tensor_again", "to"):
        message = r[what + "_err"]
        assert "OPENREG_DEVICE_COUNT" in message, out
        assert f"'{value}'" in message, out
    assert r["initialized"] == "False", out
    assert r["cpu_still_works"] == "[2.0, 2.0]", out


@pytest.mark.slow
def test_fork_after_init_is_bad_fork():
    out = check_ok(
        run_python(
            """
            import os
            import torch

            def in_child(report):
                r, w = os.pipe()
                pid = os.fork()
                if pid == 0:
                    os.close(r)
                    try:
                        lines = report()
                    except BaseException as e:
                        lines = ["child_crash=" + repr(e)]
                    os.write(w, ("\\n".join(lines) + "\\n").encode())
                    os._exit(0)
                os.close(w)
                chunks = []
                while True:
                    data = os.read(r, 65536)
                    if not data:
                        break
                    chunks.append(data)
                os.close(r)
                _, status = os.waitpid(pid, 0)
                print(b"".join(chunks).decode(), end="")
                print("status=", status)

            def before_init():
                x = torch.ones(2, device="openreg") + 1
                return ["pre_bad_fork=%s" % torch.openreg._is_in_bad_fork(),
                        "pre_values=%s" % x.cpu().tolist()]

            # a child of a parent that never used openreg may use it
            print("parent_initialized_before=", torch.openreg.is_initialized())
            in_child(before_init)

            x = torch.ones(2, device="openreg")
            print("parent_bad_fork=", torch.openreg._is_in_bad_fork())

            def after_init():
                lines = ["child_bad_fork=%s" % torch.openreg._is_in_bad_fork(),
                         "child_initialized=%s" % torch.openreg.is_initialized()]
                try:
                    torch.ones(2, device="openreg")
                except RuntimeError as e:
                    lines.append("child_err=" + " ".join(str(e).split()))
                else:
                    lines.append("child_err=none")
                lines.append("child_cpu=%s" % (torch.ones(2) * 3).tolist())
                return lines

            in_child(after_init)
            print("parent_after=", (x + 1).cpu().tolist())
            print("parent_bad_fork_after=", torch.openreg._is_in_bad_fork())
            """
        )
    )
    r = parse_key_values(out)
    assert r["parent_initialized_before"] == "False", out
    assert r["pre_bad_fork"] == "False", out
    assert r["pre_values"] == "[2.0, 2.0]", out
    assert r["parent_bad_fork"] == "False", out
    assert r["child_bad_fork"] == "True", out
    assert r["child_initialized"] == "False", out
    assert "fork" in r["child_err"], out
    assert r["child_cpu"] == "[3.0, 3.0]", out
    assert "child_crash" not in out, out
    assert out.count("status= 0") == 2, out
    assert r["parent_after"] == "[2.0, 2.0]", out
    assert r["parent_bad_fork_after"] == "False", out
