"""examples/compile_training.py: compiled training on openreg follows the CPU's loss curves."""

import importlib.util
import os
import subprocess
import sys
import tempfile

import pytest

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "compile_training.py")


def _example_module():
    spec = importlib.util.spec_from_file_location("compile_training", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.long
def test_compiled_loss_curves_agree():
    proc = subprocess.run(
        [sys.executable, EXAMPLE, "--steps", "20"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tempfile.gettempdir(),
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    for model in ("small CNN", "small transformer"):
        assert f"{model}: identical bit for bit" in proc.stdout or f"{model}: agree within tolerance" in proc.stdout
    assert proc.stdout.count("\n  19  ") == 2, proc.stdout  # 20 steps of each model


def test_disagreement_is_reported(capsys):
    example = _example_module()
    assert example.compare("model", [1.0, 0.5], [1.0, 0.5]) is True
    assert "model: identical bit for bit" in capsys.readouterr().out
    assert example.compare("model", [1.0, 0.5], [1.0, 0.5 + 1e-3]) is False
    output = capsys.readouterr().out
    assert "MISMATCH" in output and "model: DISAGREE" in output
