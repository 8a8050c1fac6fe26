"""What compiling and linking code for openreg needs, for Inductor's C++
wrapper and AOTInductor.

Inductor builds a C++ wrapper (and an AOTInductor model library) with the
options ``cpp_builder.get_cpp_torch_device_options(device_type)`` returns:
torch's include directories and libraries, plus each device's runtime for the
devices it knows (CUDA's libraries for "cuda", and so on). For openreg, this
adds the package's ``include`` directory (``torch_openreg/aoti/openreg.h`` and
the generated C shim) and links torch_openreg's backend library, the extension
module ``torch_openreg._C``, which defines the shim and the host access
(``-l:<file name>`` with the package directory as library path and run path:
loaded into a process that already imported torch_openreg, it is the same
library, found by file identity).

It also names the header Inductor precompiles for a C++ wrapper
(``codecache._get_cpp_wrapper_header``, "torch/csrc/inductor/cpp_wrapper/<device>.h"
otherwise): the CPU's, the bulk of what openreg's wrapper includes.

Installed with the Inductor backend (registration.py).
"""

import functools
import os

from torch._inductor import codecache, cpp_builder

_DEVICE = "openreg"


def _openreg_build_options():
    from .. import _C

    package_dir = os.path.dirname(os.path.abspath(_C.__file__))
    return (
        [os.path.join(package_dir, "include")],
        [package_dir],
        [":" + os.path.basename(_C.__file__)],
        [f"Wl,-rpath,{package_dir}"],
    )


def _with_openreg_build_options(get_cpp_torch_device_options):
    @functools.wraps(get_cpp_torch_device_options)
    def get_cpp_torch_device_options_openreg(device_type, *args, **kwargs):
        options = get_cpp_torch_device_options(device_type, *args, **kwargs)
        if device_type != _DEVICE:
            return options
        definitions, include_dirs, cflags, ldflags, libraries_dirs, libraries, passthrough_args = options
        openreg_include_dirs, openreg_libraries_dirs, openreg_libraries, openreg_ldflags = _openreg_build_options()
        return (
            definitions,
            include_dirs + openreg_include_dirs,
            cflags,
            ldflags + openreg_ldflags,
            libraries_dirs + openreg_libraries_dirs,
            libraries + openreg_libraries,
            passthrough_args,
        )

    return get_cpp_torch_device_options_openreg


def _cpu_wrapper_header_for_openreg(get_cpp_wrapper_header):
    @functools.wraps(get_cpp_wrapper_header)
    def get_cpp_wrapper_header_openreg(device, *args, **kwargs):
        if device.split(":")[0] == _DEVICE:
            device = "cpu"
        return get_cpp_wrapper_header(device, *args, **kwargs)

    return get_cpp_wrapper_header_openreg


@functools.cache
def install() -> None:
    codecache._get_cpp_wrapper_header = _cpu_wrapper_header_for_openreg(codecache._get_cpp_wrapper_header)
    cpp_builder.get_cpp_torch_device_options = _with_openreg_build_options(cpp_builder.get_cpp_torch_device_options)
