"""The compile suite (``python -m torch_openreg.testing compile``): its CI slice, tolerances and pair counts."""

import re

import pytest
import torch

from torch_openreg.testing import compile as compile_suite
from torch_openreg.testing import opinfo, quick
from torch_openreg.testing.__main__ import main

COUNTS = re.compile(r"^(\d+) passed, (\d+) failed, (\d+) skipped$", re.MULTILINE)


@pytest.mark.long
def test_quick_slice_passes_compiled(capsys, tmp_path):
    report = tmp_path / "report.json"
    code = main(["compile", "--quick", "--report", str(report)])
    output = capsys.readouterr().out
    passed, failed, _ = map(int, COUNTS.findall(output)[-1])
    assert failed == 0 and code == 0, output
    # Forward and backward of every operator of the slice ran compiled on both devices.
    assert passed >= len(quick.COMPILE_OPS), output
    assert "pass compiled on the CPU" in output
    assert report.exists()


def test_quick_slice_names_exist():
    assert sorted(quick.COMPILE_OPS - set(opinfo.ops_by_name())) == []


def test_tolerances_are_inductors():
    ops = opinfo.ops_by_name()
    assert compile_suite.inductor_tolerances(ops["add"], torch.float32) == {"rtol": 1.3e-5, "atol": 1.5e-5}
    assert compile_suite.inductor_tolerances(ops["add"], torch.float64) == {"rtol": 1e-7, "atol": 1e-7}
    # conv2d's OpInfo raises half precision's atol for TestInductorOpInfo on the CPU.
    conv_half = compile_suite.inductor_tolerances(ops["nn.functional.conv2d"], torch.float16)
    assert conv_half["atol"] > compile_suite.inductor_tolerances(ops["add"], torch.float16)["atol"]


def _case(dtype, status, message=""):
    return {"dtype": dtype, "status": status, "message": message}


def test_pair_summary_counts_only_pairs_that_pass_compiled_on_cpu():
    groups = {
        "a": {"cases": [_case("float32", "passed"), _case("float32", "passed"), _case("int64", "failed", "x")]},
        "b": {"cases": [_case("float32", "passed"), _case("float32", "skipped", compile_suite.CPU_DIFFERS + ": y")]},
        "c": {"cases": [_case("float32", "passed"), _case("float32", "xfail")]},
        "d": {"cases": [_case("float32", "skipped", "no differentiable output or input")]},
    }
    summary = compile_suite.pair_summary(groups)
    assert summary == {"pairs": 5, "pass_compiled_on_cpu": 3, "pass_on_openreg": 1, "cpu_differs": 1}
    assert "3 pass compiled on the CPU, 1 of them on openreg too (33.33%)" in compile_suite.summary_line(summary)


def test_unknown_backend_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["compile", "--backend", "no_such_backend"])
    assert exit_info.value.code == 2
    assert "unknown torch.compile backend 'no_such_backend'" in capsys.readouterr().err


@pytest.mark.long
def test_aoti_mode_compiles_packages_for_both_devices(capsys):
    """--aoti: each forward case exported, compiled into an AOTInductor package for the CPU and one for openreg,
    loaded and run; no backward cases."""
    code = main(["compile", "--aoti", "--ops", "^(add|softmax)$", "--dtypes", "float32", "--max-samples", "1", "-v"])
    output = capsys.readouterr().out
    assert code == 0, output
    assert COUNTS.findall(output)[-1] == ("2", "0", "0"), output
    assert "compile:softmax:forward:float32:0" in output and ":backward:" not in output
    assert "2 pass compiled on the CPU, 2 of them on openreg too (100.00%)" in output


def test_aoti_mode_and_a_backend_exclude_each_other(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["compile", "--aoti", "--backend", "inductor"])
    assert exit_info.value.code == 2
    assert "--aoti compiles with AOTInductor: it takes no --backend" in capsys.readouterr().err
