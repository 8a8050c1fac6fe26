"""pytest plugin used by ``external``: OPENREG class names, sharding and outcome counts.

Configured by environment variables so it works in any pytest invocation:
``OPENREG_TEST_SHARD=I/N`` keeps every N-th collected test from the I-th,
``OPENREG_TEST_COUNTS=PATH`` receives the counts as JSON,
``OPENREG_TEST_BYPASS=1`` lets ``@onlyOn`` / ``@onlyCUDA`` tests run on openreg.
"""

import json
import os
from collections import Counter

from . import shard

SHARD_ENV = "OPENREG_TEST_SHARD"
COUNTS_ENV = "OPENREG_TEST_COUNTS"
BYPASS_ENV = "OPENREG_TEST_BYPASS"

# nodeid -> passed / failed / skipped / xfail; a failure in any phase wins.
_outcomes = {}


def pytest_configure(config):
    from torch.testing._internal.common_device_type import PrivateUse1TestBase

    # Sets device_type to "openreg" before any class is instantiated, so no
    # class is named ...PRIVATEUSE1 or misses @dtypesIfPRIVATEUSE1.
    PrivateUse1TestBase.setUpClass()
    if os.environ.get(BYPASS_ENV) == "1":
        PrivateUse1TestBase.bypass_device_restrictions = True


def pytest_collection_modifyitems(config, items):
    if SHARD_ENV not in os.environ:
        return
    kept = shard.select(items, shard.parse(os.environ[SHARD_ENV]))
    dropped = [item for item in items if item not in kept]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


def outcome_of(report):
    """A test phase's outcome: passed / failed / skipped / xfail, or None for a setup or teardown that passed."""
    if report.failed:
        return "failed"
    if hasattr(report, "wasxfail"):
        return "xfail" if report.skipped else "passed"
    if report.skipped:
        return "skipped"
    if report.when == "call":
        return "passed"
    return None


def pytest_runtest_logreport(report):
    status = outcome_of(report)
    if status is not None and _outcomes.get(report.nodeid) != "failed":
        _outcomes[report.nodeid] = status


def pytest_sessionfinish(session):
    path = os.environ.get(COUNTS_ENV)
    if path:
        with open(path, "w") as file:
            counts = Counter(_outcomes.values())
            json.dump({key: counts[key] for key in ("passed", "failed", "skipped", "xfail")}, file)
