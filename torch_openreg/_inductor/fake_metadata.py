"""Backend metadata on the fake tensors made from openreg tensors.

Dynamo, AOTAutograd and ``torch.export`` trace with fake tensors made by
``FakeTensorConverter.from_real_tensor``; a backend's metadata
(``torch._utils.get_tensor_metadata``, kept in openreg's BackendMeta,
``csrc/runtime/OpenRegTensorMeta.cpp``) is what a vendor's passes read to know
a tensor's internal format. torch 2.13-2.15 do not copy it to the fake tensor
(later PyTorch does); this copies the backend's entries of an openreg
tensor, through PyTorch's own metadata interface, to the fake tensor made from
it. PyTorch's own bits (conj, neg) are the converter's business and left alone.
A functionalized tensor (AOTAutograd's inputs, ``FunctionalTensor``) carries
no BackendMeta of its own: the entries are read from the tensor it wraps.

Installed once, after ``torch._subclasses.fake_tensor`` is imported
(registration.py).
"""

import functools

import torch
from torch._subclasses import fake_tensor
from torch._subclasses.functional_tensor import FunctionalTensor

_DEVICE = "openreg"
_PYTORCH_KEYS = ("conj", "neg")


def _holder(t):
    """The tensor whose BackendMeta holds ``t``'s entries."""
    if isinstance(t, FunctionalTensor):
        t = t.elem
    return torch._from_functional_tensor(t) if torch._is_functional_tensor(t) else t


def _with_backend_metadata(from_real_tensor):
    @functools.wraps(from_real_tensor)
    def from_real_tensor_openreg(self, fake_mode, t, *args, **kwargs):
        fake = from_real_tensor(self, fake_mode, t, *args, **kwargs)
        if t.device.type == _DEVICE and not t.is_sparse and not t.is_nested:
            entries = {
                key: value
                for key, value in torch._utils.get_tensor_metadata(_holder(t)).items()
                if key not in _PYTORCH_KEYS
            }
            if entries:
                torch._utils.set_tensor_metadata(fake, entries)
        return fake

    return from_real_tensor_openreg


@functools.cache
def install() -> None:
    converter = fake_tensor.FakeTensorConverter
    converter.from_real_tensor = _with_backend_metadata(converter.from_real_tensor)
