"""pytest plugin: a library's own test suite on openreg (or, for comparison, on the CPU).

    pytest -p torch_openreg.testing.library_plugin --openreg-library timm tests/test_layers.py

sets the library's device switch (``libraries.LIBRARIES``: ``TORCH_DEVICE`` for
timm, ``TRANSFORMERS_TEST_DEVICE`` and the device spec for transformers, ...)
before pytest loads the suite's conftest files, which is when the suites read
it; a device spec file written for the run into the working directory is
removed when pytest ends. ``--openreg-run cpu`` sets the same switch to the CPU instead (what
``libraries compare`` runs first), and ``--openreg-outcomes PATH`` writes every
test's outcome there as JSON (``{nodeid: {"status": ..., "message": ...}}``).
"""

import json
import os
import re

import pytest

from . import libraries
from .pytest_plugin import outcome_of

_outcomes = {}  # nodeid -> {"status": ..., "message": ...}; a failure in any phase wins


def pytest_addoption(parser):
    group = parser.getgroup("openreg", "torch_openreg: a library's test suite on openreg")
    group.addoption(
        "--openreg-library",
        choices=sorted(name for name, library in libraries.LIBRARIES.items() if library.switch),
        help="set this library's device switch (docs/libraries.md)",
    )
    group.addoption(
        "--openreg-run",
        choices=("openreg", "cpu"),
        default="openreg",
        help="the device the switch names (default openreg; cpu: the reference run of `libraries compare`)",
    )
    group.addoption("--openreg-outcomes", metavar="PATH", help="write each test's outcome there as JSON")


_cleanups = []


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    options = early_config.known_args_namespace
    if options.openreg_library:
        _cleanups.append(libraries.apply_switch(options.openreg_library, options.openreg_run))


def pytest_unconfigure(config):
    while _cleanups:
        _cleanups.pop()()


def pytest_collectreport(report):
    if report.failed:
        _record(report.nodeid or "<collection>", "failed", report)


def pytest_runtest_logreport(report):
    status = outcome_of(report)
    if status is not None:
        _record(report.nodeid, status, report)


def _record(nodeid, status, report):
    if _outcomes.get(nodeid, {}).get("status") == "failed":
        return
    _outcomes[nodeid] = {"status": status, "message": _message(report) if status == "failed" else ""}


_EXCEPTION_LINE = re.compile(r"^E\s+([\w.]+(Error|Exception|Failure|Interrupt)|AssertionError)\b")


def _message(report):
    """The failure's innermost exception line (``E   RuntimeError: ...``: a TorchScript error's cause comes after
    its "The following operation failed" line), else its first ``E`` line, else its last line."""
    lines = [line for line in str(report.longrepr).splitlines() if line.strip()]
    exceptions = [line for line in lines if _EXCEPTION_LINE.match(line)]
    errors = [line for line in lines if line.startswith("E ")]
    line = exceptions[-1] if exceptions else errors[0] if errors else lines[-1] if lines else ""
    return line.removeprefix("E").strip()[:300]


def pytest_sessionfinish(session):
    path = session.config.getoption("openreg_outcomes")
    if path:
        temporary = path + ".tmp"
        with open(temporary, "w") as file:
            json.dump(_outcomes, file, indent=1)
        os.replace(temporary, path)
