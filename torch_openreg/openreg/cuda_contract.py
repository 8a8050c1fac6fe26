"""CUDA's contract where CUDA and the CPU disagree (docs/cuda-contract.md).

openreg's kernels are the CPU's, so without this a program that fails on a GPU would pass on openreg. On by default
(``OPENREG_CUDA_CONTRACT=0`` or ``disable()`` answers as the CPU does):

- a dtype CUDA's kernel lacks raises what CUDA raises (``"addmm_cuda" not implemented for 'Long'``); a dtype CUDA
  computes and the CPU does not is computed in a wider one and rounded back (complex32 ``sin``, half ``avg_pool3d``,
  integer ``torch.histc``);
- an operator CUDA has no kernel for (``torch.histogram``) raises ``NotImplementedError``;
- under ``torch.use_deterministic_algorithms(True)``, an operator whose CUDA kernel is nondeterministic raises (or
  warns, with ``warn_only=True``) through ATen's own alert, naming CUDA's kernel.

The rules are data, ``cuda_contract.yaml`` beside this file, each with its source in PyTorch's CUDA kernels;
``rules()`` lists them. Beside them, and not switched by this module: ``torch.empty`` honours
``torch.utils.deterministic.fill_uninitialized_memory``, and graph capture refuses what CUDA's capture refuses, as
CUDA does (the CPU has neither).
"""

import contextlib
import functools
import os

import torch

from .. import _C

__all__ = ["disable", "enable", "enabled", "is_enabled", "rules"]

_RULES_FILE = os.path.join(os.path.dirname(__file__), "cuda_contract.yaml")


@functools.cache
def _table() -> dict:
    import yaml

    # libyaml's loader where pyyaml has it: read at the first device use, it costs 5 ms instead of 70.
    with open(_RULES_FILE) as f:
        table = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    release = ".".join(torch.__version__.split(".")[:2])
    # An entry may hold for some releases only (`releases: ["2.13"]`).
    return {
        kind: [entry for entry in entries if release in entry.get("releases", [release])]
        for kind, entries in table.items()
    }


def rules() -> list[tuple[str, str, str]]:
    """Every rule in force for the installed torch: ``(operator, kind, what)``, kind being ``dtype``,
    ``nondeterministic``, ``missing_on_cuda`` or ``widened``."""
    listed = []
    table = _table()
    for entry in table["dtype_refusals"]:
        for op in entry["operators"]:
            listed.append((op, "dtype", f'"{entry["kernel"]}" refuses {", ".join(entry["dtypes"])}'))
    for entry in table["nondeterministic_alerts"]:
        for op in entry["operators"]:
            kind, argument, value, _ = _condition(entry)
            when = "always" if kind == "always" else f"{kind} {argument} {value}".strip()
            listed.append((op, "nondeterministic", f"{entry['caller']}, {when}"))
    for entry in table["missing_on_cuda"]:
        for op in entry["operators"]:
            listed.append((op, "missing_on_cuda", "CUDA has no kernel"))
    for entry in table["widened_dtypes"]:
        for op in entry["operators"]:
            listed.append((op, "widened", f'{", ".join(entry["dtypes"])} computed as {entry["computed_as"]}'))
    return sorted(listed)


def _condition(entry) -> tuple[str, str, str, str]:
    """``(kind, argument, value, input)`` of an alert's ``when``."""
    when = dict(entry.get("when", {}))
    input_argument = when.pop("input", "")
    if not when:
        return "always", "", "", ""
    ((kind, argument),) = when.items()
    value = entry.get("value", "")
    # YAML's true/false, as the C++ side compares them.
    value = str(value).lower() if isinstance(value, bool) else str(value)
    return kind, argument, value, input_argument


@functools.cache
def _register() -> None:
    """Hands the table to the fallback (csrc/aten/CudaContract.h): once, at lazy init, before any operator runs."""
    table = _table()
    for entry in table["dtype_refusals"]:
        arguments = entry["argument"]
        refusal = {
            "kernel": entry["kernel"],
            "arguments": [arguments] if isinstance(arguments, str) else arguments,
            "dtypes": entry["dtypes"],
            "when": _condition(entry),
            "message": entry.get("message", ""),
            "unless_empty": entry.get("unless_empty", False),
            "unless_same_size": entry.get("unless_same_size", False),
        }
        for op in entry["operators"]:
            _C._cuda_contract_add_dtype_refusal(op, refusal)
    for entry in table["nondeterministic_alerts"]:
        for op in entry["operators"]:
            _C._cuda_contract_add_alert(op, entry["caller"], _condition(entry))
    for entry in table["missing_on_cuda"]:
        for op in entry["operators"]:
            _C._cuda_contract_add_missing(op)
    for entry in table["widened_dtypes"]:
        for op in entry["operators"]:
            _C._cuda_contract_add_widening(op, entry["argument"], entry["dtypes"], entry["computed_as"])


def is_enabled() -> bool:
    """Whether openreg answers as CUDA where CUDA and the CPU differ."""
    return _C._cuda_contract_enabled()


def enable() -> None:
    """Answer as CUDA (the default)."""
    _C._set_cuda_contract_enabled(True)


def disable() -> None:
    """Answer as the CPU: openreg as a plain second device."""
    _C._set_cuda_contract_enabled(False)


@contextlib.contextmanager
def enabled(on: bool = True):
    """``with enabled(False):`` answers as the CPU inside the block (process-wide, like ``disable()``)."""
    before = is_enabled()
    _C._set_cuda_contract_enabled(on)
    try:
        yield
    finally:
        _C._set_cuda_contract_enabled(before)
