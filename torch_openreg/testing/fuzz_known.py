"""Divergences the differential fuzzer already knows: left out of generated programs until their fix is merged.

Each entry names its issue item; ``python -m torch_openreg.testing fuzz --include-known`` generates them anyway.
Remove an entry when its fix lands (the default test run then covers the pattern again).
"""
from dataclasses import dataclass

import torch

from .fuzz_ops import BINARY


@dataclass(frozen=True)
class Exclusion:
    """A known divergence, left out of generated programs until its fix is merged."""

    reason: str
    operators: frozenset
    applies: object  # list of the CPU operands picked -> bool

    def matches(self, operator, operands):
        return operator in self.operators and self.applies(operands)


def _graph_has(value, node_names):
    """Whether the autograd graph that produced ``value`` contains a node named in ``node_names``."""
    try:
        root = value.grad_fn
    except RuntimeError:
        # A multi-output view modified in place: its grad_fn raises, and so will any use of it in the program.
        return False
    seen, pending = set(), [root]
    while pending:
        node = pending.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if type(node).__name__ in node_names:
            return True
        pending.extend(next_node for next_node, _ in node.next_functions)
    return False


def _row_major(value):
    """Strides exactly those of a contiguous tensor (``is_contiguous`` ignores the strides of size-1 dims)."""
    return value.stride() == torch.empty(value.shape, device="meta").stride()


def _expanded_and_strided_promoting(operands):
    """Operands of two dtypes, or integral ones (which ``div`` and friends promote to float), one of them
    expanded and another strided."""
    tensors = [value for value in operands if value.dim() > 0]
    promoting = len({value.dtype for value in operands}) > 1 or any(
        not value.dtype.is_floating_point and not value.dtype.is_complex for value in operands)
    return (promoting
            and any(0 in value.stride() for value in tensors)
            and any(not _row_major(value) and 0 not in value.stride() for value in tensors))


KNOWN_DIVERGENCES = (
    Exclusion("found by the fuzzer: F.dropout's backward in float16/bfloat16 (openreg takes native_dropout, the CPU "
              "the composite, which scales the mask in the input dtype)",
              frozenset({"grad"}), lambda operands: _graph_has(operands[0], {"NativeDropoutBackward0"})
              and any(value.dtype in (torch.float16, torch.bfloat16) for value in operands[:2])),
    Exclusion("torch.median(x, dim) along an expanded dimension (stride 0): the CPU kernel reads past the input's "
              "storage there (PyTorch bug), so its values and indices are undefined and no reference exists; openreg "
              "materialises the input as CUDA does (csrc/aten/Median.cpp, tests/test_fuzz_findings.py compares with "
              "the CPU on the dense input)",
              frozenset({"median.dim"}), lambda operands: 0 in operands[0].stride()),
)
