"""``torch.openreg.FloatStorage`` and the other legacy typed-storage classes, as ``torch.cuda`` has them.

``Tensor.storage_type()``, ``isinstance(storage, torch.openreg.FloatStorage)``
and ``torch.openreg.FloatStorage(n)`` look the class up by name on
``torch.<device>``, and take a class's device from the last part of its
``__module__``: each class is therefore built here with ``__module__`` set to
``torch.openreg``. The set is torch.cuda's: one class per legacy dtype name,
quantized dtypes excluded.
"""

import torch
from torch._utils import classproperty
from torch.storage import _dtype_to_storage_type_map, _LegacyStorage, _warn_typed_storage_removal


class _OpenRegLegacyStorage(_LegacyStorage):
    # What torch.cuda's classes refuse: host-memory constructors.
    @classmethod
    def from_buffer(cls, *args, **kwargs):
        _warn_typed_storage_removal()
        raise RuntimeError("from_buffer: Not available for openreg storage")

    @classmethod
    def _new_with_weak_ptr(cls, *args, **kwargs):
        raise RuntimeError("_new_with_weak_ptr: Not available for openreg storage")

    @classmethod
    def _new_shared_filename(cls, manager, obj, size, *, device=None, dtype=None):
        raise RuntimeError("_new_shared_filename: Not available for openreg storage")


def _storage_class(name, dtype):
    def public_dtype(cls):
        _warn_typed_storage_removal()
        return dtype

    namespace = {
        "__module__": "torch.openreg",
        "__qualname__": name,
        "dtype": classproperty(public_dtype),
        "_dtype": classproperty(lambda cls: dtype),
    }
    return type(name, (_OpenRegLegacyStorage,), namespace)


STORAGE_CLASSES = {
    name: _storage_class(name, dtype)
    for dtype, name in _dtype_to_storage_type_map().items()
    if name in torch.cuda.__all__
}
# torch.is_storage() and serialization recognise storages by this set.
torch._storage_classes.update(STORAGE_CLASSES.values())
