"""The expected-failures list: cases that cannot pass on a CPU-simulated device.

Each entry of ``expected_failures.json`` names a suite, an operator / module /
optimizer ``name`` (a regular expression matched in full) and optionally a
``variant``, ``dtype`` and ``sample`` (each a value or a list of values), the
``torch`` releases it holds for ("2.14", or a list; every release if absent:
PyTorch's sample inputs and some operators change between releases), with
the ``reason``. A listed case that
fails counts as ``xfail``; a listed case that passes fails the run, so the
list can only shrink.
"""

import functools
import json
import os
import re

DEFAULT_PATH = os.path.join(os.path.dirname(__file__), "expected_failures.json")
REQUIRED_KEYS = {"suite", "name", "reason"}
CASE_KEYS = {"variant", "dtype", "sample"}
OPTIONAL_KEYS = CASE_KEYS | {"torch"}


def load(path=DEFAULT_PATH):
    """The entries of ``path``, validated."""
    with open(path) as file:
        entries = json.load(file)
    for entry in entries:
        keys = set(entry)
        if not REQUIRED_KEYS <= keys <= REQUIRED_KEYS | OPTIONAL_KEYS:
            raise ValueError(f"{path}: bad entry {entry}: keys are {sorted(REQUIRED_KEYS | OPTIONAL_KEYS)}")
    return entries


@functools.cache
def running_release():
    """'2.14' under torch 2.14.1."""
    import torch

    return ".".join(torch.__version__.split("+")[0].split(".")[:2])


def matching_entry(entries, case):
    """The first entry that lists ``case`` (a result dict) for the running torch, or None."""
    release = running_release()
    for entry in entries:
        if entry["suite"] != case["suite"] or not re.fullmatch(entry["name"], case["name"]):
            continue
        if not _listed(entry.get("torch", release), release):
            continue
        if all(_listed(entry.get(key, case.get(key)), case.get(key)) for key in CASE_KEYS):
            return entry
    return None


def _listed(wanted, value):
    return value in wanted if isinstance(wanted, list) else value == wanted


def apply(entries, case):
    """Turns a listed failure into ``xfail`` and a listed pass into a failure."""
    entry = matching_entry(entries, case)
    if entry is None or case["status"] not in ("passed", "failed"):
        return case
    if case["status"] == "failed":
        return {**case, "status": "xfail", "reason": entry["reason"]}
    return {
        **case,
        "status": "failed",
        "message": f"unexpected success: remove the entry from expected_failures.json ({entry['reason']})",
    }
