"""Running many fuzzer programs: seeds in order until they or the time run out, each new divergence shrunk."""

import time
from dataclasses import dataclass

from .fuzz import Program, compare, generate
from .fuzz_known import KNOWN_DIVERGENCES
from .fuzz_ops import OPERATORS
from .fuzz_shrink import reproducer, shrink


@dataclass(frozen=True)
class Finding:
    """A divergence, shrunk: ``program`` is the smallest found, ``script`` its runnable reproducer."""

    seed: int
    program: Program
    script: str


def campaign(seeds, seconds=None, operators=OPERATORS, exclusions=KNOWN_DIVERGENCES, extra=None, on_finding=None):
    """Generates and compares the program of each seed; returns ``(programs run, findings)``.

    A divergence on an operator already found (its signature) is counted, not shrunk again. ``seconds`` stops
    the run after the program in progress; ``on_finding(finding)`` is called as each is found.
    """
    deadline = None if seconds is None else time.monotonic() + seconds
    findings, signatures, ran = [], set(), 0
    for seed in seeds:
        if deadline is not None and time.monotonic() >= deadline:
            break
        program = generate(seed, operators, exclusions, extra)
        divergence = compare(program, extra)
        ran += 1
        if divergence is None or divergence.signature in signatures:
            continue
        signatures.add(divergence.signature)
        smallest, divergence = shrink(program, divergence, extra)
        finding = Finding(seed, smallest, reproducer(smallest, divergence))
        findings.append(finding)
        if on_finding is not None:
            on_finding(finding)
    return ran, findings
