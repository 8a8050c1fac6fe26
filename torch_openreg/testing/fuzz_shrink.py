"""Shrinking a divergent fuzzer program to its smallest reproducer, and printing it as a runnable script."""
import re
from dataclasses import replace

from .fuzz import Input, compare

_LAYOUT_LITERAL = re.compile(r"'(transposed|strided|offset|expanded|channels_last)'")


def shrink(program, divergence, extra=None):
    """The smallest program found that still diverges on the same operator, and its divergence.

    Lines after the divergent one go first; then, until nothing changes, each line is removed (a later line
    that used it now fails alike on both devices), and inputs become contiguous and stop requiring grad.
    ``extra`` are the names the lines need beyond the fuzzer's namespace.
    """
    def still_diverges(candidate):
        found = compare(candidate, extra)
        return found if found is not None and found.signature == divergence.signature else None

    if not divergence.final:
        cut = replace(program, lines=program.lines[:divergence.index + 1])
        divergence = still_diverges(cut) or divergence
        program = cut if divergence.index < len(cut.lines) else program
    changed = True
    while changed:
        changed = False
        for candidate in _simpler(program):
            found = still_diverges(candidate)
            if found is not None:
                program, divergence, changed = candidate, found, True
                break
    return program, divergence


def _simpler(program):
    """Programs one step simpler than ``program``, the most promising first."""
    lines = program.lines
    for index in reversed(range(len(lines))):
        yield replace(program, lines=lines[:index] + lines[index + 1:])
    for index, line in enumerate(lines):
        if isinstance(line, Input):
            for simpler in (replace(line, layout="contiguous"), replace(line, requires_grad=False)):
                if simpler != line:
                    yield replace(program, lines=lines[:index] + (simpler,) + lines[index + 1:])
        else:
            for match in _LAYOUT_LITERAL.finditer(line.expression):
                expression = line.expression[:match.start()] + "'contiguous'" + line.expression[match.end():]
                yield replace(program, lines=lines[:index] + (replace(line, expression=expression),) + lines[index + 1:])


def reproducer(program, divergence):
    """A standalone script that shows ``divergence`` of ``program``: it raises where openreg differs."""
    return "\n".join([
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
    ])
