"""The module suite: every ``module_db`` module on openreg against the CPU.

A job is one module at one dtype; its cases are, per constructor/forward input,
the module in training and in eval mode: the module is built on the CPU under
a fixed seed, deep-copied to openreg, and both copies run forward and backward
(a fixed random gradient for every differentiable output). Outputs, parameter
and input gradients are compared within ``torch.testing`` tolerances: a module
chains many operators, and the operator suite already checks them bitwise.
"""

import copy
import functools
import itertools
import re

import torch

from . import defaults
from .checks import SkipCase, expect_same_outcome
from .compare import assert_matches
from .placement import DEVICE, tensors_in, to_device

DEFAULT_DTYPES = defaults.MODULE_DTYPES
MODES = ("train", "eval")
SEED = 0


@functools.cache
def _modules_by_name():
    from torch.testing._internal.common_modules import module_db

    return {info.name: info for info in module_db}


def list_jobs(modules=None, dtypes=DEFAULT_DTYPES, names=None, max_inputs=None):
    """Jobs for the modules whose name matches ``modules`` (a regex) or is in ``names``;
    at most ``max_inputs`` inputs per mode."""
    jobs = []
    for name, info in _modules_by_name().items():
        if (names is not None and name not in names) or (modules and not re.search(modules, name)):
            continue
        for dtype in dtypes:
            if getattr(torch, dtype) in info.supported_dtypes("cpu"):
                jobs.append({"suite": "modules", "name": name, "dtype": dtype, "max_inputs": max_inputs})
    return jobs


def iter_cases(job):
    """Yields ``(mode, input_index, check)`` for the job."""
    info = _modules_by_name()[job["name"]]
    dtype = getattr(torch, job["dtype"])
    for mode in MODES:
        torch.manual_seed(SEED)
        inputs = info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=True, training=mode == "train")
        for index, module_input in enumerate(itertools.islice(inputs, job["max_inputs"])):
            yield mode, index, functools.partial(_check, info.module_cls, dtype, module_input, mode == "train", index)


def _check(module_cls, dtype, module_input, training, seed):
    if module_input.forward_input is None:
        raise SkipCase("no forward input")
    constructor = module_input.constructor_input
    torch.manual_seed(seed)
    cpu_module = module_cls(*constructor.args, **constructor.kwargs).to(dtype).train(training)
    device_module = copy.deepcopy(cpu_module).to(DEVICE)
    forward = module_input.forward_input
    parts = (forward.args, forward.kwargs)
    result = expect_same_outcome(
        lambda: _run(cpu_module, parts, seed), lambda: _run(device_module, to_device(parts), seed)
    )
    if result is not None:
        expected, actual = result
        assert_matches(actual, expected, exact=False)


def _run(module, parts, seed):
    """Forward then backward; returns the outputs and the gradients of the parameters and inputs."""
    torch.manual_seed(seed)
    outputs = module(*parts[0], **parts[1])
    differentiable = [t for t in tensors_in(outputs) if t.requires_grad]
    wrt = [p for p in module.parameters() if p.requires_grad] + [t for t in tensors_in(parts) if t.requires_grad]
    if not differentiable or not wrt:
        return outputs, None
    generator = torch.Generator().manual_seed(seed)
    grads = [torch.randn(t.shape, dtype=t.dtype, generator=generator).to(t.device) for t in differentiable]
    return outputs, torch.autograd.grad(differentiable, wrt, grads, allow_unused=True)
