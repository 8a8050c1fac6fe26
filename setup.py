"""Builds the three native libraries of torch_openreg:

- torch_openreg/libopenreg.so, the simulated device runtime (third_party/openreg):
  a plain shared library without torch, as a vendor ships its driver runtime;
- torch_openreg._C, the extension module: the PyTorch backend (csrc, minus
  csrc/extra_ops), which finds libopenreg.so beside itself ($ORIGIN rpath);
- torch_openreg/ops/libopenreg_extra_ops.so, a plain shared library of extra
  operators (csrc/extra_ops) that users load at run time with
  torch.ops.load_library(torch_openreg.extra_ops_path()); nothing imports it.

The registrations of the custom operators (schemas and kernels) are generated
from torch_openreg/ops/operators.yaml on every build, into the build directory.
"""
import glob
import os
import re
import sys
import sysconfig

import yaml
from setuptools import Extension, setup

# Importing torch would autoload an installed (possibly stale or half-built)
# torch_openreg; the build needs torch's build tools only.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
import torch  # noqa: E402
from torch.utils.cpp_extension import BuildExtension, CppExtension, include_paths  # noqa: E402

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import gen_custom_ops  # noqa: E402
from torchgen import gen_backend_stubs  # noqa: E402

RUNTIME = "torch_openreg.libopenreg"
EXTRA_OPS = "torch_openreg.ops.libopenreg_extra_ops"
PLAIN_LIBRARIES = {RUNTIME, EXTRA_OPS}
EXTRA_OPS_DIR = os.path.join("csrc", "extra_ops")
TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))

OPERATORS_YAML = os.path.join(ROOT, "torch_openreg", "ops", "operators.yaml")
ATEN_YAML = os.path.join(ROOT, "csrc", "aten", "native_functions.yaml")

debug = os.environ.get("OPENREG_DEBUG_BUILD", "0") == "1"
OPTIMIZATION = ["-O0", "-g"] if debug else ["-O2"]
WARNINGS = ["-Wall", "-Wextra", "-Werror"]


def sources(pattern):
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern), recursive=True))


class BuildNativeLibraries(BuildExtension.with_options(use_ninja=True)):
    def build_extensions(self):
        # pip's build isolation installs torch into a new temporary directory
        # for every build, and a compile command naming it never repeats: the
        # build directory and the compiler cache (ccache, which torch's build
        # uses when it is on PATH) would start from scratch each time. The
        # commands name torch's headers through a link in the build directory
        # instead, so a second `pip install` of an unchanged tree reuses the
        # cached objects. -isystem: warnings in torch's headers are torch's.
        torch_link = os.path.join(os.path.abspath(self.build_temp), "torch")
        os.makedirs(self.build_temp, exist_ok=True)
        if os.path.lexists(torch_link):
            os.remove(torch_link)
        os.symlink(TORCH_DIR, torch_link)
        torch_headers = []
        for path in include_paths():
            torch_headers += ["-isystem", torch_link + path[len(TORCH_DIR):]]

        runtime_dir = os.path.dirname(self.get_ext_fullpath(RUNTIME))
        for extension in self.extensions:
            if extension.name == RUNTIME:
                continue
            extension.include_dirs = [d for d in extension.include_dirs if d not in include_paths()]
            extension.extra_compile_args += torch_headers
            if extension.name == "torch_openreg._C":
                extension.library_dirs.append(runtime_dir)
                # The Kineto headers torch ships, which the activity profiler
                # (csrc/profiler/) includes by their bare names, as torch does.
                extension.extra_compile_args += ["-isystem", os.path.join(torch_link, "include", "kineto")]
        self.add_generated_registrations()
        self.add_generated_aten_registrations()
        super().build_extensions()

    def add_generated_registrations(self):
        # Runs on every build; a file is rewritten only when the YAML changes
        # what it says, which is what makes ninja recompile it.
        try:
            namespaces = gen_custom_ops.load(OPERATORS_YAML)
        except gen_custom_ops.OperatorYamlError as error:
            sys.exit(f"error: {error}")
        for extension in self.extensions:
            if not any(namespace.library == extension.name for namespace in namespaces):
                continue
            source = os.path.join(self.build_temp, "generated", extension.name, "RegisterCustomOps.cpp")
            os.makedirs(os.path.dirname(source), exist_ok=True)
            gen_custom_ops.write_if_changed(source, gen_custom_ops.generate(namespaces, extension.name))
            if source not in extension.sources:
                extension.sources.append(source)

    def add_generated_aten_registrations(self):
        # torchgen's generator for out-of-tree backends: the kernel
        # declarations (PrivateUse1NativeFunctions.h) and their registrations
        # (RegisterPrivateUse1.cpp). torchgen rewrites a file only when its
        # text changes. An absolute directory: the generated registrations
        # include the header by the path they were given.
        generated = os.path.abspath(os.path.join(self.build_temp, "generated", "aten"))
        gen_backend_stubs.run(ATEN_YAML, generated, dry_run=False)
        source = os.path.join(generated, "RegisterPrivateUse1.cpp")
        # Given a functional operator whose out= variant PyTorch generates
        # (`autogen:`), gen_backend_stubs registers that variant too, with a
        # kernel that allocates a result and copies it into `out`: a
        # registration not asked for, which would replace PyTorch's own.
        with open(ATEN_YAML) as f:
            listed = set(yaml.safe_load(f)["supported"])
        with open(source) as f:
            added = sorted(set(re.findall(r'm\.impl\("([^"]+)"', f.read())) - listed)
        if added:
            sys.exit(f"error: {ATEN_YAML}: gen_backend_stubs would also register {added}; keep that operator hand-written")
        (extension,) = (e for e in self.extensions if e.name == "torch_openreg._C")
        extension.include_dirs.append(generated)
        if source not in extension.sources:
            extension.sources.append(source)

    def get_ext_filename(self, fullname):
        filename = super().get_ext_filename(fullname)
        # Called with the full name and with its last component alone.
        if fullname.split(".")[-1] in {name.split(".")[-1] for name in PLAIN_LIBRARIES}:
            # Not a Python module: a plain shared library name, without the
            # interpreter's ABI tag.
            filename = filename[: -len(sysconfig.get_config_var("EXT_SUFFIX"))] + ".so"
        return filename


setup(
    # Listed in build order: _C links against libopenreg.so.
    ext_modules=[
        Extension(
            name=RUNTIME,
            sources=sources("third_party/openreg/src/*.cpp"),
            include_dirs=[os.path.join(ROOT, "third_party/openreg/include")],
            extra_compile_args=["-std=c++20", *OPTIMIZATION, *WARNINGS],
            extra_link_args=["-pthread"],
        ),
        CppExtension(
            name="torch_openreg._C",
            sources=[s for s in sources("csrc/**/*.cpp") if not s.startswith(EXTRA_OPS_DIR + os.sep)],
            include_dirs=[os.path.join(ROOT, "third_party/openreg/include"), os.path.join(ROOT, "csrc")],
            libraries=["openreg"],
            extra_compile_args=[*OPTIMIZATION, *WARNINGS],
            extra_link_args=["-Wl,-rpath,$ORIGIN"],
        ),
        CppExtension(
            name=EXTRA_OPS,
            sources=sources("csrc/extra_ops/*.cpp"),
            include_dirs=[os.path.join(ROOT, "csrc")],
            extra_compile_args=[*OPTIMIZATION, *WARNINGS],
        ),
    ],
    cmdclass={"build_ext": BuildNativeLibraries},
)
