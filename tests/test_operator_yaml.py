"""torch_openreg/ops/operators.yaml is the single source of truth for the
package's custom operators: these tests fail whenever it and the dispatcher
disagree on an operator's presence, schema text, variants, tags, or the dispatch
keys that have a kernel. (Which source file registers what is not checked: the
tests of each operator check what its kernels do.)

The registry is read in a fresh process that has also loaded the extra
operator library, so that every namespace the package owns is present and
nothing a test registered leaks in.
"""
import copy
import json
import os
import re
import sys

import pytest
import torch
import yaml

import torch_openreg
from conftest import check_ok, run_python

YAML_PATH = os.path.join(os.path.dirname(torch_openreg.ops.__file__), "operators.yaml")
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))

# "KEY: registered at ... :: SCHEMA" in torch._C._dispatch_dump (the schema's own
# line, "debug: registered at ...", has no "::"); alias keys read "KEY[alias]: ...",
# superseded registrations "KEY (inactive): ...".
_KERNEL_LINE = re.compile(r"^(\w+)(?:\[alias\])?: registered at .+ ::", re.MULTILINE)


def load_spec(path=YAML_PATH):
    with open(path) as f:
        return yaml.safe_load(f)


def declared_ops(spec):
    """{"ns::name.overload": {"schema", "tags", "dispatch"}} from the YAML (dispatch: the sorted keys)."""
    ops = {}
    for namespace, library in spec.items():
        for name, op in library["operators"].items():
            for overload, variant in op["variants"].items():
                ops[f"{namespace}::{name}.{overload}"] = {
                    "schema": variant["schema"],
                    "tags": sorted(variant.get("tags", [])),
                    "dispatch": sorted(variant["dispatch"]),
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


def compare(spec, registry):
    """Every disagreement between the YAML and the registry, one line each."""
    declared = declared_ops(spec)
    problems = [
        f"{op}: registered ({registry[op]['schema']}) but not declared in operators.yaml"
        for op in sorted(registry.keys() - declared.keys())
    ]
    problems += [f"{op}: declared in operators.yaml but not registered" for op in sorted(declared.keys() - registry.keys())]
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


def collect_registry(namespaces, setup=""):
    """registry_view(namespaces) in a fresh process that loaded the extra
    operators, after running `setup` there."""
    code = f"""
        import json, sys
        sys.path.insert(0, {TESTS_DIR!r})
        import torch, torch_openreg
        torch.ops.load_library(torch_openreg.extra_ops_path())
        {setup}
        from test_operator_yaml import registry_view
        print(json.dumps(registry_view({sorted(namespaces)!r})))
    """
    return json.loads(check_ok(run_python(code)).splitlines()[-1])


@pytest.fixture(scope="module")
def spec():
    return load_spec()


@pytest.fixture(scope="module")
def registry(spec):
    return collect_registry(spec)


def test_yaml_declares_the_namespaces_the_package_owns(spec):
    assert set(spec) == {"openreg", "openreg_py", "openreg_extra"}


def test_yaml_matches_the_registered_operators(spec, registry):
    assert compare(spec, registry) == []


def test_an_operator_added_without_a_yaml_entry_is_reported(spec):
    # A throwaway operator in the package's own namespace, as a C++ or Python
    # registration would add it.
    setup = (
        "lib = torch.library.Library('openreg', 'FRAGMENT'); "
        "lib.define('undeclared_op(Tensor x) -> Tensor'); "
        "lib.impl('undeclared_op', lambda x: x.clone(), 'CPU')"
    )
    problems = compare(spec, collect_registry(spec, setup))
    assert problems == [
        "openreg::undeclared_op.default: registered (openreg::undeclared_op(Tensor x) -> Tensor) "
        "but not declared in operators.yaml"
    ]


def _drop_operator(spec):
    del spec["openreg"]["operators"]["scaled_tanh"]
    return ["openreg::scaled_tanh.default: registered", "openreg::scaled_tanh.out: registered"]


def _drop_out_variant(spec):
    del spec["openreg"]["operators"]["custom_abs"]["variants"]["out"]
    return ["openreg::custom_abs.out: registered"]


def _declare_missing_variant(spec):
    spec["openreg_extra"]["operators"]["rms_norm"]["variants"]["out"] = copy.deepcopy(
        spec["openreg_extra"]["operators"]["rms_norm"]["variants"]["default"]
    )
    return ["openreg_extra::rms_norm.out: declared in operators.yaml but not registered"]


def _edit_schema(spec):
    variant = spec["openreg"]["operators"]["scaled_tanh"]["variants"]["default"]
    variant["schema"] = variant["schema"].replace("float scale", "float scale=1.")
    return ["openreg::scaled_tanh.default: registered schema"]


def _drop_dispatch_key(spec):
    del spec["openreg_py"]["operators"]["smooth_clamp"]["variants"]["default"]["dispatch"]["PrivateUse1"]
    return ["openreg_py::smooth_clamp.default: a kernel for PrivateUse1 is registered but not declared"]


def _add_dispatch_key(spec):
    spec["openreg"]["operators"]["custom_abs"]["variants"]["default"]["dispatch"]["Autograd"] = "a kernel"
    return ["openreg::custom_abs.default: operators.yaml declares a kernel for Autograd, none is registered"]


def _drop_tag(spec):
    spec["openreg"]["operators"]["custom_abs"]["variants"]["out"]["tags"].remove("out")
    return ["openreg::custom_abs.out: registered tags"]


@pytest.mark.parametrize(
    "mutate",
    [
        _drop_operator,
        _drop_out_variant,
        _declare_missing_variant,
        _edit_schema,
        _drop_dispatch_key,
        _add_dispatch_key,
        _drop_tag,
    ],
)
def test_every_kind_of_disagreement_is_reported(spec, registry, mutate):
    edited = copy.deepcopy(spec)
    expected = mutate(edited)
    problems = compare(edited, registry)
    assert len(problems) == len(expected), problems
    for problem, prefix in zip(problems, expected):
        assert problem.startswith(prefix), (problem, prefix)
