"""The OpInfo suite: every operator of PyTorch's ``op_db`` on openreg against the CPU.

A job is one operator at one dtype; its cases are, per sample input, the
function (``forward``), ``out`` and ``inplace`` variants, then ``backward``
over the samples generated with ``requires_grad=True``.

Comparison rule: integer and bool results are always compared exactly. So are
floating and complex results of the elementwise and shape operators
(UnaryUfuncInfo, BinaryUfuncInfo, ShapeFuncInfo): openreg runs the CPU's
TensorIterator kernels on the same values, so anything but bitwise equality is
a bug. Every other operator (reductions, normalization, linear algebra,
convolution, composites) and every backward is compared with
``torch.testing``'s default tolerances for the dtype, because PyTorch may
legitimately reach another implementation for a non-CPU device (a
CompositeExplicitAutograd decomposition such as ``math_native_layer_norm``
instead of the CPU kernel), which rounds differently.
"""

import functools
import itertools
import re

import torch

from torch.testing._internal.opinfo.core import BinaryUfuncInfo, ShapeFuncInfo, UnaryUfuncInfo

from . import defaults
from .checks import SkipCase, expect_same_outcome
from .compare import assert_matches
from .placement import DEVICE, devices_in, place_like, tensors_in, to_device

DEFAULT_DTYPES = defaults.OPINFO_DTYPES
GRAD_DTYPES = (torch.float32, torch.float64)
# Operators whose result is uninitialized memory: only dtype, shape and device compare.
UNINITIALIZED_RESULT = {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided"}
SAMPLE_SEED = 0
EXACT_FAMILIES = (UnaryUfuncInfo, BinaryUfuncInfo, ShapeFuncInfo)


@functools.cache
def ops_by_name():
    from torch.testing._internal.common_methods_invocations import op_db

    return {op.full_name: op for op in op_db}


def list_jobs(ops=None, dtypes=DEFAULT_DTYPES, max_samples=None, names=None, suite="opinfo", **fields):
    """Jobs for the operators whose full name matches ``ops`` (a regex) or is in ``names``; ``fields`` join each job."""
    jobs = []
    for name, op in ops_by_name().items():
        if names is not None and name not in names:
            continue
        if ops and not re.search(ops, name):
            continue
        # openreg refuses what CUDA refuses (testing/cuda_dtypes.py): those dtypes have no CPU reference to meet.
        supported = op.supported_dtypes("cpu") & op.supported_dtypes(DEVICE)
        for dtype in dtypes:
            if getattr(torch, dtype) in supported:
                jobs.append({"suite": suite, "name": name, "dtype": dtype, "max_samples": max_samples, **fields})
    return jobs


def iter_cases(job):
    """Yields ``(variant, sample_index, check)`` for the job, deterministically."""
    op = ops_by_name()[job["name"]]
    dtype = getattr(torch, job["dtype"])
    rule = {"exact": isinstance(op, EXACT_FAMILIES), "metadata_only": op.name in UNINITIALIZED_RESULT}
    for index, (sample, parts) in enumerate(sample_pairs(op, dtype, False, job["max_samples"])):
        yield "forward", index, functools.partial(_check_forward, op, parts, index, rule)
        if op.supports_out:
            yield "out", index, functools.partial(_check_out, op, parts, index, rule)
        if op.inplace_variant is not None and isinstance(sample.input, torch.Tensor):
            yield "inplace", index, functools.partial(_check_inplace, op, parts, index, rule)
    if op.supports_autograd and dtype in GRAD_DTYPES:
        for index, (sample, parts) in enumerate(sample_pairs(op, dtype, True, job["max_samples"])):
            yield "backward", index, functools.partial(_check_backward, op, sample, parts, index)


class _SampleParts:
    """A CPU sample's ``(input, args, kwargs)`` and how the same sample generated for openreg places them."""

    def __init__(self, cpu, placement):
        self.cpu = cpu
        self.placement = placement

    def on_device(self):
        """The CPU values as they are now (samples may share tensors that cases mutate), placed on openreg."""
        return to_device(self.cpu) if self.placement is None else place_like(self.cpu, self.placement)


def sample_pairs(op, dtype, requires_grad, limit):
    """``(CPU sample, _SampleParts)`` per sample."""
    cpu_samples = _samples(op, "cpu", dtype, requires_grad, limit)
    try:
        placements = _samples(op, DEVICE, dtype, requires_grad, limit)
    except Exception:  # noqa: BLE001 - then every tensor simply moves to openreg
        placements = []
    return [
        (sample, _SampleParts(_parts(sample), _parts(placements[index]) if index < len(placements) else None))
        for index, sample in enumerate(cpu_samples)
    ]


def _samples(op, device, dtype, requires_grad, limit):
    torch.manual_seed(SAMPLE_SEED)
    return list(itertools.islice(op.sample_inputs(device, dtype, requires_grad=requires_grad), limit))


def _parts(sample):
    return sample.input, sample.args, sample.kwargs


def call_sample(fn, parts, seed, **extra):
    torch.manual_seed(seed)
    inp, args, kwargs = parts
    return fn(inp, *args, **kwargs, **extra)


def _compare(run, parts, rule):
    """Runs ``run(parts, device)`` on the CPU and the openreg parts, and compares by ``rule``."""
    cpu_parts, device_parts = parts.cpu, parts.on_device()
    # Results may be on the devices the arguments involve: the CPU only for ``arange(2)``,
    # either for ``zeros_like(openreg_tensor, device="cpu")``.
    devices = devices_in(device_parts) & {"cpu", DEVICE} or {"cpu"}
    out_device = DEVICE if DEVICE in devices else "cpu"
    result = expect_same_outcome(lambda: run(cpu_parts, "cpu"), lambda: run(device_parts, out_device))
    if result is not None:
        expected, actual = result
        assert_matches(actual, expected, device=devices, **rule)


def _check_forward(op, parts, seed, rule):
    _compare(lambda p, device: call_sample(op.op, p, seed), parts, rule)


def _check_out(op, parts, seed, rule):
    template = call_sample(op.op, parts.cpu, seed)
    if isinstance(template, torch.Tensor):
        make_out = lambda device: torch.zeros_like(template, device=device)  # noqa: E731
    elif isinstance(template, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in template):
        make_out = lambda device: tuple(torch.zeros_like(t, device=device) for t in template)  # noqa: E731
    else:
        raise SkipCase(f"result is a {type(template).__name__}, not a tensor or tensors")

    def run(p, device):
        out = make_out(device)
        returned = call_sample(op.op, p, seed, out=out)
        return returned, out

    _compare(run, parts, rule)


def _check_inplace(op, parts, seed, rule):
    def run(p, device):
        target = p[0].clone()
        returned = call_sample(op.inplace_variant, (target, p[1], p[2]), seed)
        return returned, target, returned is target

    _compare(run, parts, rule)


def gradients(fn, parts, sample, seed):
    """Gradients of ``fn``'s differentiable outputs on ``parts`` (a seeded random ``grad_output`` each) with respect
    to every input that requires grad."""
    torch.manual_seed(seed)
    inp, args, kwargs = parts
    result = sample.output_process_fn_grad(fn(inp, *args, **kwargs))
    outputs = [t for t in tensors_in(result) if t.requires_grad]
    inputs = [t for t in tensors_in(parts) if t.requires_grad]
    if not outputs or not inputs:
        raise SkipCase("no differentiable output or input")
    generator = torch.Generator().manual_seed(seed)
    grad_outputs = [torch.randn(o.shape, dtype=o.dtype, generator=generator).to(o.device) for o in outputs]
    return torch.autograd.grad(outputs, inputs, grad_outputs, allow_unused=True)


def _check_backward(op, sample, parts, seed):
    _compare(lambda p, device: gradients(op.op, p, sample, seed), parts, {"exact": False})
