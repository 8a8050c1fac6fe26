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

Everything is compiled against the torch installed in the environment
(tools/environment_torch.py), into build/torch-<version>/.
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
ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import environment_torch  # noqa: E402

torch = environment_torch.import_environment_torch()
from torch.utils.cpp_extension import BuildExtension, CppExtension, include_paths  # noqa: E402

import build_progress  # noqa: E402
import gen_aoti_c_shim  # noqa: E402
import gen_custom_ops  # noqa: E402
from torchgen import gen_backend_stubs  # noqa: E402

VERSION = "0.1.0"
RUNTIME = "torch_openreg.libopenreg"
EXTRA_OPS = "torch_openreg.ops.libopenreg_extra_ops"
PLAIN_LIBRARIES = {RUNTIME, EXTRA_OPS}
EXTRA_OPS_DIR = os.path.join("csrc", "extra_ops")
TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
TORCH_VERSION = torch.__version__.split("+")[0]

OPERATORS_YAML = os.path.join(ROOT, "torch_openreg", "ops", "operators.yaml")
ATEN_YAML = os.path.join(ROOT, "csrc", "aten", "native_functions.yaml")

debug = os.environ.get("OPENREG_DEBUG_BUILD", "0") == "1"
# -g0: Python's own CFLAGS, which every extension build starts from, carry -g
# (debug information would make _C.so 108 MB instead of a few).
OPTIMIZATION = ["-O0", "-g"] if debug else ["-O2", "-g0"]
WARNINGS = ["-Wall", "-Wextra", "-Werror"]


def sources(pattern):
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern), recursive=True))


class BuildNativeLibraries(BuildExtension.with_options(use_ninja=True)):
    def build_extensions(self):
        # -isystem: warnings in torch's headers are torch's.
        torch_headers = [flag for path in include_paths() for flag in ("-isystem", path)]
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
                extension.extra_compile_args += ["-isystem", os.path.join(TORCH_DIR, "include", "kineto")]
        self.add_generated_registrations()
        self.add_generated_aten_registrations()
        self.add_generated_aoti_c_shim()
        with build_progress.one_line_per_step(ROOT):
            super().build_extensions()

    def run(self):
        super().run()
        self.record_torch_version()

    def record_torch_version(self):
        # Read at import, before the extension loads: under another torch the
        # import refuses with both versions instead of an undefined symbol.
        # Beside the extension in the build (what a wheel ships), and in the
        # source tree when the extensions are copied there (--inplace, editable).
        package_dirs = [os.path.join(self.build_lib, "torch_openreg")]
        if self.inplace or getattr(self, "editable_mode", False):
            package_dirs.append(os.path.join(ROOT, "torch_openreg"))
        record = (
            f"# Written by setup.py: the torch this build was compiled against.\nTORCH_VERSION = {TORCH_VERSION!r}\n"
        )
        for package_dir in package_dirs:
            gen_custom_ops.write_if_changed(os.path.join(package_dir, "_build_info.py"), record)

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
            sys.exit(
                f"error: {ATEN_YAML}: gen_backend_stubs would also register {added}; keep that operator hand-written"
            )
        (extension,) = (e for e in self.extensions if e.name == "torch_openreg._C")
        extension.include_dirs.append(generated)
        if source not in extension.sources:
            extension.sources.append(source)

    def add_generated_aoti_c_shim(self):
        # openreg's C shim for Inductor's C++ wrapper and AOTInductor
        # (tools/gen_aoti_c_shim.py), from the installed torch's operator list:
        # the definitions go into _C, the header into the package's include
        # directory, where the generated wrappers' compiles find it.
        generated = os.path.abspath(os.path.join(self.build_temp, "generated", "aoti"))
        header, source = gen_aoti_c_shim.generate()
        header_dirs = [os.path.join(self.build_lib, "torch_openreg", "include"), generated]
        if self.inplace or getattr(self, "editable_mode", False):
            header_dirs.append(os.path.join(ROOT, "torch_openreg", "include"))
        for include_dir in header_dirs:
            path = os.path.join(include_dir, gen_aoti_c_shim.HEADER_INCLUDE)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            gen_custom_ops.write_if_changed(path, header)
        source_path = os.path.join(generated, "c_shim_openreg.cpp")
        gen_custom_ops.write_if_changed(source_path, source)
        (extension,) = (e for e in self.extensions if e.name == "torch_openreg._C")
        extension.include_dirs += [generated, os.path.join(ROOT, "torch_openreg", "include")]
        if source_path not in extension.sources:
            extension.sources.append(source_path)

    def get_ext_filename(self, fullname):
        filename = super().get_ext_filename(fullname)
        # Called with the full name and with its last component alone.
        if fullname.split(".")[-1] in {name.split(".")[-1] for name in PLAIN_LIBRARIES}:
            # Not a Python module: a plain shared library name, without the
            # interpreter's ABI tag.
            filename = filename[: -len(sysconfig.get_config_var("EXT_SUFFIX"))] + ".so"
        return filename


setup(
    # A build is for one torch release: its version says which, as a local
    # label, so wheels for several releases can sit side by side in one index.
    version=f"{VERSION}+torch{TORCH_VERSION}",
    # The wheel runs with the torch it was compiled against, which is already
    # installed: requiring exactly that release never makes pip replace it.
    install_requires=[f"torch=={TORCH_VERSION}", "numpy", "pyyaml"],
    # Objects and libraries compiled against one torch are never reused for
    # another: ninja and build_ext judge them by timestamps, not by the torch.
    options={"build": {"build_base": os.path.join("build", f"torch-{TORCH_VERSION}")}},
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
            # The soname (its own file name): a C++ wrapper or AOTInductor model
            # linked against _C (torch_openreg/_inductor/cpp_build_options.py)
            # then binds to the _C already loaded by name, wherever it is
            # installed, instead of searching the run path it was linked with.
            extra_link_args=["-Wl,-rpath,$ORIGIN", "-Wl,-soname,_C" + sysconfig.get_config_var("EXT_SUFFIX")],
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
