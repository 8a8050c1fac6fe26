"""A test suite under openreg's stream-order sanitizer (docs/sanitizer.md).

``pytest -p torch_openreg.testing.sanitizer_plugin --openreg-sanitizer`` checks every test (and every process the
tests start, through ``OPENREG_SANITIZER=1``); without the flag, the ``openreg_sanitizer`` fixture checks the tests
that ask for it. ``OPENREG_SANITIZER=1 pytest`` alone checks a whole run too, from the first use of the device.
"""

import os

import pytest


def pytest_addoption(parser):
    parser.addoption(
        "--openreg-sanitizer",
        action="store_true",
        help="check every test with openreg's stream-order sanitizer (docs/sanitizer.md)",
    )


def pytest_configure(config):
    if config.getoption("--openreg-sanitizer"):
        os.environ["OPENREG_SANITIZER"] = "1"
        import torch

        torch.openreg.sanitizer.enable()


@pytest.fixture
def openreg_sanitizer():
    """Checks the test with the sanitizer; yields ``torch.openreg.sanitizer``."""
    import torch

    with torch.openreg.sanitizer.enabled():
        yield torch.openreg.sanitizer
