"""Pinned (page-locked) host memory for openreg: torch.empty(pin_memory=True),
Tensor.pin_memory / is_pinned, the caching host allocator, asynchronous copies
from and to pinned memory, and DataLoader(pin_memory=True). Values are checked
against the CPU."""

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from conftest import ALL_DTYPES, DEVICE, assert_same, dtype_id, make_cpu

BIG = 16 << 20  # float32 elements (64 MiB): a few copies keep a stream busy


@pytest.fixture(autouse=True)
def synchronized():
    yield
    torch.openreg.synchronize(0)
    torch.openreg.synchronize(1)


# --------------------------------------------------------------------------
# pinning
# --------------------------------------------------------------------------


def test_empty_pin_memory():
    x = torch.empty(1000, pin_memory=True)
    assert x.device == torch.device("cpu")
    assert x.is_pinned() is True
    assert torch.empty(1000).is_pinned() is False
    for factory in (torch.zeros, torch.ones):
        y = factory(10, 3, pin_memory=True)
        assert y.is_pinned()
        assert torch.equal(y, factory(10, 3))
    z = torch.empty_strided((4, 5), (1, 4), pin_memory=True)
    assert z.is_pinned()
    assert z.stride() == (1, 4)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_pin_memory_copies_values(dtype):
    cpu = make_cpu((33, 17), dtype=dtype, seed=1)
    assert cpu.is_pinned() is False
    pinned = cpu.pin_memory()
    assert pinned.is_pinned() is True
    assert cpu.is_pinned() is False  # pin_memory() returns a copy
    assert pinned.data_ptr() != cpu.data_ptr()
    assert pinned.dtype == dtype
    assert torch.equal(pinned, cpu)


def test_pin_memory_keeps_layout_and_is_idempotent():
    cpu = make_cpu((6, 8), seed=2).t()
    pinned = cpu.pin_memory()
    assert pinned.is_pinned()
    assert pinned.stride() == cpu.stride()
    assert torch.equal(pinned, cpu)
    again = pinned.pin_memory()
    assert again.is_pinned()
    assert again.data_ptr() == pinned.data_ptr()  # already pinned: no new copy


def test_views_of_pinned_memory_are_pinned():
    pinned = torch.arange(100.0).pin_memory()
    assert pinned[10:20].is_pinned()
    assert pinned.view(10, 10)[3].is_pinned()
    assert pinned.clone().is_pinned() is False  # a clone lives in ordinary memory


def test_openreg_tensors_are_not_pinned_and_cannot_be_pinned():
    x = torch.ones(4, device=DEVICE)
    assert x.is_pinned() is False
    with pytest.raises(NotImplementedError, match="pin"):
        x.pin_memory()
    with pytest.raises(RuntimeError, match="pin"):
        torch.empty(4, device=DEVICE, pin_memory=True)


def test_host_cache_reuses_and_empties():
    x = torch.empty(1 << 20, dtype=torch.uint8, pin_memory=True)
    ptr = x.data_ptr()
    del x
    y = torch.empty(1 << 20, dtype=torch.uint8, pin_memory=True)
    assert y.data_ptr() == ptr  # served from the caching host allocator
    del y
    torch.accelerator.empty_host_cache()
    torch.accelerator.memory.empty_host_cache()
    # pinning still works afterwards, with correct values
    cpu = make_cpu(1 << 16, seed=3)
    z = cpu.pin_memory()
    assert z.is_pinned()
    assert_same(z.to(DEVICE, non_blocking=True), cpu)


def test_pinned_block_not_reused_before_async_copy_ran():
    """A pinned block freed while a non_blocking copy from it is still queued
    must not be handed out again until the copy ran."""
    expected = make_cpu(BIG, seed=4)
    side = torch.openreg.Stream()
    dev = torch.empty(BIG, device=DEVICE)
    copies = 4
    for _ in range(6):
        host = expected.pin_memory()
        ptr = host.data_ptr()
        with torch.openreg.stream(side):
            for _ in range(copies):
                dev.copy_(host, non_blocking=True)
        del host
        other = torch.empty(BIG, pin_memory=True)
        still_busy = not side.query()  # checked after the allocation
        if still_busy:
            assert other.data_ptr() != ptr, "a pinned block with a pending copy was reused"
            other.fill_(-1.0)  # must not disturb the queued copies
            break
        side.synchronize()
        copies *= 2
    else:
        pytest.fail("could not keep a stream busy long enough")
    side.synchronize()
    assert_same(dev, expected)


# --------------------------------------------------------------------------
# asynchronous copies
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_nonblocking_copies_from_and_to_pinned(dtype):
    expected = make_cpu((129, 65), dtype=dtype, seed=5)
    pinned = expected.pin_memory()
    dev = pinned.to(DEVICE, non_blocking=True)
    torch.openreg.synchronize()
    assert_same(dev, expected)
    back = torch.empty_like(expected).pin_memory()
    back.copy_(dev, non_blocking=True)
    torch.openreg.synchronize()
    assert torch.equal(back, expected)
    # into an existing device tensor, on device 1
    dev1 = torch.empty(expected.shape, dtype=dtype, device="openreg:1")
    dev1.copy_(pinned, non_blocking=True)
    torch.openreg.synchronize(1)
    assert_same(dev1, expected)


def test_nonblocking_copy_of_pinned_view():
    expected = make_cpu((64, 32), seed=6)
    pinned = expected.pin_memory()
    view = pinned[8:40]  # contiguous view at an offset
    dev = view.to(DEVICE, non_blocking=True)
    torch.openreg.synchronize()
    assert_same(dev, expected[8:40])
    strided = pinned.t()  # non-contiguous: converted, still correct
    dev_t = strided.to(DEVICE, non_blocking=True)
    torch.openreg.synchronize()
    assert torch.equal(dev_t.cpu(), expected.t())


def test_nonblocking_copy_from_pageable_memory_is_correct():
    expected = make_cpu(1 << 18, seed=7)
    dev = expected.to(DEVICE, non_blocking=True)  # pageable: copied synchronously
    assert_same(dev, expected)
    out = torch.empty_like(expected)
    out.copy_(dev * 2, non_blocking=True)
    torch.openreg.synchronize()
    assert torch.equal(out, expected * 2)


# --------------------------------------------------------------------------
# DataLoader
# --------------------------------------------------------------------------


def _dataset():
    g = torch.Generator().manual_seed(8)
    return TensorDataset(torch.randn(100, 7, generator=g), torch.randint(0, 10, (100,), generator=g))


class _DictDataset(Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(9)
        self.x = torch.randn(40, 3, generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i], "y": self.x[i].sum()}


def _check_loader(loader, reference):
    batches = list(loader)
    expected = list(reference)
    assert len(batches) == len(expected) > 0
    for (x, y), (ex, ey) in zip(batches, expected):
        assert x.is_pinned() and y.is_pinned()
        assert torch.equal(x, ex) and torch.equal(y, ey)
        # and the pinned batch travels to the device asynchronously, intact
        dx, dy = x.to(DEVICE, non_blocking=True), y.to(DEVICE, non_blocking=True)
        torch.openreg.synchronize()
        assert_same(dx, ex)
        assert_same(dy, ey)


def test_dataloader_pin_memory():
    ds = _dataset()
    _check_loader(DataLoader(ds, batch_size=16, pin_memory=True), DataLoader(ds, batch_size=16))


def test_dataloader_pin_memory_dict_batches():
    ds = _DictDataset()
    for batch, ref in zip(DataLoader(ds, batch_size=8, pin_memory=True), DataLoader(ds, batch_size=8)):
        assert batch["x"].is_pinned() and batch["y"].is_pinned()
        assert torch.equal(batch["x"], ref["x"]) and torch.equal(batch["y"], ref["y"])


def test_dataloader_pin_memory_two_workers():
    ds = _dataset()
    loader = DataLoader(ds, batch_size=16, pin_memory=True, num_workers=2)
    _check_loader(loader, DataLoader(ds, batch_size=16))


@pytest.mark.long
def test_dataloader_pin_memory_two_spawned_workers():
    ds = _dataset()
    loader = DataLoader(ds, batch_size=16, pin_memory=True, num_workers=2, multiprocessing_context="spawn")
    _check_loader(loader, DataLoader(ds, batch_size=16))
