"""Which aten operators give openreg a composite where the CPU has a kernel of its own.

``python -m torch_openreg.testing.composite_routing`` prints them.

For an operator without an openreg kernel, the dispatcher prefers a composite
(``CompositeExplicitAutograd``, ``CompositeExplicitAutogradNonFunctional``,
``CompositeImplicitAutograd``) to the backend fallback. Where the CPU has a
dedicated kernel, the composite is a second implementation: other rounding
(``silu``/``mish`` backward, ``addr``), other output strides (``pixel_shuffle``
of a channels-last input), other argument checks. Those operators are
registered to the CPU fallback by name (``routed_to_the_host()``, so the
CPU kernel runs on device memory), or kept on their composite for a reason
listed in ``KEPT_COMPOSITES``. ``tests/test_composite_routing.py`` fails when a
PyTorch update adds an operator to the class that is in neither list.

What PrivateUse1 would get from PyTorch alone is read from the dispatch table
of ``PrivateUse2``, a backend key nobody registers: the same computation
without openreg's registrations. The generated functional and in-place
kernels of structured operators (``structured_delegate`` in
``native_functions.yaml``) are not in the class: they run the operator's
``.out`` overload, on openreg the CPU's ``.out`` kernel, with the same meta
function (the functional ones of TensorIterator operators are routed to the
CPU's own kernel instead: ``csrc/aten/StructuredDefaults.cpp``). Whether CUDA has a kernel of its own comes from
``native_functions.yaml`` (shipped with torch in ``torchgen``), since a CPU
build registers no CUDA kernels.
"""

import dataclasses
import functools
import os
import re

import torch

COMPOSITE_KEYS = (
    "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional",
    "CompositeImplicitAutograd",
)

# The key whose dispatch table shows what PyTorch alone gives a PrivateUse1
# backend (no kernels, no fallback are registered for it).
REFERENCE_KEY = "PrivateUse2"

# Candidates deliberately left on their composite. Each reason says why the
# composite is right for openreg; tests/test_composite_routing.py also checks
# their results against the CPU.
KEPT_COMPOSITES = {
    "aten::narrow_copy": "CUDA uses the same composite (narrow + contiguous clone); it only moves data, "
    "with the CPU kernel's values and layout",
}


@dataclasses.dataclass(frozen=True)
class Candidate:
    name: str  # "aten::silu_backward"
    composite: str  # the composite key PrivateUse1 reaches without openreg's kernel
    cuda_has_kernel: bool  # CUDA builds register a kernel of their own
    status: str  # "routed" (Fallback.cpp), "openreg kernel" (another csrc file), "kept", "unrouted"

    @property
    def reason(self):
        return KEPT_COMPOSITES.get(self.name, "")


def _table_entry(name, key):
    for line in torch._C._dispatch_dump_table(name).splitlines():
        if line.startswith(key + ":"):
            return line
    return ""


def _entry_kind(entry):
    match = re.search(r"\[([^\]]+)\]$", entry)
    return match.group(1) if match else ""


def _composite_of(entry):
    match = re.search(r"Register(Composite\w+?)(_\d+)?\.cpp", entry)
    return match.group(1) if match else ""


@functools.lru_cache(maxsize=None)
def native_functions():
    """{"silu_backward": entry} from torchgen's copy of native_functions.yaml."""
    import torchgen
    import yaml

    path = os.path.join(torchgen.__path__[0], "packaged", "ATen", "native", "native_functions.yaml")
    with open(path) as f:
        entries = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return {entry["func"].split("(")[0]: entry for entry in entries}


def _dispatch_keys(entry):
    keys = set()
    for key_list in (entry or {}).get("dispatch", {}):
        keys.update(key.strip() for key in key_list.split(","))
    return keys


def cuda_has_kernel(name):
    """Whether a CUDA build registers a kernel of its own for `name` (directly,
    or generated from the `.out` overload a structured operator delegates to)."""
    entries = native_functions()
    entry = entries.get(name.removeprefix("aten::"))
    if entry is None:
        return False
    if "CUDA" in _dispatch_keys(entry):
        return True
    delegate = entry.get("structured_delegate")
    return delegate is not None and "CUDA" in _dispatch_keys(entries.get(delegate))


def _reaches_composite(name):
    """The composite key PyTorch alone gives a PrivateUse1 backend for `name`
    where the CPU has a kernel of its own; "" if none (or only a generated
    structured default, which runs the `.out` kernel)."""
    has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
    if not has_kernel(name, "CPU"):
        return ""
    backend = _table_entry(name, REFERENCE_KEY)
    autograd = _table_entry(name, "Autograd" + REFERENCE_KEY)
    # A CompositeImplicitAutograd kernel reached at the autograd key
    # decomposes the operator before any backend kernel is chosen.
    if _entry_kind(autograd) == "math kernel" or _entry_kind(backend) == "math kernel":
        return "CompositeImplicitAutograd"
    composite = _composite_of(backend) if _entry_kind(backend) == "default backend kernel" else ""
    if not composite:
        return ""
    entry = native_functions().get(name.removeprefix("aten::"), {})
    if entry.get("structured_delegate") and composite not in _dispatch_keys(entry):
        return ""  # generated from the structured `.out` overload
    return composite


@functools.cache
def routed_to_the_host():
    """The aten operators openreg registers by name to its CPU fallback (torch_openreg._C's list)."""
    from torch_openreg import _C

    return frozenset("aten::" + name for name in _C._operators_routed_to_the_host())


def _openreg_status(name):
    entry = _table_entry(name, "PrivateUse1")
    if name in routed_to_the_host():
        return "routed"
    if "/csrc/" in entry and _entry_kind(entry) == "kernel":
        return "openreg kernel"
    return "kept" if name in KEPT_COMPOSITES else "unrouted"


def candidates():
    """Every aten operator of the class, sorted by name."""
    found = []
    for name in sorted(torch._C._dispatch_get_all_op_names()):
        if not name.startswith("aten::"):
            continue
        composite = _reaches_composite(name)
        if composite:
            found.append(Candidate(name, composite, cuda_has_kernel(name), _openreg_status(name)))
    return found


def structured_defaults():
    """Operators served on openreg by a generated structured default, with the
    `.out` overload it runs: {"aten::mm": "aten::mm.out"}."""
    defaults = {}
    for name, entry in native_functions().items():
        delegate = entry.get("structured_delegate")
        qualified = "aten::" + name
        if delegate and "default backend kernel" in _table_entry(qualified, "PrivateUse1"):
            defaults[qualified] = "aten::" + delegate
    return defaults


def main():
    import torch_openreg  # noqa: F401  (the openreg registrations)

    rows = candidates()
    print(f"{len(rows)} aten operators where PrivateUse1 reaches a composite but the CPU has its own kernel")
    print(f"(torch {torch.__version__}; reference key {REFERENCE_KEY})\n")
    print(f"{'operator':32} {'composite':40} {'CUDA kernel':12} openreg")
    for row in rows:
        print(f"{row.name:32} {row.composite:40} {'yes' if row.cuda_has_kernel else 'no':12} {row.status}")
        if row.reason:
            print(f"{'':32}   kept: {row.reason}")
    unrouted = [row.name for row in rows if row.status == "unrouted"]
    print(f"\nunrouted: {', '.join(unrouted) if unrouted else 'none'}")
    return 1 if unrouted else 0


if __name__ == "__main__":
    raise SystemExit(main())
