"""Generates the C++ registrations of torch_openreg's custom operators from
torch_openreg/ops/operators.yaml.

For each namespace built into a C++ library (`library:` in the YAML), one
source file: the kernels' declarations, computed from the schemas;
``TORCH_LIBRARY(ns, m)`` with every schema and its tags; and one
``TORCH_LIBRARY_IMPL(ns, KEY, m)`` per dispatch key with that key's kernels.
setup.py runs it on every build and compiles its output into the library the
namespace names; a vendor declares an operator by writing one YAML entry and
one kernel function.

It also checks the entries of the Python namespaces (defined at import time by
torch_openreg/ops/_registration.py), so a malformed entry fails the build,
whichever language registers it. Errors name the namespace and the entry.

    python tools/gen_custom_ops.py torch_openreg/ops/operators.yaml torch_openreg._C OUTPUT.cpp
"""

import json
import os
import re
import sys
from dataclasses import dataclass, field

import torchgen
import yaml
from torchgen import local
from torchgen.api.types import DispatcherSignature
from torchgen.model import DispatchKey, FunctionSchema

# The torch.Tag names (at::Tag::<name> in C++), from the file ATen's own
# code generation reads.
TAGS_YAML = os.path.join(os.path.dirname(torchgen.__file__), "packaged", "ATen", "native", "tags.yaml")

# The module that registers the fake kernels (torch.library.register_fake).
# The generated TORCH_LIBRARY names it (set_python_module): torch imports it
# when a trace needs a fake kernel that is not registered yet, and checks that
# the registrations come from it.
FAKE_KERNEL_REGISTRAR = "torch_openreg.ops._registration"

# A kernel: a function of the namespace's cpp_namespace (Python module), or a
# call of a qualified C++ function that returns a torch::CppFunction.
_KERNEL = re.compile(r"^[A-Za-z_]\w*$|^[A-Za-z_]\w*(::[A-Za-z_]\w*)*\(\)$")
_ENTRY_KEYS = {"func", "tags", "dispatch", "fake", "autograd"}
_NAMESPACE_KEYS = {"library", "cpp_namespace", "python_module", "operators"}


class OperatorYamlError(ValueError):
    """A malformed entry of operators.yaml; the message names it."""


@dataclass
class Operator:
    func: str  # the schema without the namespace
    tags: list = field(default_factory=list)
    dispatch: dict = field(default_factory=dict)  # DispatchKey name -> kernel
    fake: str | None = None
    autograd: dict | None = None

    @property
    def name(self):
        """name.overload, the name m.impl takes."""
        return self.func.split("(", 1)[0]


@dataclass
class Namespace:
    name: str
    operators: list
    library: str | None = None
    cpp_namespace: str | None = None
    python_module: str | None = None


def _tag_names():
    with open(TAGS_YAML) as f:
        return {entry["tag"] for entry in yaml.safe_load(f)}


def _fail(where, message):
    raise OperatorYamlError(f"operators.yaml, {where}: {message}")


def _check_operator(namespace, index, entry, tags):
    where = f"{namespace.name} entry {index}"
    if not isinstance(entry, dict) or "func" not in entry:
        _fail(where, f"an entry is a mapping with a `func:` schema, got {entry!r}")
    where = f"{namespace.name} entry {entry['func']!r}"
    unknown = set(entry) - _ENTRY_KEYS
    if unknown:
        _fail(where, f"unknown key(s) {sorted(unknown)}; an entry has {sorted(_ENTRY_KEYS)}")
    op = Operator(**entry)
    if "::" in op.name:
        _fail(where, "`func` omits the namespace, which is the YAML key the entry is under")
    for tag in op.tags:
        if tag not in tags:
            _fail(where, f"unknown tag {tag!r} (torch.Tag has {sorted(tags)})")
    if not isinstance(op.dispatch, dict) or not op.dispatch:
        _fail(where, "`dispatch` maps at least one dispatch key to a kernel")
    for key, kernel in op.dispatch.items():
        try:
            DispatchKey.parse(key)
        except AssertionError:
            _fail(where, f"unknown dispatch key {key!r}")
        if not isinstance(kernel, str) or not _KERNEL.match(kernel):
            _fail(where, f"the {key} kernel must be a function name, got {kernel!r}")
        if namespace.library is None and kernel.endswith("()"):
            _fail(where, f"the {key} kernel of a Python namespace is a function of `python_module`, got {kernel!r}")
    if namespace.library is not None:
        if op.autograd is not None:
            _fail(where, "`autograd` is for Python namespaces; a C++ autograd kernel goes under `dispatch`")
        try:
            FunctionSchema.parse(op.func)
        except Exception as error:  # torchgen raises AssertionError and others
            _fail(where, f"cannot parse the schema: {error}")
    elif op.autograd is not None and set(op.autograd) != {"backward", "setup_context"}:
        _fail(where, f"`autograd` names `backward` and `setup_context`, got {sorted(op.autograd)}")
    if (op.fake is not None or namespace.library is None) and namespace.python_module is None:
        _fail(where, "names Python functions but the namespace has no `python_module`")
    return op


def load(path):
    """The namespaces of operators.yaml, every entry checked."""
    with open(path) as f:
        spec = yaml.safe_load(f)
    tags = _tag_names()
    namespaces = []
    for name, body in spec.items():
        if not isinstance(body, dict) or not isinstance(body.get("operators"), list):
            _fail(name, "a namespace is a mapping whose `operators:` is a list of entries")
        unknown = set(body) - _NAMESPACE_KEYS
        if unknown:
            _fail(name, f"unknown key(s) {sorted(unknown)}; a namespace has {sorted(_NAMESPACE_KEYS)}")
        namespace = Namespace(name=name, **body)
        if namespace.library is not None and namespace.cpp_namespace is None:
            _fail(name, "a namespace built into a C++ library needs `cpp_namespace`, the kernels' namespace")
        namespace.operators = [_check_operator(namespace, i, e, tags) for i, e in enumerate(namespace.operators)]
        seen = set()
        for op in namespace.operators:
            if op.name in seen:
                _fail(f"{name} entry {op.func!r}", f"{op.name} is declared twice")
            seen.add(op.name)
        namespaces.append(namespace)
    return namespaces


def _declaration(func, kernel):
    # The dispatcher's C++ signature of the schema: what TORCH_FN checks the
    # kernel against when the library loads.
    with local.parametrize(use_const_ref_for_mutable_tensors=False, use_ilistref_for_tensor_lists=False):
        return DispatcherSignature.from_schema(FunctionSchema.parse(func)).decl(name=kernel) + ";"


def _kernel(namespace, kernel):
    if kernel.endswith("()"):
        return kernel
    return f"TORCH_FN({namespace.cpp_namespace}::{kernel})"


def generate(namespaces, library):
    """The C++ source registering the namespaces built into `library`."""
    lines = [
        "// Generated by tools/gen_custom_ops.py from torch_openreg/ops/operators.yaml. Do not edit:",
        "// declare operators in the YAML.",
        "#include <ATen/core/Tensor.h>",
        "#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>",
        "#include <torch/library.h>",
    ]
    for namespace in (n for n in namespaces if n.library == library):
        declarations = []
        for op in namespace.operators:
            for kernel in op.dispatch.values():
                if kernel.endswith("()"):
                    continue
                declaration = _declaration(op.func, kernel)
                if declaration not in declarations:
                    declarations.append(declaration)
        lines += [
            "",
            f"namespace {namespace.cpp_namespace} {{",
            *declarations,
            f"}} // namespace {namespace.cpp_namespace}",
        ]

        lines += ["", f"TORCH_LIBRARY({namespace.name}, m) {{"]
        if any(op.fake is not None for op in namespace.operators):
            lines.append(f'  m.set_python_module("{FAKE_KERNEL_REGISTRAR}");')
        for op in namespace.operators:
            # json.dumps quotes a schema as a C++ string literal (defaults may hold quotes).
            tags = ", ".join(f"at::Tag::{tag}" for tag in op.tags)
            lines.append(f"  m.def({json.dumps(op.func)}, {{{tags}}});" if tags else f"  m.def({json.dumps(op.func)});")
        lines.append("}")

        keys = list(dict.fromkeys(key for op in namespace.operators for key in op.dispatch))
        for key in keys:
            lines += ["", f"TORCH_LIBRARY_IMPL({namespace.name}, {key}, m) {{"]
            for op in namespace.operators:
                if key in op.dispatch:
                    lines.append(f'  m.impl("{op.name}", {_kernel(namespace, op.dispatch[key])});')
            lines.append("}")
    return "\n".join(lines) + "\n"


def write_if_changed(path, text):
    """Writes `text` unless the file already holds it, so that an unchanged
    YAML leaves the file's time stamp, and the incremental build, alone."""
    try:
        with open(path) as f:
            if f.read() == text:
                return False
    except FileNotFoundError:
        pass
    with open(path, "w") as f:
        f.write(text)
    return True


def main(argv):
    yaml_path, library, output = argv
    try:
        text = generate(load(yaml_path), library)
    except OperatorYamlError as error:
        sys.exit(str(error))
    write_if_changed(output, text)


if __name__ == "__main__":
    main(sys.argv[1:])
