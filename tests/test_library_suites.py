"""``python -m torch_openreg.testing libraries``: a library's own test suite on the CPU and on openreg.

The comparison is proven on a suite the project writes (tests/library_suite_demo/demo_library_suite.py, with timm's
device switch): tests that pass on both, one that fails on openreg only because of a real device bug, one that a
device-name table breaks, one that runs on openreg only. The device spec of transformers' and diffusers' suites is
checked against openreg's functions and through the loaders' file-name rule, and through transformers' own loader
where transformers is installed."""

import importlib
import json
import os
import shutil
import sys

import pytest
import torch

from conftest import check_ok
from torch_openreg.testing import device_spec, libraries
from torch_openreg.testing.__main__ import main

DEMO = os.path.join(os.path.dirname(__file__), "library_suite_demo")


def in_scratch(tmp_path, monkeypatch, *names):
    """The demo files copied to a directory outside the repository (no conftest, no pytest configuration)."""
    for name in names:
        shutil.copy(os.path.join(DEMO, name), tmp_path)
    monkeypatch.chdir(tmp_path)


@pytest.mark.slow
@pytest.mark.long
def test_compare_lists_what_passes_on_the_cpu_and_fails_on_openreg(tmp_path, monkeypatch, capfd):
    in_scratch(tmp_path, monkeypatch, "demo_library_suite.py")
    report = tmp_path / "report.json"
    code = main(["libraries", "compare", "--report", str(report), "timm", "demo_library_suite.py", "-q"])
    output = capfd.readouterr().out
    assert code == 1, output  # a test passed on the CPU and failed on openreg
    assert "cpu: 5 passed, 0 failed, 1 skipped, 0 xfail" in output, output
    assert "openreg: 4 passed, 2 failed, 0 skipped, 0 xfail" in output, output
    found = json.loads(report.read_text())["differences"]
    assert found["passed on cpu, failed on openreg"] == [
        "demo_library_suite.py::test_forward_with_host_input",
        "demo_library_suite.py::test_half_precision_tolerance",
    ]
    assert found["skipped on cpu, ran on openreg"] == ["demo_library_suite.py::test_moves_to_the_accelerator"]
    assert not any(found[kind] for kind in found if kind.split(",")[0] not in ("passed on cpu", "skipped on cpu"))
    outcomes = json.loads(report.read_text())["outcomes"]["openreg"]
    # the device bug is refused as a GPU refuses it: a CPU input against device weights
    assert "weight type" in outcomes["demo_library_suite.py::test_forward_with_host_input"]["message"]
    assert "not close" in outcomes["demo_library_suite.py::test_half_precision_tolerance"]["message"]


def outcome(*statuses):
    return {f"t{index}": {"status": status, "message": ""} for index, status in enumerate(statuses) if status}


def test_differences_by_kind():
    cpu = outcome("passed", "passed", "failed", "skipped", "skipped", "passed", "xfail", "passed", None)
    device = outcome("passed", "failed", "passed", "passed", "skipped", "skipped", "xfail", None, "failed")
    found = libraries.differences({"cpu": cpu, "openreg": device})
    assert found == {
        "passed on cpu, failed on openreg": ["t1"],
        "failed on cpu, passed on openreg": ["t2"],
        "skipped on cpu, ran on openreg": ["t3"],
        "ran on cpu, skipped on openreg": ["t5"],
        "collected on cpu only": ["t7"],
        "collected on openreg only": ["t8"],
    }


def test_a_suite_without_a_device_switch_is_refused_with_the_reason():
    with pytest.raises(SystemExit, match="cpu_and_cuda"):
        main(["libraries", "compare", "torchvision", "test/test_ops.py"])
    with pytest.raises(SystemExit, match="unknown library 'numpy'"):
        main(["libraries", "env", "numpy"])


def test_the_switch_for_each_run():
    assert libraries.switch_environment("timm") == {"TORCH_DEVICE": "openreg"}
    assert libraries.switch_environment("timm", "cpu") == {"TORCH_DEVICE": "cpu"}
    assert libraries.switch_environment("accelerate", "cpu") == {"ACCELERATE_TORCH_DEVICE": None}
    assert libraries.switch_environment("transformers", "cpu") == {
        "TRANSFORMERS_TEST_DEVICE": "cpu",
        "TRANSFORMERS_TEST_DEVICE_SPEC": None,
    }


def test_the_device_spec_is_openregs_functions():
    assert device_spec.DEVICE_NAME == "openreg"
    assert device_spec.DEVICE_COUNT_FN() == torch.openreg.device_count() == 2
    device_spec.MANUAL_SEED_FN(7)  # openreg's generator: the CPU's numbers for a seed (OPENREG_RANDOM_STREAM=cpu)
    assert torch.equal(torch.rand(5, device="openreg").cpu(), torch.rand(5, generator=torch.Generator().manual_seed(7)))
    device_spec.EMPTY_CACHE_FN()
    device_spec.RESET_PEAK_MEMORY_STATS_FN()
    before = device_spec.MEMORY_ALLOCATED_FN()
    block = torch.empty(1 << 20, dtype=torch.uint8, device="openreg")
    device_spec.SYNCHRONIZE_FN()
    assert device_spec.MEMORY_ALLOCATED_FN() >= before + block.numel()
    assert device_spec.MAX_MEMORY_ALLOCATED_FN() >= before + block.numel()
    del block
    device_spec.RESET_MAX_MEMORY_ALLOCATED_FN()
    assert device_spec.MAX_MEMORY_ALLOCATED_FN() == device_spec.MEMORY_ALLOCATED_FN()


def test_env_writes_a_spec_file_the_loaders_can_import(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["libraries", "env", "transformers"]) == 0
    line = capsys.readouterr().out.strip()
    assert line == "export TRANSFORMERS_TEST_DEVICE=openreg TRANSFORMERS_TEST_DEVICE_SPEC=openreg_device_spec.py"
    path = line.split("TRANSFORMERS_TEST_DEVICE_SPEC=")[1]
    assert os.path.isfile(path)
    # transformers' and diffusers' loaders: import_module(path[:path.index(".py")]), the directory on sys.path
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, path[: path.index(".py")], raising=False)
    spec = importlib.import_module(path[: path.index(".py")])
    assert spec.DEVICE_NAME == "openreg" and spec.DEVICE_COUNT_FN is torch.openreg.device_count


@pytest.mark.slow
@pytest.mark.long
def test_transformers_reads_the_spec_through_the_plugin(tmp_path, monkeypatch):
    pytest.importorskip("transformers", reason="transformers is not installed")
    import subprocess

    in_scratch(tmp_path, monkeypatch, "demo_transformers_spec.py")
    command = [sys.executable, "-P", "-m", "pytest", "demo_transformers_spec.py", "-q", "-p", "no:cacheprovider"]
    command += ["-p", "torch_openreg.testing.library_plugin", "--openreg-library", "transformers"]
    check_ok(subprocess.run(command, capture_output=True, text=True, timeout=300))
    assert not (tmp_path / libraries.SPEC_FILE).exists()  # removed when pytest ended


def test_the_switch_of_a_suite_with_a_spec_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for variable in ("DIFFUSERS_TEST_DEVICE", "DIFFUSERS_TEST_DEVICE_SPEC"):
        monkeypatch.setenv(variable, "unset by the test")  # restored afterwards
    monkeypatch.setattr(sys, "path", list(sys.path))
    remove = libraries.apply_switch("diffusers")
    assert os.environ["DIFFUSERS_TEST_DEVICE"] == "openreg"
    path = os.environ["DIFFUSERS_TEST_DEVICE_SPEC"]
    assert path == "openreg_device_spec.py" and (tmp_path / path).is_file()
    # diffusers' reader: import_module(path[:path.index(".py")]), with nothing added to sys.path itself
    monkeypatch.delitem(sys.modules, path[: path.index(".py")], raising=False)
    spec = importlib.import_module(path[: path.index(".py")])
    assert spec.MAX_MEMORY_ALLOCATED_FN is torch.openreg.max_memory_allocated and spec.SUPPORTS_TRAINING
    remove()
    assert not (tmp_path / path).exists()
    # a file already there is the user's: used, and left in place
    (tmp_path / path).write_text("DEVICE_NAME = 'openreg'\n")
    libraries.apply_switch("diffusers")()
    assert (tmp_path / path).read_text() == "DEVICE_NAME = 'openreg'\n"
    # the CPU run sets the CPU and unsets the spec
    libraries.apply_switch("diffusers", "cpu")
    assert os.environ["DIFFUSERS_TEST_DEVICE"] == "cpu" and "DIFFUSERS_TEST_DEVICE_SPEC" not in os.environ
