"""The minimal operator set (csrc/aten/MinimalOps.cpp, Copy.cpp) against CPU.

Every operator runs for every dtype, on contiguous, non-contiguous (transposed,
sliced with a step) and zero-size tensors, and the result is compared with the
same operation on the CPU: dtype, shape, strides and bit-exact values.
"""

import pytest
import torch

from conftest import (
    ALL_DTYPES,
    CONVERSION_DTYPES,
    DEVICE,
    assert_same,
    dtype_id,
    make_cpu,
)

each_dtype = pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)


def storage_ptr(t):
    return t.untyped_storage().data_ptr()


# --------------------------------------------------------------------------
# empty.memory_format / empty_strided
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape,memory_format",
    [
        ((2, 3, 4, 5), torch.contiguous_format),
        ((2, 3, 4, 5), torch.channels_last),
        ((2, 3, 2, 4, 5), torch.channels_last_3d),
        ((7,), torch.contiguous_format),
        ((), torch.contiguous_format),
        ((0, 3), torch.contiguous_format),
        ((2, 0, 4, 5), torch.channels_last),
    ],
)
@each_dtype
def test_empty_memory_format(dtype, shape, memory_format):
    x = torch.empty(shape, dtype=dtype, device=DEVICE, memory_format=memory_format)
    ref = torch.empty(shape, dtype=dtype, memory_format=memory_format)
    assert x.device == torch.device(DEVICE, torch.openreg.current_device())
    assert x.dtype == dtype
    assert x.shape == ref.shape
    assert x.stride() == ref.stride()
    assert x.storage_offset() == 0
    assert x.is_contiguous(memory_format=memory_format)
    assert x.untyped_storage().nbytes() == ref.untyped_storage().nbytes()
    # The memory is usable: fill it from the CPU and read it back.
    src = make_cpu(shape, dtype).contiguous(memory_format=memory_format)
    x.copy_(src)
    assert_same(x, src)


@each_dtype
def test_empty_on_explicit_device(dtype):
    x = torch.empty(3, 2, dtype=dtype, device="openreg:1")
    assert x.device == torch.device("openreg:1")
    assert x.untyped_storage().device == torch.device("openreg:1")
    src = make_cpu((3, 2), dtype)
    x.copy_(src)
    assert_same(x, src)


@pytest.mark.parametrize(
    "size,stride",
    [
        ((2, 3), (3, 1)),
        ((2, 3), (1, 2)),
        ((3, 4), (8, 2)),
        ((2, 3), (0, 1)),
        ((4,), (3,)),
        ((0, 4), (4, 1)),
        ((3, 0), (1, 3)),
        ((), ()),
    ],
)
@each_dtype
def test_empty_strided(dtype, size, stride):
    x = torch.empty_strided(size, stride, dtype=dtype, device=DEVICE)
    ref = torch.empty_strided(size, stride, dtype=dtype)
    assert x.device.type == DEVICE
    assert x.dtype == dtype
    assert x.shape == ref.shape
    assert x.stride() == ref.stride()
    assert x.untyped_storage().nbytes() == ref.untyped_storage().nbytes()
    if 0 not in stride:  # an overlapping tensor cannot be written elementwise
        src = make_cpu(size, dtype)
        x.copy_(src)
        ref.copy_(src)
        assert_same(x, ref)


@each_dtype
def test_empty_like_and_new_empty_strided(dtype):
    base = make_cpu((4, 6), dtype).t()
    xd = base.to(DEVICE)
    e = torch.empty_like(xd)
    assert e.stride() == torch.empty_like(base).stride()
    n = xd.new_empty_strided((2, 3), (1, 2))
    assert n.device.type == DEVICE and n.dtype == dtype and n.stride() == (1, 2)


# --------------------------------------------------------------------------
# _copy_from
# --------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (), (0,), (0, 3)], ids=str)
@each_dtype
def test_copy_roundtrip_contiguous(dtype, shape):
    src = make_cpu(shape, dtype)
    xd = src.to(DEVICE)
    assert_same(xd, src)
    back = xd.to("cpu")
    assert back.device.type == "cpu"
    assert back.dtype == dtype and back.stride() == src.stride()
    assert torch.equal(back, src)
    # copy_ into existing tensors, both directions
    dst = torch.empty(shape, dtype=dtype, device=DEVICE)
    dst.copy_(src)
    assert_same(dst, src)
    host = torch.empty(shape, dtype=dtype)
    host.copy_(dst)
    assert torch.equal(host, src)


NONCONTIGUOUS_VIEWS = {
    "transpose": lambda x: x.t(),
    "step_slice": lambda x: x[:, ::2],
    "row_step_offset": lambda x: x[1::2, 1:],
    "expand": lambda x: x[:1].expand(3, -1),
    "zero_size_slice": lambda x: x[:, 2:2],
}


@pytest.mark.parametrize("view", list(NONCONTIGUOUS_VIEWS))
@each_dtype
def test_copy_noncontiguous_source(dtype, view):
    fn = NONCONTIGUOUS_VIEWS[view]
    cpu = make_cpu((4, 6), dtype)
    xd = cpu.to(DEVICE)
    ref_view = fn(cpu)
    dev_view = fn(xd)
    assert dev_view.stride() == ref_view.stride()
    assert dev_view.storage_offset() == ref_view.storage_offset()
    # device -> host of a non-contiguous device view
    back = dev_view.cpu()
    expected = ref_view.clone()
    assert back.stride() == expected.stride()
    assert torch.equal(back, expected)
    # device -> device (clone) keeps the same layout rules as the CPU
    assert_same(dev_view.clone(), expected)
    assert_same(dev_view.contiguous(), ref_view.contiguous())
    # host non-contiguous -> device
    assert_same(ref_view.to(DEVICE), expected)


@pytest.mark.parametrize("view", ["transpose", "step_slice", "row_step_offset", "zero_size_slice"])
@each_dtype
def test_copy_noncontiguous_destination(dtype, view):
    fn = NONCONTIGUOUS_VIEWS[view]
    base_cpu = make_cpu((4, 6), dtype, seed=1)
    base_dev = base_cpu.to(DEVICE)
    dst_cpu = fn(base_cpu)
    dst_dev = fn(base_dev)
    src = make_cpu(dst_cpu.shape, dtype, seed=2)
    # host -> strided device destination
    dst_cpu.copy_(src)
    dst_dev.copy_(src)
    assert_same(base_dev, base_cpu)
    # device -> strided device destination, from a transposed source
    src2 = make_cpu(tuple(reversed(dst_cpu.shape)), dtype, seed=3).t()
    dst_cpu.copy_(src2)
    dst_dev.copy_(src2.to(DEVICE))
    assert_same(base_dev, base_cpu)
    # device strided -> host strided destination
    host_base = torch.zeros_like(base_cpu)
    host_ref = torch.zeros_like(base_cpu)
    fn(host_base).copy_(dst_dev)
    fn(host_ref).copy_(dst_cpu)
    assert torch.equal(host_base, host_ref)


@each_dtype
def test_copy_between_devices(dtype):
    cpu = make_cpu((3, 5), dtype)
    x0 = cpu.to("openreg:0")
    x1 = x0.to("openreg:1")
    assert x1.device == torch.device("openreg:1")
    assert x1.untyped_storage().device == torch.device("openreg:1")
    assert_same(x1, cpu)
    # back to device 0, and a non-contiguous source
    assert_same(x1.to("openreg:0"), cpu)
    t1 = x0.t().to("openreg:1")
    assert t1.device == torch.device("openreg:1")
    assert_same(t1, cpu.t().clone())
    # copy_ into an existing (strided) tensor on the other device
    dst = torch.zeros(5, 6, dtype=dtype, device="openreg:1")
    ref = torch.zeros(5, 6, dtype=dtype)
    dst[:, ::2].copy_(x0.t())
    ref[:, ::2].copy_(cpu.t())
    assert_same(dst, ref)
    # the source is untouched
    assert_same(x0, cpu)


@each_dtype
def test_copy_broadcast(dtype):
    row = make_cpu((4,), dtype, seed=5)
    ref = torch.zeros(3, 4, dtype=dtype)
    ref.copy_(row)
    for src in (row, row.to(DEVICE), row.view(1, 4), row.view(1, 4).to(DEVICE)):
        dst = torch.zeros(3, 4, dtype=dtype, device=DEVICE)
        dst.copy_(src)
        assert_same(dst, ref)
    # a 0-dim source fills everything
    scalar = make_cpu((), dtype, seed=6)
    for src in (scalar, scalar.to(DEVICE)):
        dst = torch.zeros(2, 3, dtype=dtype, device=DEVICE)
        dst.copy_(src)
        assert_same(dst, scalar.expand(2, 3).clone())
    # broadcasting into a host tensor from a device tensor
    host = torch.zeros(3, 4, dtype=dtype)
    host.copy_(row.to(DEVICE))
    assert torch.equal(host, ref)


@pytest.mark.filterwarnings("ignore:Casting complex values to real")
@pytest.mark.parametrize("dst_dtype", CONVERSION_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("dtype", CONVERSION_DTYPES, ids=dtype_id)
def test_copy_dtype_conversion(dtype, dst_dtype):
    # Non-negative values that fit every destination type (no UB in casts).
    base = make_cpu((3, 4), torch.float64, low=0, high=100)
    if dtype == torch.bool:
        src = base > 50
    else:
        src = base.to(dtype)
    expected = src.to(dst_dtype)
    # host -> device with conversion
    assert_same(src.to(DEVICE, dst_dtype), expected)
    xd = src.to(DEVICE)
    # device -> device with conversion
    assert_same(xd.to(dst_dtype), expected)
    # device -> host with conversion
    host = xd.to("cpu", dst_dtype)
    assert host.dtype == dst_dtype and torch.equal(host, expected)
    # copy_ into a strided device tensor of the other dtype
    dst = torch.zeros(4, 3, dtype=dst_dtype, device=DEVICE).t()
    dst.copy_(xd)
    assert_same(dst, expected.t().contiguous().t())
    # across devices with conversion
    assert_same(xd.to("openreg:1", dst_dtype), expected)


@each_dtype
def test_copy_conj_and_neg_views(dtype):
    cpu = make_cpu((2, 3), dtype)
    xd = cpu.to(DEVICE)
    if dtype.is_complex:
        c = xd.conj()
        assert c.is_conj() and c.data_ptr() == xd.data_ptr()
        expected = cpu.conj().resolve_conj()
        assert torch.equal(c.cpu().resolve_conj(), expected)
        assert_same(c.resolve_conj(), expected)
        assert_same(c.clone().resolve_conj(), expected)
        host = torch.empty(2, 3, dtype=dtype)
        host.copy_(c)
        assert torch.equal(host, expected)
    if dtype.is_floating_point or dtype.is_complex or dtype in (torch.int8, torch.int16, torch.int32, torch.int64):
        n = torch._neg_view(xd)
        assert n.is_neg()
        expected = torch._neg_view(cpu).resolve_neg()
        assert torch.equal(n.cpu().resolve_neg(), expected)
        assert_same(n.resolve_neg(), expected)
        dst = torch.empty(2, 3, dtype=dtype, device=DEVICE)
        dst.copy_(n)
        assert_same(dst, expected)
    # conj() of a real tensor is the tensor itself
    if not dtype.is_complex:
        assert xd.conj().data_ptr() == xd.data_ptr()
        assert_same(xd.conj(), cpu)


def test_copy_into_a_partly_overlapping_view_is_refused_as_on_the_cpu():
    for device in ("cpu", DEVICE):
        x = torch.arange(8.0, device=device)
        with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor refer"):
            x[1:].copy_(x[:-1])
        with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor refer"):
            x[:-1].copy_(x[1:])
        assert x.tolist() == list(range(8))
        # A full overlap (the same elements) and disjoint parts of one tensor are copies like any other.
        x.copy_(x)
        x[:4].copy_(x[4:])
        assert x.tolist() == [4.0, 5.0, 6.0, 7.0, 4.0, 5.0, 6.0, 7.0]


@each_dtype
def test_copy_from_and_resize(dtype):
    src = make_cpu((3, 4), dtype)
    # host -> device, destination of the wrong size
    dst = torch.empty(0, dtype=dtype, device=DEVICE)
    out = torch.ops.aten._copy_from_and_resize(src, dst)
    assert out.device.type == DEVICE
    assert dst.shape == (3, 4)
    assert_same(dst, src)
    # device -> device, larger destination shrinks
    dst2 = torch.empty(10, 10, dtype=dtype, device=DEVICE)
    torch.ops.aten._copy_from_and_resize(src.to(DEVICE), dst2)
    assert_same(dst2, src)
    # device -> host
    host = torch.empty(5, dtype=dtype)
    torch.ops.aten._copy_from_and_resize(src.to(DEVICE), host)
    assert host.shape == (3, 4) and torch.equal(host, src)
    # zero-size source
    dst3 = torch.empty(2, dtype=dtype, device=DEVICE)
    torch.ops.aten._copy_from_and_resize(src[:0], dst3)
    assert dst3.shape == (0, 4)


# --------------------------------------------------------------------------
# views: view / as_strided / _reshape_alias
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape,new_shape",
    [((12,), (3, 4)), ((3, 4), (2, 6)), ((2, 3, 4), (6, -1)), ((1,), ()), ((0, 3), (3, 0)), ((4, 3), (12,))],
    ids=str,
)
@each_dtype
def test_view(dtype, shape, new_shape):
    cpu = make_cpu(shape, dtype)
    xd = cpu.to(DEVICE)
    v = xd.view(new_shape)
    ref = cpu.view(new_shape)
    assert_same(v, ref)
    assert v.storage_offset() == ref.storage_offset()
    # a view, never a copy
    assert v.data_ptr() == xd.data_ptr()
    assert storage_ptr(v) == storage_ptr(xd)
    assert v._base is xd


@each_dtype
def test_view_noncontiguous(dtype):
    cpu = make_cpu((4, 6), dtype)
    xd = cpu.to(DEVICE)
    # a transposed tensor can be viewed along the unchanged dimension split
    ref = cpu.t().view(3, 2, 4)
    v = xd.t().view(3, 2, 4)
    assert_same(v, ref)
    assert storage_ptr(v) == storage_ptr(xd)
    # a sliced tensor with offset
    ref2 = cpu[1:3].view(12)
    v2 = xd[1:3].view(12)
    assert_same(v2, ref2)
    assert v2.storage_offset() == ref2.storage_offset() == 6
    assert v2.data_ptr() == xd[1:3].data_ptr()
    # an impossible view fails like on the CPU
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        cpu.t().view(24)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        xd.t().view(24)


@each_dtype
def test_view_dtype(dtype):
    cpu = make_cpu((4, 8), dtype)
    xd = cpu.to(DEVICE)
    target = torch.uint8 if dtype.itemsize == 1 else torch.int16
    ref = cpu.view(target)
    v = xd.view(target)
    assert_same(v, ref)
    assert storage_ptr(v) == storage_ptr(xd)


@pytest.mark.parametrize(
    "size,stride,offset",
    [((3, 4), (4, 1), 0), ((4, 3), (1, 4), 0), ((2, 2), (5, 2), 3), ((5,), (0,), 7), ((0, 2), (1, 1), 2), ((), (), 11)],
    ids=str,
)
@each_dtype
def test_as_strided(dtype, size, stride, offset):
    cpu = make_cpu((12,), dtype)
    xd = cpu.to(DEVICE)
    ref = cpu.as_strided(size, stride, offset)
    v = xd.as_strided(size, stride, offset)
    assert_same(v, ref)
    assert v.storage_offset() == ref.storage_offset()
    assert storage_ptr(v) == storage_ptr(xd)
    assert torch.equal(v.cpu(), ref)
    # of a sliced tensor: without storage_offset the input's offset is kept
    extent = 1 + sum((n - 1) * s for n, s in zip(size, stride))
    if 0 not in size and 2 + extent <= 12:
        sliced_ref = cpu[2:].as_strided(size, stride)
        sliced = xd[2:].as_strided(size, stride)
        assert sliced.storage_offset() == sliced_ref.storage_offset() == 2
        assert_same(sliced, sliced_ref)


@each_dtype
def test_reshape_alias(dtype):
    cpu = make_cpu((3, 4), dtype)
    xd = cpu.to(DEVICE)
    for size, stride in [((4, 3), (3, 1)), ((2, 6), (6, 1)), ((12,), (1,)), ((4, 3), (1, 4))]:
        ref = torch.ops.aten._reshape_alias(cpu, size, stride)
        v = torch.ops.aten._reshape_alias(xd, size, stride)
        assert_same(v, ref)
        assert v.data_ptr() == xd.data_ptr()
        assert storage_ptr(v) == storage_ptr(xd)
    # reshape: an alias when possible, a copy otherwise (same as CPU)
    r = xd.reshape(6, 2)
    assert_same(r, cpu.reshape(6, 2))
    assert r.data_ptr() == xd.data_ptr()
    r2 = xd.t().reshape(12)
    assert_same(r2, cpu.t().reshape(12))
    assert storage_ptr(r2) != storage_ptr(xd)
    # zero-size
    z = torch.ops.aten._reshape_alias(xd[:0], (0, 2, 2), (4, 2, 1))
    assert_same(z, torch.ops.aten._reshape_alias(cpu[:0], (0, 2, 2), (4, 2, 1)))


# --------------------------------------------------------------------------
# resize_
# --------------------------------------------------------------------------


@each_dtype
def test_resize_grow_keeps_data(dtype):
    cpu = make_cpu((6,), dtype)
    ref = cpu.clone()
    xd = cpu.to(DEVICE)
    xd.resize_(4, 5)
    ref.resize_(4, 5)
    assert xd.shape == ref.shape and xd.stride() == ref.stride()
    assert xd.untyped_storage().nbytes() == ref.untyped_storage().nbytes()
    # the first 6 elements survive the growth; the rest is uninitialized
    assert torch.equal(xd.view(-1)[:6].cpu(), cpu)
    # the grown tensor is fully usable
    fill = make_cpu((4, 5), dtype, seed=9)
    xd.copy_(fill)
    assert_same(xd, fill)


@each_dtype
def test_resize_shrink_and_zero(dtype):
    cpu = make_cpu((4, 5), dtype)
    ref = cpu.clone()
    xd = cpu.to(DEVICE)
    nbytes = xd.untyped_storage().nbytes()
    xd.resize_(3, 2)
    ref.resize_(3, 2)
    assert_same(xd, ref)
    # shrinking keeps the storage
    assert xd.untyped_storage().nbytes() == nbytes == ref.untyped_storage().nbytes()
    xd.resize_(0)
    ref.resize_(0)
    assert_same(xd, ref)
    # and growing back within the old capacity sees the old bytes again
    xd.resize_(20)
    ref.resize_(20)
    assert_same(xd, ref)


@each_dtype
def test_resize_from_empty(dtype):
    xd = torch.empty(0, dtype=dtype, device=DEVICE)
    xd.resize_(2, 3)
    ref = torch.empty(0, dtype=dtype).resize_(2, 3)
    assert xd.shape == ref.shape and xd.stride() == ref.stride()
    assert xd.untyped_storage().nbytes() == ref.untyped_storage().nbytes()
    src = make_cpu((2, 3), dtype)
    xd.copy_(src)
    assert_same(xd, src)


@pytest.mark.parametrize("memory_format", [torch.channels_last, torch.contiguous_format], ids=str)
@each_dtype
def test_resize_memory_format(dtype, memory_format):
    xd = torch.empty(3, dtype=dtype, device=DEVICE)
    ref = torch.empty(3, dtype=dtype)
    xd.resize_(2, 3, 4, 5, memory_format=memory_format)
    ref.resize_(2, 3, 4, 5, memory_format=memory_format)
    assert xd.shape == ref.shape
    assert xd.stride() == ref.stride()
    assert xd.is_contiguous(memory_format=memory_format)
    src = make_cpu((2, 3, 4, 5), dtype)
    xd.copy_(src)
    ref.copy_(src)
    assert_same(xd, ref)


@each_dtype
def test_resize_view_with_offset_grows_shared_storage(dtype):
    cpu = make_cpu((6,), dtype)
    base_ref = cpu.clone()
    base = cpu.to(DEVICE)
    view_ref = base_ref[2:]
    view = base[2:]
    view_ref.resize_(8)
    view.resize_(8)
    assert view.storage_offset() == 2
    assert view.untyped_storage().nbytes() == view_ref.untyped_storage().nbytes() == 10 * dtype.itemsize
    # base and view still share the (reallocated) storage
    assert storage_ptr(view) == storage_ptr(base)
    assert torch.equal(base.cpu(), cpu)
    fill = make_cpu((8,), dtype, seed=4)
    view.copy_(fill)
    view_ref.copy_(fill)
    assert_same(base, base_ref)
    full = torch.empty(0, dtype=dtype, device=DEVICE).set_(base.untyped_storage(), 0, (10,), (1,))
    full_ref = torch.empty(0, dtype=dtype).set_(base_ref.untyped_storage(), 0, (10,), (1,))
    assert_same(full, full_ref)


# --------------------------------------------------------------------------
# _local_scalar_dense
# --------------------------------------------------------------------------


@each_dtype
def test_item(dtype):
    cpu = make_cpu((3, 4), dtype)
    xd = cpu.to(DEVICE)
    for idx in [(0, 0), (2, 3), (1, 2)]:
        got = xd[idx].item()
        want = cpu[idx].item()
        assert type(got) is type(want)
        assert got == want
    # 0-dim, 1-element, non-contiguous element, element on device 1
    s = make_cpu((), dtype, seed=3)
    assert s.to(DEVICE).item() == s.item()
    assert s.view(1).to(DEVICE).item() == s.item()
    assert xd.t()[3, 1].item() == cpu.t()[3, 1].item()
    assert xd[:, ::2][2, 1].item() == cpu[:, ::2][2, 1].item()
    assert cpu.to("openreg:1")[1, 1].item() == cpu[1, 1].item()
    assert torch.ops.aten._local_scalar_dense(xd[2, 2]) == cpu[2, 2].item()
    # Python scalar conversions go through the same op
    if not dtype.is_complex:
        assert float(xd[0, 1]) == float(cpu[0, 1])
        assert bool(xd[0, 1]) == bool(cpu[0, 1])
    else:
        assert complex(xd[0, 1]) == complex(cpu[0, 1])


@each_dtype
def test_item_errors_like_cpu(dtype):
    xd = make_cpu((2,), dtype).to(DEVICE)
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted to Scalar"):
        xd.item()
    with pytest.raises(RuntimeError, match="a Tensor with 0 elements cannot be converted to Scalar"):
        xd[:0].item()
    # The operator itself, below item()'s check: an error, not a read past the storage.
    with pytest.raises(RuntimeError, match="_local_scalar_dense: a tensor with 0 elements on openreg:0"):
        torch.ops.aten._local_scalar_dense(xd[:0])


# --------------------------------------------------------------------------
# set_
# --------------------------------------------------------------------------


def _check_shared(a, b, dtype, a_idx, b_idx):
    """a and b share memory: a write through one is visible in the other."""
    assert storage_ptr(a) == storage_ptr(b)
    v1 = make_cpu((), dtype, seed=11)
    a[a_idx] = v1.to(DEVICE)
    assert b[b_idx].item() == v1.item()
    v2 = make_cpu((), dtype, seed=12)
    b[b_idx] = v2.to(DEVICE)
    assert a[a_idx].item() == v2.item()


@each_dtype
def test_set_source_tensor(dtype):
    cpu = make_cpu((3, 4), dtype)
    src = cpu.to(DEVICE)
    for source_cpu, source in [(cpu, src), (cpu.t(), src.t()), (cpu[1:, ::2], src[1:, ::2])]:
        t = torch.empty(0, dtype=dtype, device=DEVICE)
        ref = torch.empty(0, dtype=dtype)
        t.set_(source)
        ref.set_(source_cpu)
        assert_same(t, ref)
        assert t.storage_offset() == ref.storage_offset()
        assert t.data_ptr() == source.data_ptr()
        assert t.is_set_to(source)
    t = torch.empty(5, dtype=dtype, device=DEVICE)
    t.set_(src)
    _check_shared(t, src, dtype, (1, 2), (1, 2))
    # set_ to itself is a no-op
    assert src.set_(src) is src
    assert src.shape == (3, 4)


@each_dtype
def test_set_source_storage(dtype):
    cpu = make_cpu((3, 4), dtype)
    src = cpu.to(DEVICE)
    t = torch.empty(0, dtype=dtype, device=DEVICE)
    ref = torch.empty(0, dtype=dtype)
    t.set_(src.untyped_storage())
    ref.set_(cpu.untyped_storage())
    assert_same(t, ref)
    assert t.shape == (12,)
    _check_shared(t, src, dtype, 5, (1, 1))
    # a typed storage works as well
    t2 = torch.empty(0, dtype=dtype, device=DEVICE).set_(src.untyped_storage())
    assert storage_ptr(t2) == storage_ptr(src)


@each_dtype
def test_set_source_storage_offset(dtype):
    cpu = make_cpu((3, 4), dtype)
    src = cpu.to(DEVICE)
    t = torch.empty(0, dtype=dtype, device=DEVICE)
    ref = torch.empty(0, dtype=dtype)
    t.set_(src.untyped_storage(), 2, (2, 3), (1, 2))
    ref.set_(cpu.untyped_storage(), 2, (2, 3), (1, 2))
    assert_same(t, ref)
    assert t.storage_offset() == 2
    # zero-size and default stride
    z = torch.empty(0, dtype=dtype, device=DEVICE).set_(src.untyped_storage(), 5, (0,))
    zref = torch.empty(0, dtype=dtype).set_(cpu.untyped_storage(), 5, (0,))
    assert_same(z, zref)
    c = torch.empty(0, dtype=dtype, device=DEVICE).set_(src.untyped_storage(), 4, (2, 4))
    cref = torch.empty(0, dtype=dtype).set_(cpu.untyped_storage(), 4, (2, 4))
    assert_same(c, cref)
    # t[1, 2] is storage element 2 + 1 + 4 = 7, which is src[1, 3]
    _check_shared(t, src, dtype, (1, 2), (1, 3))


@each_dtype
def test_set_source_storage_offset_grows_storage(dtype):
    cpu = make_cpu((4,), dtype)
    src = cpu.to(DEVICE)
    ref_src = cpu.clone()
    t = torch.empty(0, dtype=dtype, device=DEVICE).set_(src.untyped_storage(), 2, (6,), (1,))
    ref = torch.empty(0, dtype=dtype).set_(ref_src.untyped_storage(), 2, (6,), (1,))
    assert t.untyped_storage().nbytes() == ref.untyped_storage().nbytes() == 8 * dtype.itemsize
    assert storage_ptr(t) == storage_ptr(src)
    assert torch.equal(t[:2].cpu(), cpu[2:])
    assert_same(src, cpu)


# --------------------------------------------------------------------------
# Aliasing of views
# --------------------------------------------------------------------------

VIEW_FNS = {
    "view": lambda x: x.view(6, 4),
    "as_strided": lambda x: x.as_strided((3, 3), (5, 2), 1),
    "slice": lambda x: x[1:3, 1:5:2],
    "transpose": lambda x: x.t(),
    "unfold": lambda x: x.unfold(1, 2, 2),
    "diagonal": lambda x: x.diagonal(offset=1),
    "select": lambda x: x[2],
    "narrow_unsqueeze": lambda x: x.narrow(0, 1, 2).unsqueeze(1),
}


@pytest.mark.parametrize("name", list(VIEW_FNS))
@each_dtype
def test_write_through_view_visible_in_base(dtype, name):
    fn = VIEW_FNS[name]
    cpu = make_cpu((4, 6), dtype)
    xd = cpu.to(DEVICE)
    vd = fn(xd)
    vc = fn(cpu)
    assert vd.shape == vc.shape and vd.stride() == vc.stride()
    assert vd.storage_offset() == vc.storage_offset()
    assert storage_ptr(vd) == storage_ptr(xd)
    new = make_cpu(vc.shape, dtype, seed=21)
    vd.copy_(new)
    vc.copy_(new)
    assert_same(xd, cpu)
    # a write into the base is visible in the view
    fill = make_cpu((), dtype, seed=22)
    xd.fill_(fill.item())
    cpu.fill_(fill.item())
    assert_same(vd, vc)
    # an in-place op through the view (runs on the host view of the memory)
    vd.zero_()
    vc.zero_()
    assert_same(xd, cpu)


@pytest.mark.parametrize("name", list(VIEW_FNS))
@each_dtype
def test_write_into_base_visible_in_view(dtype, name):
    fn = VIEW_FNS[name]
    cpu = make_cpu((4, 6), dtype)
    xd = cpu.to(DEVICE)
    vd = fn(xd)
    vc = fn(cpu)
    new = make_cpu((4, 6), dtype, seed=31)
    xd.copy_(new)
    cpu.copy_(new)
    assert_same(vd, vc)
    # element assignment into the base
    xd[2, 3] = new[0, 0].to(DEVICE)
    cpu[2, 3] = new[0, 0]
    assert_same(vd, vc)


# --------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------

OPENREG_KERNELS = [
    "empty.memory_format",
    "empty_strided",
    "as_strided",
    "view",
    "_reshape_alias",
    "resize_",
    "_copy_from",
    "_copy_from_and_resize",
    "_local_scalar_dense",
    "set_.source_Tensor",
    "set_.source_Storage",
    "set_.source_Storage_storage_offset",
    "convolution_overrideable",
    "convolution_backward_overrideable",
]


@pytest.mark.parametrize("op", OPENREG_KERNELS)
def test_minimal_op_has_openreg_kernel(op):
    assert torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{op}", "PrivateUse1")


def test_copy_from_direct_call():
    src = make_cpu((2, 3), torch.float32)
    dst = torch.empty(2, 3, device=DEVICE)
    torch.ops.aten._copy_from(src, dst)
    assert_same(dst, src)
    host = torch.empty(2, 3)
    torch.ops.aten._copy_from(dst, host)
    assert torch.equal(host, src)


@each_dtype
def test_copy_non_blocking_with_pinned_host_memory(dtype):
    src = make_cpu((4, 5), dtype)
    pinned = src.pin_memory()
    assert pinned.is_pinned()
    xd = pinned.to(DEVICE, non_blocking=True)
    torch.openreg.synchronize()
    assert_same(xd, src)
    host = torch.empty(4, 5, dtype=dtype).pin_memory()
    host.copy_(xd, non_blocking=True)
    torch.openreg.synchronize()
    assert torch.equal(host, src)
    # strided device source into pinned memory
    host_t = torch.empty(5, 4, dtype=dtype).pin_memory()
    host_t.copy_(xd.t(), non_blocking=True)
    torch.openreg.synchronize()
    assert torch.equal(host_t, src.t())
