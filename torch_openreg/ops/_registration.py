"""The Python side of operators.yaml, registered at import.

- the fake kernels of the C++ namespaces (``fake:``): the build registers their
  schemas and kernels (tools/gen_custom_ops.py), but a fake kernel is a Python
  function, registered here with ``torch.library.register_fake``;
- the operators of the Python namespaces (no ``library:``): each entry becomes
  a ``torch.library.custom_op`` with the YAML's schema and tags, its kernels
  registered per device, its fake kernel and its autograd formula.

The build has checked every entry (a malformed one fails ``pip install``).
The generated C++ names this module as the one that registers the fake kernels
(``set_python_module``): torch imports it when a trace needs one before
``torch_openreg`` was imported, and checks that ``register_fake`` is called
from here.
"""

import importlib
import os

import torch
import yaml

OPERATORS_YAML = os.path.join(os.path.dirname(os.path.abspath(__file__)), "operators.yaml")


def _device_type(dispatch_key: str) -> str:
    """The device type torch.library names a backend dispatch key by."""
    if dispatch_key == "PrivateUse1":
        return torch._C._get_privateuse1_backend_name()
    return dispatch_key.lower()


def _name(entry: dict) -> str:
    """name.overload, from the entry's schema."""
    return entry["func"].split("(", 1)[0]


def _define_python_operator(namespace: str, module, entry: dict):
    name = _name(entry)
    arguments = torch._C.parse_schema(f"{namespace}::{entry['func']}").arguments
    (device_type, kernel), *other_kernels = (
        (_device_type(key), getattr(module, kernel)) for key, kernel in entry["dispatch"].items()
    )
    # custom_op checks the schema's (a!) annotations against mutates_args.
    op = torch.library.custom_op(
        f"{namespace}::{name}",
        kernel,
        mutates_args=[arg.name for arg in arguments if arg.alias_info is not None and arg.alias_info.is_write],
        device_types=device_type,
        schema=entry["func"][len(name) :],
        tags=[getattr(torch.Tag, tag) for tag in entry.get("tags", [])],
    )
    for device_type, kernel in other_kernels:
        op.register_kernel(device_type)(kernel)
    if "fake" in entry:
        op.register_fake(getattr(module, entry["fake"]))
    if "autograd" in entry:
        autograd = entry["autograd"]
        op.register_autograd(
            getattr(module, autograd["backward"]), setup_context=getattr(module, autograd["setup_context"])
        )
    return op


def register_python_side() -> dict:
    """Registers what operators.yaml names in Python; returns the Python
    operators by name (``torch.library.CustomOpDef``)."""
    with open(OPERATORS_YAML) as f:
        spec = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    python_ops = {}
    for namespace, body in spec.items():
        if "python_module" not in body:
            continue
        module = importlib.import_module(body["python_module"])
        for entry in body["operators"]:
            if "library" not in body:
                python_ops[_name(entry)] = _define_python_operator(namespace, module, entry)
            elif "fake" in entry:
                torch.library.register_fake(f"{namespace}::{_name(entry)}")(getattr(module, entry["fake"]))
    return python_ops
