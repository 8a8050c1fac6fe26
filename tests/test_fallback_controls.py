"""Observing and controlling the CPU fallback: per-operator counters,
OPENREG_FALLBACK_WARN, OPENREG_FALLBACK=0 (strict) and OPENREG_FALLBACK_OPS.
The environment is read once per process, so those run in a child."""

import pytest
import torch

from conftest import check_ok, make_cpu, run_python

DEV = "openreg"


def test_counters_count_each_fallback_call_and_reset():
    x = make_cpu((4, 5), torch.float32).to(DEV)
    torch.openreg.reset_fallback_stats()
    assert torch.openreg.fallback_stats() == {}
    torch.atan2(x, x)
    torch.atan2(x, x)
    x.cumsum(0)
    stats = torch.openreg.fallback_stats()
    assert stats["aten::atan2"] == 2
    assert stats["aten::cumsum.out"] == 1
    torch.openreg.reset_fallback_stats()
    assert torch.openreg.fallback_stats() == {}


def test_kernels_and_views_do_not_count():
    x = make_cpu((4, 5), torch.float32).to(DEV)
    image = make_cpu((1, 1, 3, 3), torch.float32).to(DEV)
    kernel = make_cpu((1, 1, 2, 2), torch.float32).to(DEV)
    torch.openreg.reset_fallback_stats()
    x.view(20)
    x.t().contiguous()  # copy through _copy_from
    x.sin(), x + x, x.sum()  # stub kernels
    torch.nn.functional.conv2d(image, kernel)  # convolution_overrideable
    assert torch.openreg.fallback_stats() == {}


@pytest.mark.slow
def test_warn_once_per_operator():
    out = check_ok(
        run_python(
            """
        import warnings, torch
        x = torch.ones(3, device="openreg")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.atan2(x, x); torch.atan2(x, x); x.cumsum(0)
        messages = [str(w.message) for w in caught if "CPU fallback" in str(w.message)]
        print(len([m for m in messages if "atan2" in m]), len([m for m in messages if "cumsum" in m]))
        """,
            OPENREG_FALLBACK_WARN="1",
        )
    )
    assert out.split() == ["1", "1"]


@pytest.mark.slow
def test_strict_mode_names_the_missing_operator_and_keeps_kernels_working():
    out = check_ok(
        run_python(
            """
        import torch
        x = torch.empty(3, device="openreg")          # openreg kernel
        y = (x.copy_(torch.arange(3.)) * 2).sin()      # copy + stub kernels
        print(y.cpu().tolist() == (torch.arange(3.) * 2).sin().tolist())
        try:
            torch.atan2(x, x)
        except NotImplementedError as error:
            print("raised:", error)
        """,
            OPENREG_FALLBACK="0",
        )
    )
    lines = out.strip().splitlines()
    assert lines[0] == "True"
    assert "aten::atan2" in lines[1] and "OPENREG_FALLBACK=0" in lines[1]


@pytest.mark.slow
def test_forced_operators_run_on_the_fallback_and_stay_correct():
    out = check_ok(
        run_python(
            """
        import torch
        a = torch.arange(6.).reshape(2, 3)
        x = a.to("openreg")
        torch.openreg.reset_fallback_stats()
        ok = torch.equal((x * 2).cpu(), a * 2) and torch.equal(x.view(3, 2).cpu(), a.view(3, 2))
        print(ok, sorted(torch.openreg.fallback_stats()))
        """,
            OPENREG_FALLBACK_OPS="mul.Tensor, aten::view",
        )
    )
    ok, ops = out.strip().split(" ", 1)
    assert ok == "True"
    assert "'aten::mul.Tensor'" in ops and "'aten::view'" in ops
