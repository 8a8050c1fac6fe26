"""OPENREG_MEMORY_PROTECTION: device memory is not host-readable (by default).

With protection on, a host dereference of a device pointer faults, as on real
hardware; everything PyTorch does with openreg tensors must therefore go
through the runtime (copies, scoped host views) and never touch the device
pointer directly. The in-process tests run with the default (protection on)
and would crash the test process if some path read device memory directly.
"""

import io
import os
import signal

import pytest
import torch

from conftest import DEVICE, assert_close, assert_same, check_ok, make_cpu, run_python


def dev(t):
    return t.to(DEVICE)


# --------------------------------------------------------------------------
# Subprocesses: a raw host read of device memory
# --------------------------------------------------------------------------

_RAW_READ = """
import ctypes, sys
import torch
x = torch.tensor([1.5, -2.0, 3.25], device="openreg")
y = x * 2  # a fallback result, in fresh device memory
print("ready", flush=True)
raw = ctypes.string_at(x.data_ptr(), 12)
print("x_bytes=" + raw.hex(), flush=True)
print("y_bytes=" + ctypes.string_at(y.data_ptr(), 12).hex(), flush=True)
# a host write through the pointer is seen by the device tensor
src = torch.tensor([42.0]).numpy().tobytes()
ctypes.memmove(y.data_ptr() + 4, src, 4)
print("y_after_write=" + repr(y.cpu().tolist()), flush=True)
"""


@pytest.mark.slow
def test_protected_device_memory_faults_on_host_read():
    proc = run_python(_RAW_READ, OPENREG_MEMORY_PROTECTION=None)
    assert "ready" in proc.stdout, proc.stderr
    assert "x_bytes=" not in proc.stdout
    assert proc.returncode == -signal.SIGSEGV, (proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.slow
def test_explicit_protection_on_faults():
    proc = run_python(_RAW_READ, OPENREG_MEMORY_PROTECTION="1")
    assert "ready" in proc.stdout, proc.stderr
    assert proc.returncode == -signal.SIGSEGV, (proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.slow
def test_unprotected_device_memory_is_host_readable():
    out = check_ok(run_python(_RAW_READ, OPENREG_MEMORY_PROTECTION="0"))
    r = dict(l.split("=", 1) for l in out.splitlines() if "=" in l)
    x = torch.tensor([1.5, -2.0, 3.25])
    assert r["x_bytes"] == x.numpy().tobytes().hex()
    assert r["y_bytes"] == (x * 2).numpy().tobytes().hex()
    assert r["y_after_write"] == repr([3.0, 42.0, 6.5])


# --------------------------------------------------------------------------
# In process, protection on: nothing reads device memory behind the runtime
# --------------------------------------------------------------------------


def test_default_environment_is_protected():
    # The in-process tests below are only meaningful with protection on.
    assert os.environ.get("OPENREG_MEMORY_PROTECTION", "1") != "0"


def test_fallback_ops_and_copies():
    cpu = make_cpu((4, 5), torch.float32)
    xd = dev(cpu)
    assert_same(xd.exp() + xd * 2, cpu.exp() + cpu * 2)
    assert_same(xd.sum(dim=1), cpu.sum(dim=1))
    assert_same(xd @ xd.t(), cpu @ cpu.t())
    # copies both ways, plain and strided, and between devices
    assert torch.equal(xd.cpu(), cpu)
    assert torch.equal(xd.t().cpu(), cpu.t())
    assert torch.equal(xd[:, ::2].cpu(), cpu[:, ::2])
    host = torch.empty(5, 4)
    host.copy_(xd.t())
    assert torch.equal(host, cpu.t())
    assert_same(xd.to("openreg:1"), cpu)
    assert_same(xd.to(torch.float64), cpu.double())


def test_printing_item_tolist():
    cpu = make_cpu((3, 4), torch.float32)
    xd = dev(cpu)
    assert repr(xd).replace(", device='openreg:0'", "") == repr(cpu)
    assert str(dev(torch.tensor([1, 2, 3]))) == "tensor([1, 2, 3], device='openreg:0')"
    assert xd[1, 2].item() == cpu[1, 2].item()
    assert xd.tolist() == cpu.tolist()
    assert dev(torch.tensor(7)).tolist() == 7
    assert float(xd[0, 0]) == float(cpu[0, 0])
    assert int(dev(torch.tensor([5]))) == 5


def test_inplace_writes_through_views():
    cpu = make_cpu((4, 4), torch.float32)
    xd = dev(cpu)
    xd[1:3].mul_(2)
    cpu[1:3].mul_(2)
    xd.t().add_(1)
    cpu.t().add_(1)
    xd[:, 0] = 5.0
    cpu[:, 0] = 5.0
    xd.diagonal().zero_()
    cpu.diagonal().zero_()
    xd[0, 1:3] = dev(torch.tensor([8.0, 9.0]))
    cpu[0, 1:3] = torch.tensor([8.0, 9.0])
    assert_same(xd, cpu)


def test_fft():
    x = make_cpu((16,), torch.float32)
    assert_close(torch.fft.fft(dev(x)), torch.fft.fft(x))
    assert_close(torch.fft.irfft(torch.fft.rfft(dev(x))), torch.fft.irfft(torch.fft.rfft(x)))


def test_resize_growth_then_read():
    cpu = make_cpu((6,), torch.float32)
    xd = dev(cpu)
    xd.resize_(3, 50)
    assert torch.equal(xd.view(-1)[:6].cpu(), cpu)
    xd.view(-1)[6:].fill_(1.0)
    expected = torch.cat([cpu, torch.ones(144)]).view(3, 50)
    assert_same(xd, expected)
    assert_same(xd.sum(dim=1), expected.sum(dim=1))


def test_save_load_roundtrip():
    cpu = make_cpu((3, 4), torch.float32)
    xd = dev(cpu)
    payload = {"x": xd, "view": xd[:, 1], "t": xd.t(), "ints": dev(torch.arange(5))}
    buf = io.BytesIO()
    torch.save(payload, buf)
    # onto the CPU
    buf.seek(0)
    loaded = torch.load(buf, map_location="cpu")
    assert loaded["x"].device.type == "cpu"
    assert torch.equal(loaded["x"], cpu)
    assert torch.equal(loaded["view"], cpu[:, 1])
    assert torch.equal(loaded["t"], cpu.t())
    assert torch.equal(loaded["ints"], torch.arange(5))
    # views still share their storage after loading, as on the CPU
    assert loaded["view"].untyped_storage().data_ptr() == loaded["x"].untyped_storage().data_ptr()
    # back onto openreg (its saved device) and onto another device
    buf.seek(0)
    back = torch.load(buf)
    assert_same(back["x"], cpu)
    assert_same(back["t"], cpu.t())
    assert back["view"].untyped_storage().data_ptr() == back["x"].untyped_storage().data_ptr()
    buf.seek(0)
    moved = torch.load(buf, map_location="openreg:1")
    assert moved["x"].device == torch.device("openreg:1")
    assert torch.equal(moved["x"].cpu(), cpu)


def test_storage_level_ops():
    cpu = make_cpu((6,), torch.float32)
    xd = dev(cpu)
    s = xd.untyped_storage()
    assert bytes(s.cpu()) == bytes(cpu.untyped_storage())
    s.resize_(48)
    assert s.nbytes() == 48
    assert bytes(s.cpu())[:24] == bytes(cpu.untyped_storage())
    s.resize_(8)
    assert s.nbytes() == 8
    assert bytes(s.cpu()) == bytes(cpu.untyped_storage())[:8]
    s2 = dev(cpu).untyped_storage()
    s2.fill_(0)
    assert bytes(s2.cpu()) == bytes(24)
    c = dev(cpu).untyped_storage().copy_(cpu.untyped_storage())
    assert bytes(c.cpu()) == bytes(cpu.untyped_storage())


def test_comparisons_sort_and_selection():
    cpu = make_cpu((5, 6), torch.float32)
    xd = dev(cpu)
    assert torch.equal(xd, dev(cpu.clone()))
    assert not torch.equal(xd, dev(cpu + 1))
    assert_same(xd > 0, cpu > 0)
    assert_same(xd == xd[0], cpu == cpu[0])
    assert_same(torch.isclose(xd, xd + 1e-9), torch.isclose(cpu, cpu + 1e-9))
    assert torch.allclose(xd, dev(cpu))
    v, i = torch.sort(xd, dim=1)
    vc, ic = torch.sort(cpu, dim=1)
    assert_same(v, vc)
    assert_same(i, ic)
    assert_same(torch.nonzero(xd > 0.5), torch.nonzero(cpu > 0.5))
    assert_same(torch.masked_select(xd, dev(cpu < 0)), torch.masked_select(cpu, cpu < 0))
    assert_same(xd[xd > 0], cpu[cpu > 0])
    assert bool((xd > -100).all())
    assert (xd > 0).any().item() == (cpu > 0).any().item()
    assert_same(torch.argsort(xd.view(-1)), torch.argsort(cpu.view(-1)))
