"""The package as a user meets it: started from a source checkout, and its command line.

The checkout tests build nothing: the source folder ``torch_openreg/`` is
copied without its native libraries into a temporary "repository root", and
the package this test process imported stands for the installed copy.
"""
import os
import shutil
import subprocess
import sys

import pytest

import torch_openreg

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_PACKAGE = os.path.join(REPO_ROOT, "torch_openreg")
INSTALLED_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(torch_openreg.__file__)))


@pytest.fixture
def unbuilt_checkout(tmp_path):
    """A repository root whose torch_openreg/ has no built extension, and a tests/ folder."""
    shutil.copytree(
        SOURCE_PACKAGE, tmp_path / "torch_openreg", ignore=shutil.ignore_patterns("*.so", "__pycache__")
    )
    shutil.copytree(os.path.join(REPO_ROOT, "tests"), tmp_path / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(REPO_ROOT, "pyproject.toml"), tmp_path)
    return tmp_path


def run_in(cwd, *args, pythonpath=INSTALLED_PARENT, timeout=300):
    """``python *args`` started in ``cwd``, which (as for any ``python -c`` or ``-m``) comes first on sys.path."""
    env = {**os.environ, "PYTHONPATH": pythonpath}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_import_torch_in_an_unbuilt_checkout_uses_the_installed_package(unbuilt_checkout):
    result = run_in(
        unbuilt_checkout,
        "-c",
        "import torch, torch_openreg\n"
        "x = torch.arange(4.0, device='openreg')\n"
        "print('device', (x * 2).device)\n"
        "print('values', (x * 2).cpu().tolist())\n"
        "print('package', torch_openreg.__file__)\n",
    )
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert lines["device"] == "openreg:0"
    assert lines["values"] == "[0.0, 2.0, 4.0, 6.0]"
    assert not lines["package"].startswith(str(unbuilt_checkout))


def test_pytest_collects_in_an_unbuilt_checkout(unbuilt_checkout):
    result = run_in(unbuilt_checkout, "-m", "pytest", "--collect-only", "-q", "tests/test_minimal_ops.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "tests collected" in result.stdout


def test_unbuilt_checkout_without_an_installed_copy_says_how_to_build(unbuilt_checkout):
    # No other torch_openreg on sys.path (nor torch beside it): the package's first statement must explain.
    result = run_in(
        unbuilt_checkout,
        "-c",
        "import os, sys\n"
        "sys.path[:] = [p for p in sys.path if p == '' or not os.path.isdir(os.path.join(p, 'torch_openreg'))]\n"
        "import torch_openreg\n",
        pythonpath="",
    )
    assert result.returncode != 0
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("ImportError: ")
    assert "no built extension" in last_line
    assert "`pip install .`" in last_line
    assert "`python setup.py build_ext --inplace`" in last_line


@pytest.mark.parametrize("command", [[], ["opinfo"], ["external"]])
def test_testing_command_help_is_plain_text(command, tmp_path):
    result = run_in(tmp_path, "-m", "torch_openreg.testing", *command, "--help")
    assert result.returncode == 0, result.stderr
    assert "usage: python -m torch_openreg.testing" in result.stdout
    assert "``" not in result.stdout


def test_testing_command_without_its_extra_names_the_install_command(tmp_path):
    # A None entry in sys.modules makes the module absent, as after a plain `pip install .`.
    result = run_in(
        tmp_path,
        "-c",
        "import runpy, sys\n"
        "sys.modules['expecttest'] = None\n"
        "sys.argv = ['torch_openreg.testing', 'opinfo', '--quick']\n"
        "runpy.run_module('torch_openreg.testing', run_name='__main__', alter_sys=True)\n",
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        "python -m torch_openreg.testing needs the 'testing' extra (expecttest not installed): "
        'pip install "torch_openreg[testing]", or from a checkout pip install ".[testing]"'
    )


def test_runtime_is_its_own_library_usable_without_torch(tmp_path):
    # As a vendor's driver runtime: libopenreg.so beside the extension, loadable with no torch in the process.
    result = run_in(
        tmp_path,
        "-c",
        "import ctypes, importlib.util, os, sys\n"
        "package_dir = importlib.util.find_spec('torch_openreg').submodule_search_locations[0]\n"
        "runtime = ctypes.CDLL(os.path.join(package_dir, 'libopenreg.so'))\n"
        "count = ctypes.c_int(-1)\n"
        "print('status', runtime.orGetDeviceCount(ctypes.byref(count)))\n"
        "print('has_devices', count.value >= 1)\n"
        "print('torch_loaded', 'torch' in sys.modules or 'libtorch' in open('/proc/self/maps').read())\n",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["status", "0", "has_devices", "True", "torch_loaded", "False"]


def test_extension_loads_the_runtime_beside_it(tmp_path):
    result = run_in(
        tmp_path,
        "-c",
        "import os, torch, torch_openreg\n"
        "torch.ones(1, device='openreg')\n"
        "maps = {line.split()[-1] for line in open('/proc/self/maps') if line.rstrip().endswith('.so')}\n"
        "print(*sorted(path for path in maps if os.path.basename(path) == 'libopenreg.so'))\n"
        "print(os.path.dirname(torch_openreg._C.__file__))\n",
    )
    assert result.returncode == 0, result.stderr
    runtime_paths, extension_dir = result.stdout.splitlines()
    assert runtime_paths == os.path.join(extension_dir, "libopenreg.so")
