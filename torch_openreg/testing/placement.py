"""Placing CPU sample values on openreg, and finding what devices a value involves."""

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

# The PrivateUse1 backend under test, by the name its package gave it ("openreg" once torch_openreg is loaded).
DEVICE = torch._C._get_privateuse1_backend_name()


def to_device(tree):
    """Copies every tensor in ``tree`` to openreg, keeping ``requires_grad`` (leaves stay leaves),
    and replaces every CPU ``torch.device`` (and a ``device="cpu"`` keyword) with openreg."""

    moved = {}

    def move(value):
        if isinstance(value, torch.Tensor):
            # A tensor passed twice stays one tensor.
            if id(value) not in moved:
                moved[id(value)] = move_tensor(value, DEVICE)
            return moved[id(value)]
        if isinstance(value, torch.device) and value.type == "cpu":
            return torch.device(DEVICE)
        if _names_cpu_device(value):
            return to_device({**value, "device": DEVICE})
        return value

    return tree_map(move, tree, is_leaf=_names_cpu_device)


def _names_cpu_device(node):
    return isinstance(node, dict) and str(node.get("device")) == "cpu"


def move_tensor(tensor, device):
    """A copy of ``tensor`` on ``device`` with its whole storage, sizes, strides and offset.

    Keeping the storage matters: a view may legitimately reach past its own
    elements (``as_strided`` on a partial view), and strided inputs exercise
    the backend's strided paths. Conjugate / negative views and non-strided
    layouts are copied with ``.to``. The copy is a leaf with ``requires_grad``
    as ``tensor``.
    """
    source = tensor.detach()
    if source.layout != torch.strided or source.is_conj() or source.is_neg() or source.device.type != "cpu":
        copied = source.to(device)
    else:
        storage_numel = source.untyped_storage().nbytes() // source.element_size()
        whole = torch.empty(0, dtype=source.dtype).set_(source.untyped_storage(), 0, (storage_numel,), (1,))
        copied = whole.to(device).as_strided(source.shape, source.stride(), source.storage_offset())
    return copied.requires_grad_(tensor.requires_grad)


def place_like(values, placement):
    """``values`` (CPU) placed as ``placement`` (the same sample generated for openreg) places them.

    Each tensor is copied to the device of the corresponding tensor of
    ``placement`` (so an argument the operator wants on the CPU, like
    ``tensor_split``'s indices, stays there), and device names are taken from
    ``placement``; values always come from ``values``. If the structures
    differ, every tensor moves to openreg.
    """
    leaves, spec = tree_flatten(values)
    targets, target_spec = tree_flatten(placement)
    if spec != target_spec:
        return to_device(values)
    placed = []
    moved = {}
    for value, target in zip(leaves, targets):
        if isinstance(value, torch.Tensor) and isinstance(target, torch.Tensor):
            # A tensor passed twice stays one tensor.
            if id(value) not in moved:
                moved[id(value)] = move_tensor(value, target.device)
            placed.append(moved[id(value)])
        elif isinstance(target, (str, torch.device)) and str(value) == "cpu":
            placed.append(target)
        else:
            placed.append(to_device(value))
    return tree_unflatten(placed, spec)


def devices_in(tree):
    """The device types ``tree`` involves: of its tensors, and of the devices it names."""
    found = set()
    for leaf in tree_flatten(tree)[0]:
        if isinstance(leaf, torch.Tensor):
            found.add(leaf.device.type)
        elif isinstance(leaf, torch.device) or (isinstance(leaf, str) and leaf.split(":")[0] in ("cpu", DEVICE)):
            found.add(torch.device(leaf).type)
    return found


def tensors_in(tree):
    """The tensors of ``tree`` in flattening order."""
    return [leaf for leaf in tree_flatten(tree)[0] if isinstance(leaf, torch.Tensor)]
