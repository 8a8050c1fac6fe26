"""``Tensor.__dlpack_device__()`` for openreg tensors: ``(kDLExtDev, index)``.

torch's ``__dlpack_device__`` means to give a PrivateUse1 tensor DLPack's
``kDLExtDev``, as its C++ conversion does for the capsules ``to_dlpack`` and
``__dlpack__`` make, but it compares the device type with the literal
"privateuse1", which a renamed backend never is: an openreg tensor raised
``ValueError: Unknown device type openreg``, and so did
``torch.from_dlpack(tensor)``, which asks the producer's device first.
"""

import torch
from torch.overrides import has_torch_function_unary
from torch.utils.dlpack import DLDeviceType

_DEVICE = torch._C._get_privateuse1_backend_name()
_torch_dlpack_device = torch.Tensor.__dlpack_device__


def __dlpack_device__(self):
    # A tensor subclass's __torch_function__ sees this method, through torch's.
    if has_torch_function_unary(self) or self.device.type != _DEVICE:
        return _torch_dlpack_device(self)
    return (DLDeviceType.kDLExtDev, self.device.index)


def install():
    torch.Tensor.__dlpack_device__ = __dlpack_device__
