"""The custom operators of torch_openreg, on the Python side.

``operators.yaml`` declares every one of them; the build generates their C++
registrations from it, and importing this package registers the rest
(``_registration``). docs/operators.md walks through each registration path.

- ``_meta``: the fake kernels of the C++ operators in the ``openreg``
  namespace (csrc/custom/), for the meta device, FakeTensorMode and
  torch.compile tracing;
- ``_python_ops``: the kernels of the operators written in Python (namespace
  ``openreg_py``);
- ``_device_check``: the device check of the Python and fake kernels (PyTorch's message);
- ``_extra``: where the separately built operator library lives
  (``extra_ops_path``, namespace ``openreg_extra``, loaded only on request).
"""

from ._extra import extra_ops_path
from ._registration import register_python_side

_operators = register_python_side()
smooth_clamp = _operators["smooth_clamp"]
accumulate_ = _operators["accumulate_"]

__all__ = ["accumulate_", "extra_ops_path", "smooth_clamp"]
