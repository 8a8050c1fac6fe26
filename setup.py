"""Builds the two native libraries of torch_openreg:

- torch_openreg._C, the extension module: the simulated runtime
  (third_party/openreg) and the PyTorch backend (csrc, minus csrc/extra_ops);
- torch_openreg/ops/libopenreg_extra_ops.so, a plain shared library of extra
  operators (csrc/extra_ops) that users load at run time with
  torch.ops.load_library(torch_openreg.extra_ops_path()); nothing imports it.
"""
import glob
import os
import sysconfig

from setuptools import setup

# Importing torch would autoload an installed (possibly stale or half-built)
# torch_openreg; the build needs torch's build tools only.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
from torch.utils.cpp_extension import BuildExtension, CppExtension  # noqa: E402

ROOT = os.path.dirname(os.path.abspath(__file__))
EXTRA_OPS = "torch_openreg.ops.libopenreg_extra_ops"
EXTRA_OPS_DIR = os.path.join("csrc", "extra_ops")


def sources(pattern):
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern), recursive=True))


class BuildNativeLibraries(BuildExtension.with_options(use_ninja=True)):
    def get_ext_filename(self, fullname):
        filename = super().get_ext_filename(fullname)
        # Called with the full name and with its last component alone.
        if fullname.split(".")[-1] == EXTRA_OPS.split(".")[-1]:
            # Not a Python module: a plain shared library name, without the
            # interpreter's ABI tag.
            filename = filename[: -len(sysconfig.get_config_var("EXT_SUFFIX"))] + ".so"
        return filename


debug = os.environ.get("OPENREG_DEBUG_BUILD", "0") == "1"
compile_args = ["-O0", "-g"] if debug else ["-O2"]

setup(
    ext_modules=[
        CppExtension(
            name="torch_openreg._C",
            sources=sources("third_party/openreg/src/*.cpp")
            + [s for s in sources("csrc/**/*.cpp") if not s.startswith(EXTRA_OPS_DIR + os.sep)],
            include_dirs=[os.path.join(ROOT, "third_party/openreg/include"), os.path.join(ROOT, "csrc")],
            extra_compile_args=compile_args,
        ),
        CppExtension(
            name=EXTRA_OPS,
            sources=sources("csrc/extra_ops/*.cpp"),
            include_dirs=[os.path.join(ROOT, "csrc")],
            extra_compile_args=compile_args,
        ),
    ],
    cmdclass={"build_ext": BuildNativeLibraries},
)
