"""The package as a user meets it: started from a source checkout, and its command line.

The checkout tests build nothing: the source folder ``torch_openreg/`` is
copied without its native libraries into a temporary "repository root", and
the package this test process imported stands for the installed copy.
"""

import importlib.metadata
import os
import shutil
import subprocess
import sys
import zipfile

import pytest
import torch

import torch_openreg

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_PACKAGE = os.path.join(REPO_ROOT, "torch_openreg")
INSTALLED_PACKAGE = os.path.dirname(os.path.abspath(torch_openreg.__file__))
INSTALLED_PARENT = os.path.dirname(INSTALLED_PACKAGE)


@pytest.fixture
def unbuilt_checkout(tmp_path):
    """A repository root whose torch_openreg/ has no built extension, and a tests/ folder."""
    shutil.copytree(SOURCE_PACKAGE, tmp_path / "torch_openreg", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    shutil.copytree(os.path.join(REPO_ROOT, "tests"), tmp_path / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(REPO_ROOT, "pyproject.toml"), tmp_path)
    return tmp_path


def run_in(cwd, *args, pythonpath=INSTALLED_PARENT, timeout=300, env=None):
    """``python *args`` started in ``cwd``, which (as for any ``python -c`` or ``-m``) comes first on sys.path."""
    env = {**os.environ, **(env or {}), "PYTHONPATH": pythonpath}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("command", [[], ["opinfo"], ["external"]])
def test_testing_command_help_is_plain_text(command, tmp_path):
    result = run_in(tmp_path, "-m", "torch_openreg.testing", *command, "--help")
    assert result.returncode == 0, result.stderr
    assert "usage: python -m torch_openreg.testing" in result.stdout
    assert "``" not in result.stdout


@pytest.mark.slow
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


@pytest.mark.slow
def test_extension_loads_the_runtime_beside_it(tmp_path):
    result = run_in(
        tmp_path,
        "-c",
        "import os, torch, torch_openreg\n"
        "torch.ones(1, device='openreg')\n"
        "maps = {line.split()[-1] for line in open('/proc/self/maps') if line.rstrip().endswith('.so')}\n"
        "print(*sorted(path for path in maps if os.path.basename(path) == 'libopenreg.so'))\n"
        # /proc/self/maps names files by their real path: an installed package
        # reached through a symbolic link is still "beside it".
        "print(os.path.realpath(os.path.dirname(torch_openreg._C.__file__)))\n",
    )
    assert result.returncode == 0, result.stderr
    runtime_paths, extension_dir = result.stdout.splitlines()
    assert runtime_paths == os.path.join(extension_dir, "libopenreg.so")


# --------------------------------------------------------------------------
# Which torch: the build takes the installed one, and a build refuses any other
# --------------------------------------------------------------------------

TOOLS = os.path.join(REPO_ROOT, "tools")
RUNNING_TORCH = torch.__version__.split("+")[0]


def copy_of_installed_package_built_for(tmp_path, torch_version):
    """A directory to put first on sys.path: the installed package, recorded as compiled against ``torch_version``."""
    site_dir = tmp_path / "site"
    package = site_dir / "torch_openreg"
    shutil.copytree(INSTALLED_PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "_build_info.py").write_text(f"TORCH_VERSION = {torch_version!r}\n")
    return str(site_dir)


def test_the_build_records_the_torch_it_compiled_against_and_requires_it():
    from torch_openreg import _build_info

    assert _build_info.TORCH_VERSION == RUNNING_TORCH
    assert f"torch=={RUNNING_TORCH}" in importlib.metadata.requires("torch_openreg")
    # The version names that release too: wheels for several releases can share an index.
    assert importlib.metadata.version("torch_openreg").endswith(f"+torch{RUNNING_TORCH}")


@pytest.mark.slow
def test_a_build_for_another_torch_leaves_import_torch_working_with_one_warning(tmp_path):
    result = run_in(
        tmp_path,
        "-c",
        "import sys, warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import torch\n"
        "print('cpu', (torch.ones(2) + 1).tolist())\n"
        "print('registered', 'torch_openreg' in sys.modules, hasattr(torch, 'openreg'))\n"
        "about_openreg = [str(w.message) for w in caught if 'openreg' in str(w.message)]\n"
        "print('warnings', len(about_openreg))\n"
        "print('warning', about_openreg[0])\n"
        "try:\n"
        "    import torch_openreg\n"
        "except ImportError as error:\n"
        "    print('import', error)\n",
        pythonpath=copy_of_installed_package_built_for(tmp_path, "2.12.0"),
    )
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert lines["cpu"] == "[2.0, 2.0]"
    assert lines["registered"] == "False False"
    assert lines["warnings"] == "1"
    refusal = f"torch_openreg was compiled against torch 2.12.0, but torch {torch.__version__} is installed"
    assert refusal in lines["warning"]
    assert lines["import"].startswith(refusal)
    assert "`pip install .`" in lines["import"]


@pytest.mark.slow
@pytest.mark.parametrize("autoload", ["1", "0"])
def test_importing_a_build_for_another_torch_raises_naming_both_versions(tmp_path, autoload):
    result = run_in(
        tmp_path,
        "-c",
        "import torch_openreg",
        pythonpath=copy_of_installed_package_built_for(tmp_path, "2.12.0"),
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": autoload},
    )
    assert result.returncode == 1
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith(
        f"ImportError: torch_openreg was compiled against torch 2.12.0, but torch {torch.__version__} is installed"
    )
    assert "undefined symbol" not in result.stderr


def environment_torch_refusal(tmp_path, prelude, pythonpath=""):
    """What the build says, and its exit status, when the environment's torch is as ``prelude`` makes it."""
    result = run_in(
        tmp_path,
        "-c",
        f"{prelude}\nimport environment_torch\nenvironment_torch.import_environment_torch()\nprint('accepted')",
        pythonpath=os.pathsep.join(filter(None, [TOOLS, pythonpath])),
    )
    return result.returncode, result.stderr.strip()


def test_the_build_refuses_an_environment_without_torch_naming_the_install_command(tmp_path):
    # None in sys.modules: `import torch` fails, in the build environment and in the user's site-packages alike.
    status, message = environment_torch_refusal(tmp_path, "import sys; sys.modules['torch'] = None")
    assert status == 1
    assert message.startswith("error: torch_openreg is compiled against the torch installed in this environment")
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in message


# The newest supported release, from the index of the installed build (its local label), or PyPI's without one.
NEWEST_OF_THE_SAME_BUILD = {
    "2.12.0+cpu": 'pip install "torch==2.15.*" --index-url https://download.pytorch.org/whl/cpu',
    "2.16.0+cu130": 'pip install "torch==2.15.*" --index-url https://download.pytorch.org/whl/cu130',
    "2.16.0": 'pip install "torch==2.15.*"',
}


@pytest.mark.parametrize("version", NEWEST_OF_THE_SAME_BUILD)
def test_the_build_refuses_an_unsupported_torch_naming_both_and_the_newest_of_its_build(tmp_path, version):
    (tmp_path / "fake" / "torch").mkdir(parents=True)
    (tmp_path / "fake" / "torch" / "__init__.py").write_text(f"__version__ = {version!r}\n")
    status, message = environment_torch_refusal(tmp_path, "", pythonpath=str(tmp_path / "fake"))
    assert status == 1
    assert message.startswith(f"error: torch_openreg cannot be built against the installed torch {version} (")
    assert "it supports torch 2.13, 2.14, 2.15" in message
    assert message.endswith(f": {NEWEST_OF_THE_SAME_BUILD[version]}")


def test_a_build_under_another_supported_torch_says_rebuild():
    from torch_openreg._build_check import build_mismatch

    # A later patch release of the running torch: another version, a supported release.
    message = build_mismatch(".".join(RUNNING_TORCH.split(".")[:2] + ["99"]))
    assert "Rebuild it: `pip install .` in the torch_openreg source checkout" in message
    assert "cannot help" not in message


@pytest.mark.parametrize("version", ["2.16.0+cu130", "2.12.0+cpu"])
def test_a_build_under_an_unsupported_torch_says_install_a_supported_one(version):
    # Rebuilding against that torch would be refused too.
    from torch_openreg._build_check import build_mismatch

    message = build_mismatch(version)
    assert message.startswith(
        f"torch_openreg was compiled against torch {RUNNING_TORCH}, but torch {version} is installed"
    )
    assert "Rebuild it" not in message
    assert f"does not support torch {version[:4]} (it supports 2.13, 2.14, 2.15), so rebuilding cannot help" in message
    assert f"install a supported torch, torch {RUNNING_TORCH}, which this build runs with, or the newest" in message
    assert f"({NEWEST_OF_THE_SAME_BUILD[version]}) and then rebuild: `pip install .`" in message


@pytest.mark.slow
def test_the_build_takes_a_supported_torch(tmp_path):
    status, _ = environment_torch_refusal(tmp_path, "")
    assert status == 0


@pytest.mark.long
def test_pip_install_without_a_supported_torch_refuses_before_compiling(tmp_path):
    # README's install command in a new virtual environment, as a user without torch runs it, then with a torch
    # release it does not support; pip's isolated build environment installs only the build requirements.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-v", REPO_ROOT]
    no_torch = subprocess.run(pip, capture_output=True, text=True, timeout=600)
    assert no_torch.returncode != 0
    assert "and there is none" in no_torch.stdout + no_torch.stderr
    site_packages = next((venv / "lib").glob("python3*/site-packages"))
    (site_packages / "torch").mkdir()
    (site_packages / "torch" / "__init__.py").write_text("__version__ = '2.16.0'\n")
    unsupported = subprocess.run(pip, capture_output=True, text=True, timeout=600)
    output = unsupported.stdout + unsupported.stderr
    assert unsupported.returncode != 0
    assert "cannot be built against the installed torch 2.16.0" in output
    for result in (no_torch, unsupported):
        assert "compiling" not in result.stdout + result.stderr
    assert (
        "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
        in no_torch.stdout + no_torch.stderr
    )
    assert NEWEST_OF_THE_SAME_BUILD["2.16.0"] in output


def test_shipped_libraries_carry_no_debug_information():
    if os.environ.get("OPENREG_DEBUG_BUILD") == "1":
        pytest.skip("a debug build keeps its debug information")
    libraries = [torch_openreg._C.__file__, os.path.join(INSTALLED_PACKAGE, "libopenreg.so")]
    for library in libraries:
        sections = subprocess.run(["readelf", "-S", "-W", library], capture_output=True, text=True, check=True)
        assert ".debug_info" not in sections.stdout, library


# --------------------------------------------------------------------------
# What the build installs, and what it prints
# --------------------------------------------------------------------------


def test_the_package_configuration_lists_every_directory_that_ships_files():
    # setuptools takes every directory for a package: one missing from `packages` warns on every build, and its
    # files ship only through another package's data.
    # setuptools' reader of pyproject.toml (tomllib is Python 3.11 and later).
    from setuptools.config.pyprojecttoml import read_configuration

    packages = read_configuration(os.path.join(REPO_ROOT, "pyproject.toml"))["tool"]["setuptools"]["packages"]
    shipping = []
    for directory, subdirectories, files in os.walk(SOURCE_PACKAGE):
        subdirectories[:] = [d for d in subdirectories if d != "__pycache__"]
        if files:
            shipping.append(os.path.relpath(directory, REPO_ROOT).replace(os.sep, "."))
    assert sorted(packages) == sorted(shipping)


def test_the_build_prints_a_line_per_compiled_file_and_per_linked_library():
    sys.path.insert(0, TOOLS)
    try:
        import build_progress
    finally:
        sys.path.remove(TOOLS)
    root = "/src/torch_openreg"
    compile_command = (
        f"[12/85] c++ -MMD -MF {root}/build/Copy.o.d -isystem /torch/include -O2 -c {root}/csrc/aten/Copy.cpp "
        f"-o {root}/build/Copy.o -DTORCH_EXTENSION_NAME=_C\n"
    )
    objects = " ".join(f"{root}/build/temp/csrc/aten/File{i}.o" for i in range(200))
    library = f"{root}/build/lib/torch_openreg/_C.cpython-311-x86_64-linux-gnu.so"
    link_command = f"g++ -pthread -shared -Wl,-O1 {objects} -L/torch/lib -lc10 -o {library} -Wl,-rpath,$ORIGIN\n"
    assert build_progress.progress_line(compile_command, root) == "[12/85] compiling csrc/aten/Copy.cpp\n"
    assert build_progress.progress_line(link_command, root) == (
        "linking build/lib/torch_openreg/_C.cpython-311-x86_64-linux-gnu.so\n"
    )
    assert build_progress.progress_line("running build_ext\n", root) == "running build_ext\n"


# --------------------------------------------------------------------------
# The binary wheel (tools/build_wheels.py): installs where no compiler is
# --------------------------------------------------------------------------


@pytest.mark.long
def test_a_built_wheel_installs_and_trains_in_a_fresh_environment_without_a_compiler(tmp_path):
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, os.path.join(TOOLS, "build_wheels.py"), "--out", str(wheels)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    (wheel,) = wheels.glob("*.whl")
    _, version, python_tag, abi_tag, platform_tag = wheel.name[: -len(".whl")].split("-")
    assert version.endswith(f"+torch{RUNNING_TORCH}")
    assert python_tag == abi_tag == f"cp{sys.version_info.major}{sys.version_info.minor}"
    # auditwheel's verdict: a manylinux platform, not the bare linux_x86_64 of an unchecked build.
    assert platform_tag.startswith("manylinux_"), platform_tag
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = (name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
        assert f"Requires-Dist: torch=={RUNNING_TORCH}" in archive.read(metadata).decode().splitlines()
        assert not any(".libs/" in name for name in archive.namelist()), "torch's libraries were copied in"

    # A new environment that sees this one's torch (its site-packages) and nothing on PATH but its own bin/:
    # no c++, no gcc, no ninja.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    bare = {"PATH": str(venv / "bin"), "HOME": str(tmp_path), "PIP_CONFIG_FILE": os.devnull}
    assert not any(shutil.which(tool, path=bare["PATH"]) for tool in ("c++", "g++", "gcc", "cc", "ninja"))
    venv_python = str(venv / "bin" / "python")
    # --force-reinstall: this environment's own torch_openreg has the same version; --no-deps: its requirements
    # (checked above) are this environment's torch, numpy and pyyaml, which the new one sees.
    install = subprocess.run(
        [venv_python, "-m", "pip", "install", "--no-index", "--no-deps", "--force-reinstall", str(wheel)],
        env=bare,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
    demo = subprocess.run(
        [venv_python, os.path.join(REPO_ROOT, "examples", "train.py"), "--steps", "3"],
        cwd=tmp_path,
        env=bare,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    assert demo.stdout.rstrip().endswith("match"), demo.stdout
    where = subprocess.run(
        [venv_python, "-c", "import torch_openreg; print(torch_openreg._C.__file__)"],
        cwd=tmp_path,
        env=bare,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert where.stdout.startswith(str(venv)), where.stdout + where.stderr
