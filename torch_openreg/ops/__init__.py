"""The custom operators of torch_openreg, on the Python side.

- ``_meta``: the fake kernels of the C++ operators in the ``openreg``
  namespace (csrc/custom/), for the meta device, FakeTensorMode and
  torch.compile tracing;
- ``_python_ops``: operators written in Python with ``torch.library.custom_op``
  (namespace ``openreg_py``);
- ``_device_check``: the device check of the Python and fake kernels (PyTorch's message);
- ``_extra``: where the separately built operator library lives
  (``extra_ops_path``, namespace ``openreg_extra``, loaded only on request).

``operators.yaml`` declares every one of them; docs/operators.md walks through
each registration path.
"""
from . import _meta, _python_ops  # noqa: F401  (registration on import)
from ._extra import extra_ops_path
from ._python_ops import accumulate_, smooth_clamp

__all__ = ["accumulate_", "extra_ops_path", "smooth_clamp"]
