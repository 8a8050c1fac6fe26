"""Refusing an extension compiled against another torch, before it loads.

The extension uses torch's C++ API, which has no stable ABI across releases:
loaded under another torch it fails with an undefined symbol, or worse, loads
and crashes later. setup.py records the torch it compiled against in
``_build_info.py``; this compares that record with the running torch.
"""

import sys


def _public(version):
    # '2.13.0+cpu' and '2.13.0' are one release for the ABI: the local label names the build's variant (CPU, CUDA).
    return version.split("+")[0]


def build_mismatch(running_version):
    """None if this build matches the running torch, else the message that says so and how to rebuild."""
    try:
        from ._build_info import TORCH_VERSION as built_version
    except ImportError:
        built_version = "an unrecorded torch (a build from before torch_openreg recorded it)"
    if built_version == _public(running_version):
        return None
    return (
        f"torch_openreg was compiled against torch {built_version}, but torch {running_version} is installed "
        f"({sys.executable}); its C++ extension only works with the torch it was compiled against. Rebuild it: "
        "`pip install .` in the torch_openreg source checkout (for a development build, "
        "`python setup.py build_ext --inplace`), or install the torch it was built for."
    )


def torch_is_importing(torch):
    """True while ``import torch`` runs, which is when torch's autoload imports this package."""
    return bool(getattr(torch.__spec__, "_initializing", False))
