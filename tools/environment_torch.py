"""The torch that torch_openreg is compiled against: the one installed in the environment.

The extension is tied to the C++ ABI of the exact torch it is compiled against,
so it must be built against the torch the user runs. pip builds a package in an
isolated environment holding only its build requirements; were torch one of
them, pip would install a second torch there (from the default index: on Linux
the CUDA build, several GB) and the extension would match that one instead.
So torch is not a build requirement: the build imports the environment's torch,
which pip's isolation hides, and refuses a torch it does not support (or no
torch at all) before compiling anything, saying what to do.
"""

import os
import site
import sys

SUPPORTED_RELEASES = ("2.13", "2.14", "2.15")
# What README gives a machine without torch: the CPU build of the default release.
CPU_TORCH_INSTALL = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"


def release_of(version):
    """'2.14' for '2.14.1' and '2.14.1+cpu'."""
    return ".".join(version.split("+")[0].split(".")[:2])


def _environment_site_packages():
    # pip's isolated build runs this interpreter with the environment's own
    # site-packages taken off sys.path; site still names them.
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE is not False else None
    return [path for path in [*site.getsitepackages(), user_site] if path and os.path.isdir(path)]


def import_environment_torch():
    """Imports the environment's torch, or exits naming what to install."""
    try:
        import torch
    except ModuleNotFoundError:
        # Appended: the build environment's own packages (setuptools, ninja) stay first.
        sys.path.extend(p for p in _environment_site_packages() if p not in sys.path)
        try:
            import torch
        except ModuleNotFoundError:
            sys.exit(
                "error: torch_openreg is compiled against the torch installed in this environment, and there is "
                f"none ({sys.executable}). Install a supported release ({', '.join(SUPPORTED_RELEASES)}) first; "
                f"the CPU build of 2.13: {CPU_TORCH_INSTALL}"
            )
    release = release_of(torch.__version__)
    if release not in SUPPORTED_RELEASES:
        sys.exit(
            f"error: torch_openreg cannot be built against the installed torch {torch.__version__} "
            f"({os.path.dirname(torch.__file__)}): it supports torch {', '.join(SUPPORTED_RELEASES)}. Install one of "
            f"them, for example the CPU build of 2.13: {CPU_TORCH_INSTALL}"
        )
    return torch
