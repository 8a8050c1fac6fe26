"""Reads of uninitialized device memory, the sanitizer's initcheck (docs/sanitizer.md).

compute-sanitizer's initcheck reports a kernel that reads device memory nothing has written since it was allocated.
Here a storage is the unit: one handed out by an allocating operator (``torch.empty``, ``empty_like``, ``new_empty``,
``empty_strided``) is uninitialized until an operator writes any of it; an operator that reads it before then is
reported with its argument and the allocation's stack. Writes are what the dispatcher shows: an operator's written
arguments (out=, in-place) and fresh results; a compiled kernel's arguments, and a collective's, count as written (the
dispatcher does not see what the one writes, c10d's schemas do not say what the other does). The allocator poisons every block it hands out while the sanitizer is on (0xFF bytes: NaN, -1),
so an unreported read, by code the dispatcher does not see, reads the same garbage every run.
"""

import torch

# In-place operators that overwrite their tensor, or part of it, without reading what was there: every other in-place
# aten operator reads the tensor it writes (`x.add_(1)`, `x.mul_(y)`), so a tensor nothing wrote is read there too.
_OVERWRITING = frozenset(
    "aten::" + name
    for name in (
        "copy_",
        "fill_",
        "zero_",
        "normal_",
        "uniform_",
        "random_",
        "bernoulli_",
        "exponential_",
        "geometric_",
        "cauchy_",
        "log_normal_",
        "index_put_",
        "_index_put_impl_",
        "index_fill_",
        "index_copy_",
        "masked_fill_",
        "masked_scatter_",
        "scatter_",
        "fill_diagonal_",
        "set_",
        "resize_",
        "resize_as_",
        "as_strided_",
        "detach_",
        "squeeze_",
        "unsqueeze_",
        "t_",
        "transpose_",
        "swapdims_",
        "requires_grad_",
        "_foreach_zero_",
        "_foreach_copy_",
    )
)


# Arguments aten's schemas list as read whose data the operator never reads (only their sizes, dtype or quantizer),
# by operator or by overload, and those it writes without a write annotation.
_NOT_READ = {
    "aten::fill": ("self",),  # the functional fill: a new tensor like self
    "aten::bernoulli.p": ("self",),  # draws with probability p in self's shape
    "aten::new_zeros": ("self",),
    "aten::new_ones": ("self",),
    "aten::new_full": ("self",),
    "aten::new_empty_strided": ("self",),
    "aten::_has_compatible_shallow_copy_type": ("self", "from"),
    "aten::is_same_size": ("self", "other"),
    "aten::q_scale": ("self",),
    "aten::q_zero_point": ("self",),
    "aten::q_per_channel_axis": ("self",),
    "aten::qscheme": ("self",),
    "aten::q_per_channel_scales": ("self",),
    "aten::q_per_channel_zero_points": ("self",),
}
_UNANNOTATED_WRITES = {"aten::_copy_from": ("dst",), "aten::_copy_from_and_resize": ("dst",)}


class UninitializedReadError(Exception):
    """An operator read a storage that nothing had written since it was allocated."""

    def __init__(self, operator, aliases, allocation, stack):
        self.operator = operator
        self.aliases = aliases
        self.allocation = allocation  # (the allocating operator, its stack)
        self.stack = stack

    def __str__(self) -> str:
        allocating, allocation_stack = self.allocation
        return (
            "============================\n"
            f"openreg sanitizer: {self.operator} reads argument(s) {', '.join(self.aliases) or '?'}, whose memory "
            f"nothing has written since {allocating} allocated it: uninitialized memory (a GPU returns whatever was "
            "there; write it first, or allocate it with zeros/full)\n"
            f"With stack trace:\n{''.join(self.stack.format())}\n"
            f"Allocated with stack trace:\n{''.join(allocation_stack.format())}"
        )


class InitCheck:
    """The uninitialized storages of the checked threads' allocations, by storage address."""

    def __init__(self) -> None:
        self.unwritten = {}  # storage address -> (the allocating operator, its stack)

    def operator(self, func, arguments, allocates: bool, capturing: bool, stack_of) -> list:
        """Checks one operator: its reads of uninitialized storages are errors; then its writes initialize them.
        `arguments` is its reading by the stream-order checker (storages read, written and fresh, argument names);
        `allocates`: it only allocates its result; `capturing`: a graph capture records it (CUDA's runs nothing, and
        replays reuse the capture's memory)."""
        name = func._schema.name
        unannotated = self._named(arguments, _UNANNOTATED_WRITES.get(name))
        written = arguments.dataptrs_written | arguments.fresh | unannotated
        if not name.startswith("aten::"):
            # Other namespaces' schemas may leave writes unsaid (c10d's allgather_ output_tensors, FSDP's copy-in
            # buffer): their tensors count as written, none as read.
            self.written(arguments.dataptrs_read | written)
            return []
        overload = f"{name}.{func._schema.overload_name}"
        not_read = _NOT_READ.get(name, ()) + _NOT_READ.get(overload, ())
        reads = arguments.dataptrs_read - self._named(arguments, not_read) - unannotated
        if name.endswith("_") and name not in _OVERWRITING:
            reads |= arguments.dataptrs_written
        errors = []
        if not capturing:
            errors = [
                UninitializedReadError(func._schema, arguments.tensor_aliases[key], self.unwritten.pop(key), stack_of())
                for key in reads & self.unwritten.keys()
            ]
        if allocates and not capturing and not _fills_uninitialized_memory():
            allocation = (name, stack_of())
            self.unwritten.update((key, allocation) for key in arguments.fresh)
        else:
            self.written(written)
        return errors

    @staticmethod
    def _named(arguments, names) -> set:
        """The storages of the arguments with these names."""
        if not names:
            return set()
        return {key for key, aliases in arguments.tensor_aliases.items() if any(a in names for a in aliases)}

    def written(self, keys) -> None:
        for key in keys:
            self.unwritten.pop(key, None)

    def freed(self, address: int) -> None:
        self.unwritten.pop(address, None)


def _fills_uninitialized_memory() -> bool:
    """Deterministic mode's fill: torch.empty writes NaN (integers: their maximum) into what it allocates."""
    return torch.are_deterministic_algorithms_enabled() and torch.utils.deterministic.fill_uninitialized_memory
