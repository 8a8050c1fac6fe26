"""Shrinking a divergent fuzzer program to its smallest reproducer, and printing it as a runnable script."""

import re
from dataclasses import replace

import torch

from .fuzz import LAYOUTS, Input, compare, run_on_cpu

_LAYOUT_LITERAL = re.compile("'(" + "|".join(layout for layout in LAYOUTS if layout != "contiguous") + ")'")
_NAME = re.compile(r"\bv\d+\b")


def shrink(program, divergence, extra=None):
    """The smallest program found that still diverges on the same operator, and its divergence.

    Lines after the divergent one go first; then, until nothing changes, each line is removed (a later line
    that used it now fails alike on both devices), an operand computed by an earlier line is replaced by a
    fresh input, and inputs become contiguous and stop requiring grad.
    ``extra`` are the names the lines need beyond the fuzzer's namespace.
    """

    def still_diverges(candidate):
        found = compare(candidate, extra)
        return found if found is not None and found.signature == divergence.signature else None

    if not divergence.final:
        # Lines are compared in order, so the later ones cannot matter.
        program = replace(program, lines=program.lines[: divergence.index + 1])
    changed = True
    while changed:
        changed = False
        for candidate in _simpler(program, run_on_cpu(program, extra)):
            found = still_diverges(candidate)
            if found is not None:
                program, divergence, changed = candidate, found, True
                break
    return program, divergence


def _simpler(program, values):
    """Programs one step simpler than ``program``, the most promising first.

    ``values`` are the program's values on the CPU: an operand computed by an earlier line may be replaced by
    a fresh input of its shape and dtype, which makes the lines that computed it removable.
    """
    lines = program.lines
    for index in reversed(range(len(lines))):
        yield replace(program, lines=lines[:index] + lines[index + 1 :])
    computed = {line.name for line in lines if not isinstance(line, Input)}
    for index, line in enumerate(lines):
        if isinstance(line, Input):
            continue
        for match in _NAME.finditer(line.expression):
            value = values.get(match.group())
            if match.group() in computed and isinstance(value, torch.Tensor):
                fresh = Input("", tuple(value.shape), value.dtype, "contiguous", index, value.requires_grad).expression
                expression = line.expression[: match.start()] + fresh + line.expression[match.end() :]
                yield replace(
                    program, lines=lines[:index] + (replace(line, expression=expression),) + lines[index + 1 :]
                )
    for index, line in enumerate(lines):
        if isinstance(line, Input):
            for simpler in (replace(line, layout="contiguous"), replace(line, requires_grad=False)):
                if simpler != line:
                    yield replace(program, lines=lines[:index] + (simpler,) + lines[index + 1 :])
        else:
            for match in _LAYOUT_LITERAL.finditer(line.expression):
                expression = line.expression[: match.start()] + "'contiguous'" + line.expression[match.end() :]
                yield replace(
                    program, lines=lines[:index] + (replace(line, expression=expression),) + lines[index + 1 :]
                )


def reproducer(program, divergence):
    """A standalone script that shows ``divergence`` of ``program``: it raises where openreg differs."""
    return "\n".join(
        [
            f"# openreg differs from the CPU at {divergence}",
            f"# (fuzzer seed {program.seed})",
            "import torch",
            "import torch.nn.functional as F",
            "",
            "from torch_openreg.testing.fuzz import assert_same_on_both, fuzz_input",
            "",
            "",
            "def program(device):",
            f"    torch.manual_seed({program.seed})",
            program.source(indent="    "),
            f"    return {divergence.name}",
            "",
            "",
            "assert_same_on_both(program)",
            "",
        ]
    )
