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

import importlib.util
import os
import site
import sys


def _load_torch_releases():
    # The package's list, read from its file: importing torch_openreg would import torch.
    path = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "torch_openreg", "_torch_releases.py"
    )
    spec = importlib.util.spec_from_file_location("_torch_releases", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


torch_releases = _load_torch_releases()


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
                f"none ({sys.executable}). Install a supported release "
                f"({', '.join(torch_releases.SUPPORTED_RELEASES)}) first; the CPU build of 2.13: "
                f"{torch_releases.CPU_TORCH_INSTALL}"
            )
    if not torch_releases.is_supported(torch.__version__):
        sys.exit(
            f"error: torch_openreg cannot be built against the installed torch {torch.__version__} "
            f"({os.path.dirname(torch.__file__)}): it supports torch {', '.join(torch_releases.SUPPORTED_RELEASES)}. "
            "Install one of them first; the newest, in the same build as the installed one: "
            f"{torch_releases.install_newest_command(torch.__version__)}"
        )
    return torch
