"""Comparing openreg results with CPU results."""

import math

import torch
from torch.utils._pytree import tree_flatten

from .placement import DEVICE


def assert_tensor_matches(actual, expected, exact, metadata_only=False, device=DEVICE, tolerances=None):
    """``actual`` is a tensor on ``device`` (a device type, or a set of them) with the CPU tensor ``expected``'s dtype, shape and values.

    ``exact`` demands bitwise equality (NaN equals NaN); otherwise
    ``tolerances`` (``{"rtol": ..., "atol": ...}``) apply to floating and
    complex values, by default ``torch.testing.assert_close``'s for the dtype.
    """
    if actual.device.type not in _device_types(device):
        raise AssertionError(f"result on {actual.device}, expected {device}")
    if actual.dtype != expected.dtype:
        raise AssertionError(f"dtype {actual.dtype}, expected {expected.dtype}")
    if actual.shape != expected.shape:
        raise AssertionError(f"shape {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    if actual.layout != expected.layout:
        raise AssertionError(f"layout {actual.layout}, expected {expected.layout}")
    if metadata_only:
        return
    host = actual.detach().cpu()
    expected = expected.detach()
    tolerances = {"rtol": 0, "atol": 0} if exact or not _is_inexact(expected.dtype) else tolerances or {}
    if host.layout != torch.strided:
        _assert_sparse_structure_matches(host, expected)
        host, expected = host.to_dense(), expected.to_dense()
    torch.testing.assert_close(host, expected, equal_nan=True, check_device=False, **tolerances)


def _assert_sparse_structure_matches(host, expected):
    """Same nnz, dense dimensions, index tensors and (COO) coalesced flag: the same CPU kernels ran on both."""
    for name in ("_nnz", "dense_dim"):
        got, want = getattr(host, name)(), getattr(expected, name)()
        if got != want:
            raise AssertionError(f"{name}() {got}, expected {want}")
    if host.layout == torch.sparse_coo:
        if host.is_coalesced() != expected.is_coalesced():
            raise AssertionError(f"is_coalesced() {host.is_coalesced()}, expected {expected.is_coalesced()}")
        indices = [("indices", host._indices(), expected._indices())]
    else:
        compressed, plain = (
            ("crow_indices", "col_indices")
            if host.layout in (torch.sparse_csr, torch.sparse_bsr)
            else ("ccol_indices", "row_indices")
        )
        indices = [(name, getattr(host, name)(), getattr(expected, name)()) for name in (compressed, plain)]
    for name, got, want in indices:
        if got.dtype != want.dtype or not torch.equal(got, want):
            raise AssertionError(f"{name} {got}, expected {want}")


def _is_inexact(dtype):
    return dtype.is_floating_point or dtype.is_complex


def assert_matches(actual, expected, exact, metadata_only=False, device=DEVICE, tolerances=None):
    """Compares two result trees: tensors with ``assert_tensor_matches``, other leaves with ``==``."""
    actual_leaves, actual_spec = tree_flatten(actual)
    expected_leaves, expected_spec = tree_flatten(expected)
    if actual_spec != expected_spec:
        raise AssertionError(f"result structure {actual_spec}, expected {expected_spec}")
    for index, (got, want) in enumerate(zip(actual_leaves, expected_leaves)):
        try:
            if isinstance(want, torch.Tensor):
                if not isinstance(got, torch.Tensor):
                    raise AssertionError(f"got {type(got).__name__}, expected a tensor")
                assert_tensor_matches(got, want, exact, metadata_only, device, tolerances)
            elif not _same_plain_value(got, want, device):
                raise AssertionError(f"got {got!r}, expected {want!r}")
        except AssertionError as error:
            raise AssertionError(f"output {index}: {error}") from None


def _same_plain_value(got, want, device):
    if isinstance(want, float) and isinstance(got, float) and math.isnan(want):
        return math.isnan(got)
    if isinstance(want, torch.device):
        return isinstance(got, torch.device) and got.type in _device_types(device)
    return type(got) is type(want) and got == want


def _device_types(device):
    return {device} if isinstance(device, str) else set(device)
