"""Location of the separately built operator library (csrc/extra_ops/)."""

import os

_LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libopenreg_extra_ops.so")


def extra_ops_path() -> str:
    """Absolute path of the ``openreg_extra`` operator library.

    torch_openreg never loads it; ``torch.ops.load_library(extra_ops_path())``
    registers its operators (``torch.ops.openreg_extra.*``) in this process.
    """
    if not os.path.isfile(_LIBRARY):
        raise FileNotFoundError(
            f"the openreg_extra operator library is not built: {_LIBRARY} does not exist "
            "(build it with `python setup.py build_ext --inplace` or reinstall torch_openreg)"
        )
    return _LIBRARY
