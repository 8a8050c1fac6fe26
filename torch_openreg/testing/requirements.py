"""What ``python -m torch_openreg.testing`` needs beyond torch_openreg: the ``testing`` extra.

PyTorch's test databases (``torch.testing._internal``) import ``expecttest``,
and ``external`` runs pytest; torch depends on neither. The command checks them
before any suite imports them, so a plain ``pip install .`` gets one line naming
the install command instead of a traceback from inside torch.
"""

import importlib.util
import sys

MODULES = ("expecttest", "pytest")


def exit_unless_installed():
    missing = [name for name in MODULES if importlib.util.find_spec(name) is None]
    if missing:
        sys.exit(
            f"python -m torch_openreg.testing needs the 'testing' extra ({', '.join(missing)} not installed): "
            f"pip install \"torch_openreg[testing]\", or from a checkout pip install \".[testing]\""
        )
