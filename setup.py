"""Builds torch_openreg._C: the simulated runtime (third_party/openreg) and the
PyTorch backend (csrc) in one extension module."""
import glob
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = os.path.dirname(os.path.abspath(__file__))


def sources(pattern):
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern), recursive=True))


debug = os.environ.get("OPENREG_DEBUG_BUILD", "0") == "1"

setup(
    ext_modules=[
        CppExtension(
            name="torch_openreg._C",
            sources=sources("third_party/openreg/src/*.cpp") + sources("csrc/**/*.cpp"),
            include_dirs=[os.path.join(ROOT, "third_party/openreg/include"), os.path.join(ROOT, "csrc")],
            extra_compile_args=["-O0", "-g"] if debug else ["-O2"],
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
