"""The optimizer suite: every ``optim_db`` optimizer on openreg against the CPU.

A job is one optimizer at one dtype; its cases are the configurations of
``optim_db`` for the device, with each implementation flag openreg supports
(``foreach``, and ``fused`` where the OptimizerInfo lists openreg; never
``differentiable``, which differentiates through steps rather than changing
them). Both devices start from the same parameters and take a few steps of a
small least-squares problem (gradients computed on each device); parameters
and optimizer state are compared within ``torch.testing`` tolerances.
"""

import functools
import re

import torch
import torch.nn.functional as F
from torch.utils._pytree import tree_map

from . import defaults
from .checks import expect_same_outcome
from .compare import assert_matches
from .placement import DEVICE

DEFAULT_DTYPES = defaults.OPTIMIZER_DTYPES
STEPS = 3
SEED = 0


@functools.cache
def _optimizers_by_name():
    from torch.testing._internal.common_optimizers import optim_db

    return {info.name: info for info in optim_db}


def list_jobs(optimizers=None, dtypes=DEFAULT_DTYPES, names=None):
    """Jobs for the optimizers whose name matches ``optimizers`` (a regex) or is in ``names``."""
    return [
        {"suite": "optim", "name": name, "dtype": dtype}
        for name in _optimizers_by_name()
        if (names is None or name in names) and not (optimizers and not re.search(optimizers, name))
        for dtype in dtypes
    ]


def iter_cases(job):
    """Yields ``(configuration description, index, check)`` for the job."""
    from torch.testing._internal.common_optimizers import _get_optim_inputs_including_global_cliquey_kwargs

    info = _optimizers_by_name()[job["name"]]
    dtype = getattr(torch, job["dtype"])
    configurations = _get_optim_inputs_including_global_cliquey_kwargs(DEVICE, dtype, info, skip=("differentiable",))
    for index, configuration in enumerate(configurations):
        yield configuration.desc, index, functools.partial(_check, info, dtype, configuration.kwargs)


def _check(info, dtype, kwargs):
    result = expect_same_outcome(
        lambda: _train(info, dtype, kwargs, "cpu"), lambda: _train(info, dtype, kwargs, DEVICE)
    )
    if result is not None:
        (expected_params, expected_state), (actual_params, actual_state) = result
        assert_matches(actual_params, expected_params, exact=False)
        # State may live on the CPU by design (``step`` unless capturable): compare values only.
        assert_matches(_on_cpu(actual_state), expected_state, exact=False, device="cpu")


def _on_cpu(tree):
    return tree_map(lambda value: value.cpu() if isinstance(value, torch.Tensor) else value, tree)


def _train(info, dtype, kwargs, device):
    """Parameters and optimizer state after ``STEPS`` steps on ``device``."""
    generator = torch.Generator().manual_seed(SEED)
    weight = torch.randn(10, 5, dtype=dtype, generator=generator).to(device).requires_grad_()
    bias = torch.randn(10, dtype=dtype, generator=generator).to(device).requires_grad_()
    data = torch.randn(4, 5, dtype=dtype, generator=generator).to(device)
    indices = torch.tensor([0, 3, 3, 7]).to(device)
    # An optimizer for sparse gradients only (SparseAdam) gets the embedding weight alone: a dense gradient (the
    # bias's) would make it raise on both devices, and the case would compare nothing.
    params = [weight] if info.only_supports_sparse_grads else [weight, bias]
    optimizer = info.optim_cls(params, **kwargs)

    def closure():
        optimizer.zero_grad()
        if info.only_supports_sparse_grads:
            loss = F.embedding(indices, weight, sparse=True).pow(2).sum()
        else:
            loss = (data @ weight.T + bias).pow(2).mean()
        loss.backward()
        return loss

    for _ in range(STEPS):
        optimizer.step(closure)
    return [weight.detach(), bias.detach()], optimizer.state_dict()["state"]
