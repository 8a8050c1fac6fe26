"""Misuse gives a clear Python exception, and the process keeps working."""

import gc

import pytest
import torch

from conftest import DEVICE, assert_same, check_ok, make_cpu, run_python


def _still_works():
    """A few device ops after an error, compared with the CPU."""
    cpu = make_cpu((3, 4), torch.float32, seed=99)
    x = cpu.to(DEVICE)
    assert_same(x * 2 + 1, cpu * 2 + 1)
    assert_same(x.sum(dim=0), cpu.sum(dim=0))
    assert_same(x @ x.t(), cpu @ cpu.t())
    assert x[1, 2].item() == cpu[1, 2].item()


def test_invalid_device_index():
    with pytest.raises(RuntimeError) as info:
        torch.ones(2, device="openreg:99")
    message = str(info.value)
    assert "99" in message
    assert "2 openreg devices" in message
    with pytest.raises(RuntimeError, match="99"):
        torch.ones(2).to("openreg:99")
    with pytest.raises(RuntimeError, match="Invalid openreg device index 2"):
        torch.empty(3, device="openreg:2")
    with pytest.raises(RuntimeError):
        torch.device("openreg:-1")
    _still_works()


def test_set_device_out_of_range(restore_device):
    with pytest.raises(RuntimeError, match=r"Invalid openreg device index 5.*valid indices are 0\.\.1"):
        torch.openreg.set_device(5)
    assert torch.openreg.current_device() == 0
    _still_works()


def test_mixed_openreg_and_cpu_binary_op():
    x = torch.ones(3, device=DEVICE)
    y = torch.ones(3)
    for fn in (
        lambda: x + y,
        lambda: y * x,
        lambda: torch.maximum(x, y),
        lambda: x.add_(y),
        lambda: torch.where(x > 0, x, y),
        lambda: torch.cat([x, y]),
    ):
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            fn()
    # x was not modified by the failed in-place op
    assert_same(x, torch.ones(3))
    _still_works()


def test_mixed_matmul():
    a = torch.ones(2, 3, device=DEVICE)
    b = torch.ones(3, 2)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a @ b
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        b.t() @ a.t()
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.addmm(torch.ones(2, 2, device=DEVICE), a, b)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.nn.functional.linear(a, torch.ones(4, 3))
    _still_works()


def test_invalid_sparse_tensors_are_rejected():
    with pytest.raises(RuntimeError, match="size is inconsistent with indices"):
        torch.sparse_coo_tensor(
            torch.tensor([[0, 5]]), torch.tensor([1.0, 2.0]), (3,), device=DEVICE, check_invariants=True
        )
    _still_works()
    with pytest.raises(RuntimeError, match="crow_indices"):
        torch.sparse_csr_tensor(
            torch.tensor([0, 2, 1]),
            torch.tensor([0, 1]),
            torch.tensor([1.0, 2.0]),
            (2, 2),
            device=DEVICE,
            check_invariants=True,
        )
    _still_works()


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="this PyTorch build has no mkldnn")
def test_unsupported_layouts_are_rejected():
    x = torch.ones(2, 2, device=DEVICE)
    with pytest.raises(NotImplementedError, match="layout Mkldnn") as info:
        x.to_mkldnn()
    assert "openreg" in str(info.value)
    # the dense tensor involved is intact
    assert_same(x, torch.ones(2, 2))
    _still_works()


def test_pin_memory_factory_argument():
    for factory in (
        lambda: torch.empty(2, device=DEVICE, pin_memory=True),
        lambda: torch.zeros(2, 3, device=DEVICE, pin_memory=True),
        lambda: torch.empty_strided((2,), (1,), device=DEVICE, pin_memory=True),
    ):
        with pytest.raises(RuntimeError, match="pin"):
            factory()
    _still_works()


def _settled_memory_allocated():
    # Tensors of earlier tests that sit in reference cycles (tracebacks, ...)
    # would otherwise be freed at some later gc pass, moving the baseline.
    gc.collect()
    return torch.accelerator.memory_allocated()


@pytest.mark.slow
def test_out_of_memory_in_process():
    baseline = _settled_memory_allocated()
    with pytest.raises(torch.OutOfMemoryError) as info:
        torch.empty(2**40, device=DEVICE)
    message = str(info.value)
    assert "4096.00 GiB" in message  # the request
    assert "8.00 GiB" in message  # the capacity
    assert "openreg" in message
    assert isinstance(info.value, RuntimeError)
    assert torch.accelerator.memory_allocated() == baseline
    with pytest.raises(torch.OutOfMemoryError, match="openreg:1"):
        torch.empty(2**38, dtype=torch.float32, device="openreg:1")
    assert torch.accelerator.memory_allocated() == baseline
    _still_works()


@pytest.mark.slow
def test_out_of_memory_small_device():
    out = check_ok(
        run_python(
            """
            import torch
            MiB = 2 ** 20
            base = torch.accelerator.memory_allocated()
            print("base=", base)
            a = torch.empty(10 * MiB, dtype=torch.uint8, device="openreg")
            print("after_a=", torch.accelerator.memory_allocated() - base)
            try:
                b = torch.empty(10 * MiB, dtype=torch.uint8, device="openreg")
            except torch.OutOfMemoryError as e:
                print("oom2=", " ".join(str(e).split()))
            else:
                print("oom2=none")
            print("after_oom=", torch.accelerator.memory_allocated() - base)
            del a
            print("after_del=", torch.accelerator.memory_allocated() - base)
            c = torch.empty(10 * MiB, dtype=torch.uint8, device="openreg")
            c.fill_(7)
            print("c_ok=", c[-1].item(), c.sum(dtype=torch.int64).item() == 70 * MiB)
            del c
            print("after_del_c=", torch.accelerator.memory_allocated() - base)
            # a fallback op whose result does not fit
            x = torch.ones(12 * MiB // 4, device="openreg")
            try:
                z = x * 2
            except torch.OutOfMemoryError as e:
                print("oom_op=", type(e).__name__)
            else:
                print("oom_op=none")
            print("after_op=", torch.accelerator.memory_allocated() - base)
            print("x_intact=", x[0].item() == 1 and x[-1].item() == 1)
            del x
            print("final=", torch.accelerator.memory_allocated() - base)
            print("works=", (torch.arange(4, device="openreg") * 3).cpu().tolist())
            """,
            OPENREG_DEVICE_MEMORY="16M",
        )
    )
    r = {k.strip(): v.strip() for k, _, v in (l.partition("=") for l in out.splitlines() if "=" in l)}
    MiB = 2**20
    assert int(r["base"]) == 0, out
    assert int(r["after_a"]) == 10 * MiB, out
    assert r["oom2"] != "none", out
    assert "10.00 MiB" in r["oom2"], out
    assert "16.00 MiB" in r["oom2"], out
    assert int(r["after_oom"]) == 10 * MiB, out
    assert int(r["after_del"]) == 0, out
    assert r["c_ok"] == "7 True", out
    assert int(r["after_del_c"]) == 0, out
    assert r["oom_op"] == "OutOfMemoryError", out
    assert int(r["after_op"]) == 12 * MiB, out
    assert r["x_intact"] == "True", out
    assert int(r["final"]) == 0, out
    assert r["works"] == "[0, 3, 6, 9]", out


@pytest.mark.slow
def test_small_device_serves_requests_that_fit():
    # Requests between 1 and 10 MiB must not need more than the device has:
    # an empty 16 MiB device holds a 3 MiB tensor and a second one from an op.
    out = check_ok(
        run_python(
            """
            import torch
            MiB = 2 ** 20
            for what, fn in [
                ("alloc3", lambda: torch.empty(3 * MiB, dtype=torch.uint8, device="openreg")),
                ("alloc3_op", lambda: torch.ones(3 * MiB // 4, device="openreg") + 1),
                ("alloc1_5", lambda: torch.zeros(3 * MiB // 2, dtype=torch.uint8, device="openreg")),
            ]:
                try:
                    t = fn()
                except torch.OutOfMemoryError as e:
                    print(what + "=", " ".join(str(e).split()))
                else:
                    print(what + "= ok", t.numel())
                    del t
            """,
            OPENREG_DEVICE_MEMORY="16M",
        )
    )
    r = {k.strip(): v.strip() for k, _, v in (l.partition("=") for l in out.splitlines() if "=" in l)}
    assert r["alloc3"] == f"ok {3 * 2**20}", out
    assert r["alloc3_op"] == f"ok {3 * 2**20 // 4}", out
    assert r["alloc1_5"] == f"ok {3 * 2**20 // 2}", out


def test_memory_allocated_returns_to_baseline():
    baseline = _settled_memory_allocated()
    x = torch.zeros(1000, device=DEVICE)
    assert torch.accelerator.memory_allocated() >= baseline + 4000
    y = x + 1
    z = y.t() if y.dim() == 2 else y[::2]  # a view allocates nothing
    assert torch.accelerator.memory_allocated() >= baseline + 8000
    del x, y, z
    assert torch.accelerator.memory_allocated() == baseline


def test_numpy_raises_type_error():
    x = torch.ones(3, device=DEVICE)
    with pytest.raises(TypeError, match="openreg"):
        x.numpy()
    import numpy as np

    with pytest.raises(TypeError):
        np.asarray(x)
    # .cpu().numpy() is the way
    assert x.cpu().numpy().tolist() == [1.0, 1.0, 1.0]
    _still_works()


@pytest.mark.parametrize("name", ["aten::_cudnn_rnn_flatten_weight", "aten::_fused_dropout", "aten::cudnn_convolution"])
def test_op_without_cpu_kernel(name):
    assert not torch._C._dispatch_has_kernel_for_dispatch_key(name, "CPU")
    op_name = name.split("::")[1]
    x = torch.ones(1, 1, 3, 3, device=DEVICE)
    calls = {
        "_cudnn_rnn_flatten_weight": lambda: torch.ops.aten._cudnn_rnn_flatten_weight(
            [torch.ones(8, 2, device=DEVICE)], 2, 2, 2, 4, 0, 1, False, False
        ),
        "_fused_dropout": lambda: torch.ops.aten._fused_dropout(torch.ones(3, device=DEVICE), 0.5),
        "cudnn_convolution": lambda: torch.ops.aten.cudnn_convolution(
            x, torch.ones(1, 1, 1, 1, device=DEVICE), [0, 0], [1, 1], [1, 1], 1, False, False, False
        ),
    }
    with pytest.raises(NotImplementedError) as info:
        calls[op_name]()
    message = str(info.value)
    assert name in message
    assert "openreg" in message
    _still_works()


def test_shape_errors_match_cpu():
    x = torch.ones(2, 3, device=DEVICE)
    with pytest.raises(RuntimeError, match="negative dimension"):
        torch.empty(-1, device=DEVICE)
    with pytest.raises(RuntimeError, match="must match the size"):
        x + torch.ones(4, device=DEVICE)
    with pytest.raises(RuntimeError, match="shape '\\[4\\]' is invalid"):
        x.view(4)
    with pytest.raises(RuntimeError):
        x.copy_(torch.ones(4))
    with pytest.raises(IndexError):
        x[5]
    with pytest.raises(IndexError):
        x[torch.tensor([7], device=DEVICE)]
    assert_same(x, torch.ones(2, 3))
    _still_works()


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("shape", [(), (3,), (2, 0), (1, 2, 3, 4)])
def test_max_pool1d_refuses_a_bad_input_with_the_cpu_message(shape, requires_grad):
    messages = []
    for device in ("cpu", DEVICE):
        x = torch.ones(shape, device=device, requires_grad=requires_grad)
        with pytest.raises(RuntimeError) as error:
            torch.nn.functional.max_pool1d(x, 1)
        messages.append(str(error.value))
    assert messages[1] == messages[0]
    assert messages[0].startswith("max_pool1d: Expected 2D or 3D (batch mode) tensor")
