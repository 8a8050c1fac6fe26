"""The torch releases torch_openreg supports, and the command that installs one.

The build reads this file by its path (tools/environment_torch.py: importing
the package would import torch) and the package's import-time check imports
it (_build_check.py), so it imports nothing.
"""

import re

SUPPORTED_RELEASES = ("2.13", "2.14", "2.15")
# README's command for a machine without torch: the CPU build of the first supported release.
CPU_TORCH_INSTALL = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
# The local labels of PyTorch's own wheels, each the name of that build's index directory.
_INDEX_BUILD = re.compile(r"cpu|cu\d+|rocm[\d.]+|xpu")


def release_of(version):
    """'2.14' for '2.14.1' and '2.14.1+cpu'."""
    return ".".join(version.split("+")[0].split(".")[:2])


def is_supported(version):
    return release_of(version) in SUPPORTED_RELEASES


def install_newest_command(installed_version):
    """The command that installs the newest supported release, of the same build as ``installed_version``.

    '2.16.0+cu130' comes from PyTorch's index for CUDA 13.0, '2.12.0+cpu' from
    its CPU index; a version without such a label is PyPI's wheel (on Linux a
    CUDA build), or a build of the user's own, for which PyPI's is the nearest.
    """
    command = f'pip install "torch=={SUPPORTED_RELEASES[-1]}.*"'
    build = installed_version.partition("+")[2]
    if not _INDEX_BUILD.fullmatch(build):
        return command
    return f"{command} --index-url https://download.pytorch.org/whl/{build}"
