"""Differential fuzzing: random operator programs give bit-identical results on openreg and the CPU.

The default run covers a fixed range of seeds; ``python -m torch_openreg.testing fuzz --seconds 600`` keeps
going from there (see docs/testing.md).
"""

import pytest
import torch

from torch_openreg.testing.fuzz import Input, generate
from torch_openreg.testing.fuzz_campaign import campaign
from torch_openreg.testing.fuzz_ops import OPERATORS, Operator

PROGRAMS_PER_TEST = 40
DEFAULT_TESTS = 25


@pytest.mark.slow
@pytest.mark.parametrize("first_seed", range(0, PROGRAMS_PER_TEST * DEFAULT_TESTS, PROGRAMS_PER_TEST))
def test_programs_match_cpu_bit_for_bit(first_seed):
    ran, findings = campaign(range(first_seed, first_seed + PROGRAMS_PER_TEST))
    assert ran == PROGRAMS_PER_TEST
    assert not findings, "\n\n".join(finding.script for finding in findings)


def test_a_seed_always_gives_the_same_program():
    assert generate(7) == generate(7)
    assert generate(7) != generate(8)


@pytest.mark.slow
def test_programs_cover_the_operator_table():
    lengths, used = [], set()
    for seed in range(40):
        program = generate(seed)
        steps = [line for line in program.lines if not isinstance(line, Input)]
        lengths.append(len(steps))
        used.update(step.op for step in steps)
    assert min(lengths) >= 10 and max(lengths) <= 20
    assert len({operator.name for operator in OPERATORS}) >= 150
    assert len(used) >= 150


def _fake_divergent(x):
    """Ones on openreg, zeros on the CPU: a divergence the fuzzer must find and isolate."""
    return torch.ones_like(x) if x.device.type == "openreg" else torch.zeros_like(x)


def test_a_divergence_shrinks_to_the_divergent_operator():
    fake = Operator("fake_divergent", lambda picker: f"fake_divergent({picker.tensor()})")
    extra = {"fake_divergent": _fake_divergent}
    ran, findings = campaign(range(3), operators=OPERATORS + (fake,) * len(OPERATORS), extra=extra)
    assert findings, f"{ran} programs and no divergence found"
    finding = findings[0]
    steps = [line for line in finding.program.lines if not isinstance(line, Input)]
    assert [step.op for step in steps] == ["fake_divergent"], finding.script
    assert len(finding.program.lines) == 2, finding.script
    assert "fake_divergent(" in finding.script
    with pytest.raises(AssertionError, match="openreg differs from the CPU: .* elements differ in their bits"):
        exec(compile(finding.script, "<reproducer>", "exec"), dict(extra))
