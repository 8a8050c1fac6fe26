"""Refusing an extension compiled against another torch, before it loads.

The extension uses torch's C++ API, which has no stable ABI across releases:
loaded under another torch it fails with an undefined symbol, or worse, loads
and crashes later. setup.py records the torch it compiled against in
``_build_info.py``; this compares that record with the running torch.
"""

import sys

from . import _torch_releases

_REBUILD = (
    "`pip install .` in the torch_openreg source checkout (for a development build, "
    "`python setup.py build_ext --inplace`)"
)


def _public(version):
    # '2.13.0+cpu' and '2.13.0' are one release for the ABI: the local label names the build's variant (CPU, CUDA).
    return version.split("+")[0]


def build_mismatch(running_version):
    """None if this build matches the running torch, else the message that says so and what to do."""
    try:
        from ._build_info import TORCH_VERSION as built_version
    except ImportError:
        built_version = None
    if built_version == _public(running_version):
        return None
    compiled_against = (
        f"torch {built_version}"
        if built_version
        else "an unrecorded torch (a build from before torch_openreg recorded it)"
    )
    mismatch = (
        f"torch_openreg was compiled against {compiled_against}, but torch {running_version} is installed "
        f"({sys.executable}); its C++ extension only works with the torch it was compiled against."
    )
    if _torch_releases.is_supported(running_version):
        return f"{mismatch} Rebuild it: {_REBUILD}, or install the torch it was built for."
    # A rebuild against this torch would be refused too.
    supported = ", ".join(_torch_releases.SUPPORTED_RELEASES)
    built_for = f"torch {built_version}, which this build runs with, or " if built_version else ""
    return (
        f"{mismatch} torch_openreg does not support torch {_torch_releases.release_of(running_version)} (it supports "
        f"{supported}), so rebuilding cannot help: install a supported torch, {built_for}the newest release in the "
        f"same build as the installed one ({_torch_releases.install_newest_command(running_version)}) and then "
        f"rebuild: {_REBUILD}."
    )


def torch_is_importing(torch):
    """True while ``import torch`` runs, which is when torch's autoload imports this package."""
    return bool(getattr(torch.__spec__, "_initializing", False))
