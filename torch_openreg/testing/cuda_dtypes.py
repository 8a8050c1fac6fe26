"""OpInfo's dtypes for openreg: the CPU's, less those openreg refuses as CUDA does, and those it computes where the
CPU's kernels do not (in a wider dtype, or by a kernel of its own), as CUDA computes them (docs/cuda-contract.md).

OpInfo tests a device with ``op.dtypesIf[<device type>]``, falling back to the CPU's dtypes. Without an entry,
PyTorch's device-generic tests and this package's suites would expect openreg to compute the dtypes CUDA refuses, and
to refuse those it widens.
``apply`` gives every OpInfo that a CUDA contract rule names (its ``opinfos``) an ``openreg`` entry; the package
calls it right after ``torch.testing._internal.common_methods_invocations`` is imported.
"""

import torch

# c10's names, as cuda_contract.yaml and AT_DISPATCH's messages spell dtypes.
_DTYPES = {
    "Bool": torch.bool,
    "Byte": torch.uint8,
    "Char": torch.int8,
    "Short": torch.int16,
    "Int": torch.int32,
    "Long": torch.int64,
    "Half": torch.float16,
    "BFloat16": torch.bfloat16,
    "Float": torch.float32,
    "Double": torch.float64,
    "ComplexHalf": torch.complex32,
    "ComplexFloat": torch.complex64,
    "ComplexDouble": torch.complex128,
    "Float8_e4m3fn": torch.float8_e4m3fn,
    "Float8_e4m3fnuz": torch.float8_e4m3fnuz,
    "Float8_e5m2": torch.float8_e5m2,
    "Float8_e5m2fnuz": torch.float8_e5m2fnuz,
}


def refused_by_opinfo() -> dict[str, set]:
    """OpInfo full name -> the dtypes openreg refuses for it (every dtype for an operator CUDA lacks)."""
    from torch_openreg.openreg import cuda_contract

    table = cuda_contract._table()
    refused = {}
    for entry in table["dtype_refusals"]:
        for name in entry.get("opinfos", ()):
            refused.setdefault(name, set()).update(_DTYPES[dtype] for dtype in entry["dtypes"])
    for entry in table["missing_on_cuda"]:
        for name in entry.get("opinfos", ()):
            refused.setdefault(name, set()).update(_DTYPES.values())
    return refused


def computed_by_opinfo() -> dict[str, set]:
    """OpInfo full name -> the dtypes openreg computes for it where the CPU's kernels do not, as CUDA computes them:
    in a wider dtype (``widened_dtypes``) or by a kernel of its own (``composed_dtypes``)."""
    from torch_openreg.openreg import cuda_contract

    table = cuda_contract._table()
    computed = {}
    for entry in table["widened_dtypes"] + table["composed_dtypes"]:
        for name in entry.get("opinfos", ()):
            computed.setdefault(name, set()).update(_DTYPES[dtype] for dtype in entry["dtypes"])
    return computed


def opinfo_differences() -> dict[str, tuple[set, set]]:
    """OpInfo full name -> (the CPU dtypes its CUDA dtypes lack, the CUDA dtypes its CPU dtypes lack), in the installed
    torch's database, with the capability-dependent entries resolved as on an sm_80 GPU (bfloat16 matrix products work
    there). Call it in a fresh process: it sets the database's capability flags before the database is imported."""
    import re
    import sys

    assert "torch.testing._internal.common_methods_invocations" not in sys.modules, "call in a fresh process"
    from torch.testing._internal import common_cuda

    # The database reads these capability flags (SM53OrLater, SM80OrLater, ...) when it is imported.
    for name in dir(common_cuda):
        match = re.fullmatch(r"SM(\d)(\d)OrLater", name)
        if match:
            setattr(common_cuda, name, (int(match[1]), int(match[2])) <= (8, 0))
    from torch.testing._internal.common_methods_invocations import op_db

    differences = {}
    for op in op_db:
        cuda = set(op.dtypesIf.get("cuda", op.dtypes))
        cpu_only, cuda_only = set(op.dtypes) - cuda, cuda - set(op.dtypes)
        if cpu_only or cuda_only:
            differences[op.full_name] = (cpu_only, cuda_only)
    return differences


def recorded_by_opinfo(kind: str) -> dict[str, set]:
    """OpInfo full name -> the dtypes cuda_contract.yaml records, with a reason, as ``not_refused`` (CPU-only dtypes
    openreg computes) or ``not_widened`` (CUDA-only dtypes openreg does not compute where the CPU's kernels do not)."""
    from torch_openreg.openreg import cuda_contract

    listed = {}
    for entry in cuda_contract._table().get(kind, ()):
        for name in entry["opinfos"]:
            listed.setdefault(name, set()).update(_DTYPES[dtype] for dtype in entry["dtypes"])
    return listed


def apply(op_db) -> None:
    if not torch.openreg.cuda_contract.is_enabled():
        return
    refused = refused_by_opinfo()
    computed = computed_by_opinfo()
    for op in op_db:
        less = refused.get(op.full_name, set()) | refused.get(op.name, set())
        # Only the dtypes CUDA's OpInfo entry has: a rule's operator may serve several OpInfos.
        more = (computed.get(op.full_name, set()) | computed.get(op.name, set())) & set(op.dtypesIf.get("cuda", ()))
        if less or more:
            op.dtypesIf["openreg"] = (set(op.dtypes) - less) | more


def register() -> None:
    from torch.testing._internal import common_methods_invocations

    apply(common_methods_invocations.op_db)
