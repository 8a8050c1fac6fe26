"""torch_openreg/ops/operators.yaml is where the package's custom operators are
declared: the build generates their C++ registrations from it
(tools/gen_custom_ops.py) and `import torch_openreg` registers the Python side.

These tests check the result, not the mechanism: the dispatcher of a process
that loaded every library agrees with the YAML (the operators, their schemas
and tags, which dispatch keys have kernels), every declared operator computes
on openreg what it computes on the CPU, and the generator turns a small YAML
into registrations, or a malformed entry into an error that names it.
"""

import dataclasses
import json
import os
import re
import sys

import pytest
import torch

import torch_openreg
from conftest import check_ok, run_python

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(TESTS_DIR), "tools"))
import gen_custom_ops  # noqa: E402

YAML_PATH = os.path.join(os.path.dirname(torch_openreg.ops.__file__), "operators.yaml")

# "KEY: registered at ... :: SCHEMA" in torch._C._dispatch_dump (the schema's own
# line, "debug: registered at ...", has no "::"); alias keys read "KEY[alias]: ...",
# superseded registrations "KEY (inactive): ...".
_KERNEL_LINE = re.compile(r"^(\w+)(?:\[alias\])?: registered at .+ ::", re.MULTILINE)


def declared_ops(namespaces):
    """{"ns::name.overload": {"schema", "tags", "dispatch"}} from the YAML (dispatch: the sorted keys)."""
    ops = {}
    for namespace in namespaces:
        for op in namespace.operators:
            keys = set(op.dispatch)
            if op.fake is not None:
                keys.add("Meta")  # register_fake registers the Meta kernel
            if namespace.library is None:
                # torch.library.custom_op adds an autograd kernel (the YAML's
                # formula, or one that refuses), and for a mutable operator
                # the kernel that bumps the version counter.
                keys.add("Autograd")
                if "!" in op.func:
                    keys.add("ADInplaceOrView")
            name, _, overload = op.name.partition(".")
            ops[f"{namespace.name}::{name}.{overload or 'default'}"] = {
                "schema": f"{namespace.name}::{op.func}",
                "tags": sorted(op.tags),
                "dispatch": sorted(keys),
            }
    return ops


def registry_view(namespaces):
    """The same shape as declared_ops, read from the dispatcher of this process.

    The kernels are the keys the dispatcher's dump lists as active, confirmed
    one by one with torch._C._dispatch_has_kernel_for_dispatch_key.
    """
    view = {}
    for qualname in torch._C._dispatch_get_all_op_names():
        namespace, _, rest = qualname.partition("::")
        if namespace not in namespaces:
            continue
        name, _, overload = rest.partition(".")
        op = getattr(getattr(getattr(torch.ops, namespace), name), overload or "default")
        dump = torch._C._dispatch_dump(qualname)
        kernels = sorted(_KERNEL_LINE.findall(dump))
        assert all(torch._C._dispatch_has_kernel_for_dispatch_key(qualname, key) for key in kernels), dump
        view[f"{namespace}::{name}.{overload or 'default'}"] = {
            "schema": str(op._schema),
            "tags": sorted(str(tag).removeprefix("Tag.") for tag in op.tags),
            "dispatch": kernels,
        }
    return view


def compare(namespaces, registry):
    """Every disagreement between the YAML and the registry, one line each."""
    declared = declared_ops(namespaces)
    problems = [
        f"{op}: registered ({registry[op]['schema']}) but not declared in operators.yaml"
        for op in sorted(registry.keys() - declared.keys())
    ]
    problems += [
        f"{op}: declared in operators.yaml but not registered" for op in sorted(declared.keys() - registry.keys())
    ]
    for op in sorted(declared.keys() & registry.keys()):
        want, have = declared[op], registry[op]
        if want["schema"] != have["schema"]:
            problems.append(f"{op}: registered schema {have['schema']!r}, operators.yaml says {want['schema']!r}")
        if want["tags"] != have["tags"]:
            problems.append(f"{op}: registered tags {have['tags']}, operators.yaml says {want['tags']}")
        for key in sorted(set(want["dispatch"]) - set(have["dispatch"])):
            problems.append(f"{op}: operators.yaml declares a kernel for {key}, none is registered")
        for key in sorted(set(have["dispatch"]) - set(want["dispatch"])):
            problems.append(f"{op}: a kernel for {key} is registered but not declared in operators.yaml")
    return problems


def sample_arguments(schema, device):
    """Arguments for one call: (3, 4) float32 tensors, the same values on every
    device, increasing floats (so that bounds such as lo < hi hold), and an
    empty `out` the kernel resizes."""
    generator = torch.Generator().manual_seed(0)
    args, kwargs, number = [], {}, 0.5
    for argument in schema.arguments:
        if str(argument.type) == "Tensor":
            value = torch.randn(3, 4, generator=generator).to(device)
            if argument.is_out:
                value = torch.empty(0, device=device)
        elif str(argument.type) == "float":
            value, number = number, number + 1.0
        else:
            raise AssertionError(f"no sample for {argument} of {schema}")
        if argument.kwarg_only:
            kwargs[argument.name] = value
        else:
            args.append(value)
    return args, kwargs


def run_on_both_devices(qualname):
    """'' if the operator's results and written arguments on openreg equal the
    CPU's, else what differs."""
    namespace, _, rest = qualname.partition("::")
    name, _, overload = rest.partition(".")
    op = getattr(getattr(getattr(torch.ops, namespace), name), overload)
    outcome = {}
    for device in ("cpu", "openreg"):
        args, kwargs = sample_arguments(op._schema, device)
        result = op(*args, **kwargs)
        results = result if isinstance(result, tuple) else () if result is None else (result,)
        outcome[device] = [t.cpu() for t in (*results, *args, *kwargs.values()) if isinstance(t, torch.Tensor)]
    try:
        for on_device, on_cpu in zip(outcome["openreg"], outcome["cpu"], strict=True):
            torch.testing.assert_close(on_device, on_cpu, rtol=0, atol=0)
    except AssertionError as error:
        return str(error)
    return ""


def in_fresh_process(expression, setup=""):
    """The JSON value of `expression` in a fresh process that loaded the extra
    operators, after running `setup` there."""
    code = f"""
        import json, sys
        sys.path.insert(0, {TESTS_DIR!r})
        import torch, torch_openreg
        torch.ops.load_library(torch_openreg.extra_ops_path())
        {setup}
        from test_operator_yaml import compare, registry_view, run_on_both_devices
        print(json.dumps({expression}))
    """
    return json.loads(check_ok(run_python(code)).splitlines()[-1])


@pytest.fixture(scope="module")
def namespaces():
    return gen_custom_ops.load(YAML_PATH)


@pytest.fixture(scope="module")
def registry(namespaces):
    return in_fresh_process(f"registry_view({sorted(n.name for n in namespaces)!r})")


def test_yaml_declares_the_namespaces_the_package_owns(namespaces):
    assert [n.name for n in namespaces] == ["openreg", "openreg_py", "openreg_extra"]


@pytest.mark.slow
def test_the_dispatcher_has_exactly_what_the_yaml_declares(namespaces, registry):
    assert compare(namespaces, registry) == []


@pytest.mark.slow
def test_every_declared_operator_computes_on_openreg_what_it_computes_on_the_cpu(namespaces):
    qualnames = sorted(declared_ops(namespaces))
    assert in_fresh_process(f"{{q: run_on_both_devices(q) for q in {qualnames!r}}}") == dict.fromkeys(qualnames, "")


@pytest.mark.slow
def test_an_operator_registered_outside_the_yaml_is_reported(namespaces):
    # A throwaway operator in the package's own namespace, as a hand-written
    # C++ or Python registration would add it.
    setup = (
        "lib = torch.library.Library('openreg', 'FRAGMENT'); "
        "lib.define('undeclared_op(Tensor x) -> Tensor'); "
        "lib.impl('undeclared_op', lambda x: x.clone(), 'CPU')"
    )
    names = sorted(n.name for n in namespaces)
    assert compare(namespaces, in_fresh_process(f"registry_view({names!r})", setup)) == [
        "openreg::undeclared_op.default: registered (openreg::undeclared_op(Tensor x) -> Tensor) "
        "but not declared in operators.yaml"
    ]


def _find(namespaces, namespace, name):
    (ns,) = (n for n in namespaces if n.name == namespace)
    (op,) = (o for o in ns.operators if o.name == name)
    return ns, op


def _drop_operator(namespaces):
    ns, op = _find(namespaces, "openreg", "scaled_tanh")
    ns.operators.remove(op)
    return ["openreg::scaled_tanh.default: registered"]


def _declare_missing_operator(namespaces):
    ns, op = _find(namespaces, "openreg_extra", "rms_norm")
    ns.operators.append(dataclasses.replace(op, func=op.func.replace("rms_norm(", "rms_norm.out(")))
    return ["openreg_extra::rms_norm.out: declared in operators.yaml but not registered"]


def _edit_schema(namespaces):
    _, op = _find(namespaces, "openreg", "scaled_tanh")
    op.func = op.func.replace("float scale", "float scale=1.")
    return ["openreg::scaled_tanh.default: registered schema"]


def _drop_dispatch_key(namespaces):
    _, op = _find(namespaces, "openreg_py", "smooth_clamp")
    del op.dispatch["PrivateUse1"]
    return ["openreg_py::smooth_clamp.default: a kernel for PrivateUse1 is registered but not declared"]


def _add_dispatch_key(namespaces):
    _, op = _find(namespaces, "openreg", "custom_abs")
    op.dispatch["Autograd"] = "a_kernel"
    return ["openreg::custom_abs.default: operators.yaml declares a kernel for Autograd, none is registered"]


def _drop_fake(namespaces):
    _, op = _find(namespaces, "openreg", "custom_abs.out")
    op.fake = None
    return ["openreg::custom_abs.out: a kernel for Meta is registered but not declared"]


def _drop_tag(namespaces):
    _, op = _find(namespaces, "openreg", "custom_abs.out")
    op.tags = [tag for tag in op.tags if tag != "out"]
    return ["openreg::custom_abs.out: registered tags"]


@pytest.mark.parametrize(
    "mutate",
    [
        _drop_operator,
        _declare_missing_operator,
        _edit_schema,
        _drop_dispatch_key,
        _add_dispatch_key,
        _drop_fake,
        _drop_tag,
    ],
)
def test_every_kind_of_disagreement_is_reported(registry, mutate):
    edited = gen_custom_ops.load(YAML_PATH)
    expected = mutate(edited)
    problems = compare(edited, registry)
    assert len(problems) == len(expected), problems
    for problem, prefix in zip(problems, expected):
        assert problem.startswith(prefix), (problem, prefix)


# The generator, on a YAML written here.

SMALL_YAML = """
demo:
  library: demo._C
  cpp_namespace: demo::kernels
  operators:
    - func: twice(Tensor self, int times=2) -> Tensor
      tags: [pt2_compliant_tag]
      dispatch:
        CPU: twice_cpu
        PrivateUse1: twice_openreg
        Autograd: torch::autograd::autogradNotImplementedFallback()
    - func: twice.out(Tensor self, int times=2, *, Tensor(a!) out) -> Tensor(a!)
      tags: [out]
      dispatch:
        CPU: twice_out_cpu
    - func: plain(Tensor(a) self) -> Tensor(a)
      dispatch:
        CompositeImplicitAutograd: plain
other:
  library: other._C
  cpp_namespace: other
  operators:
    - func: unrelated(Tensor x) -> Tensor
      dispatch:
        CPU: unrelated
"""


def _generate(tmp_path, text, library="demo._C"):
    path = tmp_path / "operators.yaml"
    path.write_text(text)
    return gen_custom_ops.generate(gen_custom_ops.load(path), library)


def _blocks(source):
    """{first line of a top-level block: its statements} of generated C++."""
    blocks = {}
    for block in re.findall(r"^(\w[^\n]*\{)\n(.*?)^\}", source, re.MULTILINE | re.DOTALL):
        blocks[block[0]] = [line.strip() for line in block[1].splitlines() if line.strip()]
    return blocks


def test_the_generator_defines_each_schema_with_its_tags_and_registers_each_kernel_per_key(tmp_path):
    blocks = _blocks(_generate(tmp_path, SMALL_YAML))
    assert blocks == {
        # The kernels' declarations: the schema's C++ signature, which TORCH_FN
        # checks against the schema when the library loads.
        "namespace demo::kernels {": [
            "at::Tensor twice_cpu(const at::Tensor & self, int64_t times);",
            "at::Tensor twice_openreg(const at::Tensor & self, int64_t times);",
            "at::Tensor & twice_out_cpu(const at::Tensor & self, int64_t times, at::Tensor & out);",
            "at::Tensor plain(const at::Tensor & self);",
        ],
        "TORCH_LIBRARY(demo, m) {": [
            'm.def("twice(Tensor self, int times=2) -> Tensor", {at::Tag::pt2_compliant_tag});',
            'm.def("twice.out(Tensor self, int times=2, *, Tensor(a!) out) -> Tensor(a!)", {at::Tag::out});',
            'm.def("plain(Tensor(a) self) -> Tensor(a)");',
        ],
        "TORCH_LIBRARY_IMPL(demo, CPU, m) {": [
            'm.impl("twice", TORCH_FN(demo::kernels::twice_cpu));',
            'm.impl("twice.out", TORCH_FN(demo::kernels::twice_out_cpu));',
        ],
        "TORCH_LIBRARY_IMPL(demo, PrivateUse1, m) {": ['m.impl("twice", TORCH_FN(demo::kernels::twice_openreg));'],
        "TORCH_LIBRARY_IMPL(demo, Autograd, m) {": [
            'm.impl("twice", torch::autograd::autogradNotImplementedFallback());'
        ],
        "TORCH_LIBRARY_IMPL(demo, CompositeImplicitAutograd, m) {": [
            'm.impl("plain", TORCH_FN(demo::kernels::plain));'
        ],
    }


def test_the_generator_names_the_fake_kernel_registrar_only_where_a_fake_kernel_is_declared(tmp_path):
    with_fake = SMALL_YAML.replace(
        "  operators:\n    - func: twice(", "  python_module: demo.fakes\n  operators:\n    - func: twice("
    ).replace(
        "        Autograd: torch::autograd::autogradNotImplementedFallback()\n",
        "        Autograd: torch::autograd::autogradNotImplementedFallback()\n      fake: twice_fake\n",
    )
    statements = _blocks(_generate(tmp_path, with_fake))["TORCH_LIBRARY(demo, m) {"]
    assert statements[0] == f'm.set_python_module("{gen_custom_ops.FAKE_KERNEL_REGISTRAR}");'
    assert not any(
        "set_python_module" in s for s in _blocks(_generate(tmp_path, SMALL_YAML))["TORCH_LIBRARY(demo, m) {"]
    )


def test_the_generator_writes_only_what_changed(tmp_path):
    # An unchanged YAML leaves the generated file (and the incremental build)
    # alone; a changed one rewrites it, which makes ninja recompile it.
    output = tmp_path / "Register.cpp"
    assert gen_custom_ops.write_if_changed(output, "a")
    os.utime(output, (0, 0))
    assert not gen_custom_ops.write_if_changed(output, "a")
    assert os.stat(output).st_mtime == 0
    assert gen_custom_ops.write_if_changed(output, "b")
    assert output.read_text() == "b"


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("func: twice.out(", "fun: twice.out(", "demo entry 1: an entry is a mapping with a `func:` schema"),
        (
            "      tags: [out]",
            "      tag: [out]",
            "demo entry 'twice.out(Tensor self, int times=2, *, Tensor(a!) out) -> Tensor(a!)': unknown key(s) ['tag']",
        ),
        (
            "twice(Tensor self, int times=2)",
            "twice(Tensor self, int times=2",
            "demo entry 'twice(Tensor self, int times=2 -> Tensor': cannot parse the schema",
        ),
        ("twice(Tensor self,", "demo::twice(Tensor self,", "`func` omits the namespace"),
        (
            "[pt2_compliant_tag]",
            "[pt2_compliant]",
            "demo entry 'twice(Tensor self, int times=2) -> Tensor': unknown tag 'pt2_compliant'",
        ),
        ("PrivateUse1: twice_openreg", "Cuda: twice_openreg", "unknown dispatch key 'Cuda'"),
        ("CPU: twice_cpu", "CPU: twice-cpu", "the CPU kernel must be a function name, got 'twice-cpu'"),
        ("CPU: twice_cpu", "CPU: [twice_cpu]", "the CPU kernel must be a function name, got ['twice_cpu']"),
        ("CPU: twice_cpu", "CPU: demo::twice_cpu", "the CPU kernel must be a function name, got 'demo::twice_cpu'"),
        ("func: plain(", "func: twice(", "twice is declared twice"),
        ("  cpp_namespace: demo::kernels\n", "", "demo: a namespace built into a C++ library needs `cpp_namespace`"),
        (
            "      dispatch:\n        CompositeImplicitAutograd: plain\n",
            "      dispatch: {}\n",
            "plain(Tensor(a) self) -> Tensor(a)': `dispatch` maps",
        ),
        (
            "      dispatch:\n        CompositeImplicitAutograd: plain\n",
            "      dispatch:\n        CompositeImplicitAutograd: plain\n      fake: plain_fake\n",
            "names Python functions but the namespace has no `python_module`",
        ),
    ],
)
def test_a_malformed_entry_is_an_error_naming_it(tmp_path, old, new, message):
    assert old in SMALL_YAML
    with pytest.raises(gen_custom_ops.OperatorYamlError) as error:
        _generate(tmp_path, SMALL_YAML.replace(old, new, 1))
    assert str(error.value).startswith("operators.yaml, ")
    assert message in str(error.value)


def test_a_malformed_python_entry_fails_the_build_too(tmp_path):
    # Python namespaces are registered at import, but checked by the generator,
    # which every build runs.
    python_yaml = """
demo_py:
  python_module: demo.kernels
  operators:
    - func: twice(Tensor x) -> Tensor
      dispatch:
        CPU: twice_cpu
      autograd: {backward: twice_backward}
"""
    with pytest.raises(
        gen_custom_ops.OperatorYamlError, match=r"demo_py entry 'twice\(Tensor x\) -> Tensor': `autograd` names"
    ):
        _generate(tmp_path, python_yaml)
    assert "TORCH_LIBRARY" not in _generate(
        tmp_path, python_yaml.replace("{backward: twice_backward}", "{backward: b, setup_context: s}")
    )
