"""Divergences the differential fuzzer already knows: left out of generated programs until their fix is merged.

Each entry names its issue item; ``python -m torch_openreg.testing fuzz --include-known`` generates them anyway.
Remove an entry when its fix lands (the default test run then covers the pattern again). An entry whose CPU result
is undefined stays: there is no reference to compare with, and its reason says what openreg does instead.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Exclusion:
    """A known divergence, left out of generated programs until its fix is merged."""

    reason: str
    operators: frozenset
    applies: object  # list of the CPU operands picked -> bool

    def matches(self, operator, operands):
        return operator in self.operators and self.applies(operands)


KNOWN_DIVERGENCES = (
    Exclusion(
        "torch.median(x, dim) along an expanded dimension (stride 0): the CPU kernel reads past the input's "
        "storage there (PyTorch bug), so its values and indices are undefined and no reference exists; openreg "
        "materialises the input as CUDA does (csrc/aten/Median.cpp, tests/test_fuzz_findings.py compares with "
        "the CPU on the dense input)",
        frozenset({"median.dim"}),
        lambda operands: 0 in operands[0].stride(),
    ),
)
