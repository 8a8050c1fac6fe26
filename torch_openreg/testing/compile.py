"""The compile suite: every operator of ``op_db`` through ``torch.compile`` on openreg, against eager CPU.

A job is one operator at one dtype, as in the OpInfo suite (``opinfo.py``,
whose samples and placement it reuses); its cases are, per sample, the
function variant (``forward``) and, for differentiable operators at float32
and float64, the gradients of the compiled function (``backward``: Inductor
compiles the backward graph when it first runs). Each case runs three times:
eagerly on the CPU (the reference), compiled for the CPU and compiled for
openreg, each compilation from a reset Dynamo, so a case never depends on the
ones before it (a crashed worker resumes at the next case).

* Compiled CPU and compiled openreg both agree with eager CPU: passed.
* Compiled CPU agrees, compiled openreg does not: failed (openreg's bug).
* Compiled CPU differs from eager CPU (Inductor's own limitation, not the
  device's): openreg must then agree with compiled CPU, which ran the same
  generated C++ code; if it does, the case is skipped with
  ``CPU_DIFFERS`` as its message and its (operator, dtype) pair is left out
  of the pass rate; if not, the case fails.

With ``--aoti`` both compilations are ahead of time instead: each case's
function is exported with the sample's arguments (``torch.export``),
compiled into a package by AOTInductor (``aoti_compile_and_package``), once
for the CPU and once for openreg, and the loaded packages run the sample; the
rules above apply with "AOTInductor on the CPU" as the compiled CPU side.
AOTInductor compiles inference graphs, so only forward cases run.

Random operators run with ``torch._inductor.config.fallback_random`` (the
eager generators, seeded alike), so they are compared like the others.

Tolerances are those of PyTorch's Inductor OpInfo test
(``test/inductor/test_torchinductor_opinfo.py``, ``test_comprehensive``, not
shipped in the wheel): rtol 1.3e-5 and atol 1.5e-5 for float32, the
``torch.testing`` defaults for the other dtypes, each raised to an OpInfo's
own ``toleranceOverride`` for ``TestInductorOpInfo.test_comprehensive`` on the
CPU where it has one (openreg runs Inductor's CPU code generator), as
``TestCase.assertEqual`` takes the larger of the two. Integer and bool
results compare exactly.
"""

import functools
import os
import tempfile

import torch
import torch._inductor.config
from torch.testing._comparison import default_tolerances
from torch.utils import _pytree as pytree
from torch.testing._internal.common_device_type import toleranceOverride
from torch.testing._internal.opinfo.core import DecorateInfo

from . import defaults, opinfo
from .checks import SkipCase, outcome, same_outcome
from .compare import assert_matches
from .placement import DEVICE, devices_in
from .worker import describe

DEFAULT_DTYPES = defaults.COMPILE_DTYPES
INDUCTOR_FLOAT32_TOLERANCES = {"rtol": 1.3e-5, "atol": 1.5e-5}
DEFAULT_BACKEND = defaults.COMPILE_BACKEND
AOTI = defaults.COMPILE_AOTI
CPU_DIFFERS = "compiled CPU differs from eager CPU (not counted; openreg agrees with compiled CPU)"


def list_jobs(ops=None, dtypes=DEFAULT_DTYPES, max_samples=None, names=None, backend=DEFAULT_BACKEND):
    return opinfo.list_jobs(ops, dtypes, max_samples, names, suite="compile", backend=backend)


def iter_cases(job):
    """Yields ``(variant, sample_index, check)`` for the job, deterministically."""
    op = opinfo.ops_by_name()[job["name"]]
    dtype = getattr(torch, job["dtype"])
    rule = {
        "exact": False,
        "metadata_only": op.name in opinfo.UNINITIALIZED_RESULT,
        "tolerances": inductor_tolerances(op, dtype),
    }
    backend = job["backend"]
    for index, (_, parts) in enumerate(opinfo.sample_pairs(op, dtype, False, job["max_samples"])):
        forward = functools.partial(opinfo.call_sample, seed=index)
        yield "forward", index, functools.partial(_check, forward, op, parts, rule, backend)
    if op.supports_autograd and dtype in opinfo.GRAD_DTYPES and backend != AOTI:
        for index, (sample, parts) in enumerate(opinfo.sample_pairs(op, dtype, True, job["max_samples"])):
            backward = functools.partial(opinfo.gradients, sample=sample, seed=index)
            yield "backward", index, functools.partial(_check, backward, op, parts, rule, backend)


def inductor_tolerances(op, dtype):
    """``{"rtol", "atol"}`` of Inductor's OpInfo test for ``op`` at ``dtype`` on the CPU."""
    tolerances = dict(INDUCTOR_FLOAT32_TOLERANCES) if dtype == torch.float32 else _defaults(dtype)
    for info in op.decorators:
        if not isinstance(info, DecorateInfo) or not info.is_active(
            "TestInductorOpInfo", "test_comprehensive", "cpu", dtype, {}
        ):
            continue
        for decorator in info.decorators:
            if isinstance(decorator, toleranceOverride) and dtype in decorator.d:
                override = decorator.d[dtype]
                tolerances = {
                    "rtol": max(tolerances["rtol"], override.rtol),
                    "atol": max(tolerances["atol"], override.atol),
                }
    return tolerances


def _defaults(dtype):
    rtol, atol = default_tolerances(dtype)
    return {"rtol": rtol, "atol": atol}


def _check(compute, op, parts, rule, backend):
    """``compute(fn, parts)`` eagerly on the CPU, compiled for the CPU and compiled for openreg; see the module doc."""
    reference = outcome(lambda: compute(op.op, parts.cpu))
    if isinstance(reference[1], SkipCase):
        raise reference[1]
    device_parts = parts.on_device()
    with torch._inductor.config.patch(fallback_random=True):
        on_cpu = outcome(lambda: compute(_compiled(op.op, AOTI if backend == AOTI else DEFAULT_BACKEND), parts.cpu))
        on_device = outcome(lambda: compute(_compiled(op.op, backend), device_parts))
    devices = devices_in(device_parts) & {"cpu", DEVICE} or {"cpu"}
    cpu_mismatch = _mismatch(reference, on_cpu, ("eager CPU", "compiled CPU"), rule, "cpu")
    if cpu_mismatch is None:
        device_mismatch = _mismatch(reference, on_device, ("eager CPU", "compiled openreg"), rule, devices)
        if device_mismatch is not None:
            raise AssertionError(f"compiled {DEVICE} against eager CPU: {device_mismatch}")
        return
    versus_cpu = _mismatch(on_cpu, on_device, ("compiled CPU", "compiled openreg"), rule, devices)
    if versus_cpu is not None:
        raise AssertionError(f"{versus_cpu} (and compiled CPU differs from eager CPU: {cpu_mismatch})")
    raise SkipCase(f"{CPU_DIFFERS}: {cpu_mismatch}")


def _compiled(fn, backend):
    torch._dynamo.reset()
    if backend == AOTI:
        return _ahead_of_time(fn)
    return torch.compile(fn, backend=backend)


def _ahead_of_time(fn):
    """``fn`` as a deployment runs it: exported with the call's arguments, compiled by AOTInductor into a package
    for the arguments' device, loaded and run."""

    class Call(torch.nn.Module):
        def forward(self, *args, **kwargs):
            return fn(*args, **kwargs)

    def run(*args, **kwargs):
        # A package's inputs are matched against the exported tree of arguments, in which a torch.Size (an
        # output_size) was a tuple.
        args, kwargs = pytree.tree_map(
            lambda value: tuple(value) if isinstance(value, torch.Size) else value,
            (args, kwargs),
            is_leaf=lambda value: isinstance(value, torch.Size),
        )
        program = torch.export.export(Call(), args, kwargs)
        with tempfile.TemporaryDirectory() as directory:
            package = torch._inductor.aoti_compile_and_package(program, package_path=os.path.join(directory, "op.pt2"))
            return torch._inductor.aoti_load_package(package)(*args, **kwargs)

    return run


def _mismatch(expected, actual, names, rule, device):
    """How the two outcomes differ, or None when they agree."""
    try:
        results = same_outcome(expected, actual, names)
        if results is not None:
            assert_matches(results[1], results[0], device=device, **rule)
    except Exception as error:  # noqa: BLE001 - any difference, an error of one side included, is the answer
        return describe(error)
    return None


def pair_summary(groups):
    """Counts per (operator, dtype) pair from a report's ``groups``: the pairs whose every case ran and none
    has compiled CPU differ from eager CPU, and of those the ones whose every case passed on openreg."""
    pairs = {}
    for name, group in groups.items():
        for case in group["cases"]:
            statuses = pairs.setdefault((name, case["dtype"]), set())
            differs = case["status"] == "skipped" and case.get("message", "").startswith(CPU_DIFFERS)
            statuses.add("cpu_differs" if differs else case["status"])
    counted = [statuses for statuses in pairs.values() if "cpu_differs" not in statuses and statuses != {"skipped"}]
    passing = sum(1 for statuses in counted if statuses <= {"passed", "skipped"})
    return {
        "pairs": len(pairs),
        "pass_compiled_on_cpu": len(counted),
        "pass_on_openreg": passing,
        "cpu_differs": sum(1 for statuses in pairs.values() if "cpu_differs" in statuses),
    }


def summary_line(summary):
    counted, passing = summary["pass_compiled_on_cpu"], summary["pass_on_openreg"]
    rate = f"{100 * passing / counted:.2f}%" if counted else "n/a"
    return (
        f"(op, dtype) pairs: {summary['pairs']}; {counted} pass compiled on the CPU, {passing} of them on "
        f"{DEVICE} too ({rate}); {summary['cpu_differs']} differ from eager when compiled on the CPU (not counted)"
    )
