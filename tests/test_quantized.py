"""Quantized tensors on openreg: what CUDA offers, compared bit for bit with the CPU.

Creation (quantize_per_tensor / quantize_per_channel / _make_*_quantized_tensor / the empty factories), copies
between the CPU and openreg, the quantization parameters, the view operators and the compute operators PyTorch
registers for QuantizedCUDA; everything else raises naming openreg, as CUDA raises for want of a kernel.
"""

import copy
import re

import pytest
import torch
import torch.nn.functional as F

from conftest import DEVICE, assert_same, make_cpu

# PyTorch deprecates creating quantized tensors; the warning is the CPU's too.
pytestmark = pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")

QDTYPES = [torch.quint8, torch.qint8, torch.qint32]


def assert_same_quantized(actual, expected):
    """``actual`` is an openreg quantized tensor equal to the CPU one ``expected`` in every respect."""
    assert actual.device.type == DEVICE and expected.device.type == "cpu"
    assert actual.is_quantized and expected.is_quantized
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    assert actual.stride() == expected.stride()
    assert actual.storage_offset() == expected.storage_offset()
    assert actual.qscheme() == expected.qscheme()
    if expected.qscheme() == torch.per_tensor_affine:
        assert actual.q_scale() == expected.q_scale()
        assert actual.q_zero_point() == expected.q_zero_point()
    else:
        assert actual.q_per_channel_axis() == expected.q_per_channel_axis()
        # The parameters live with the tensor, as on CUDA after quantizing there.
        assert_same(actual.q_per_channel_scales(), expected.q_per_channel_scales())
        assert_same(actual.q_per_channel_zero_points(), expected.q_per_channel_zero_points())
    assert_same(actual.int_repr(), expected.int_repr())
    # `.cpu()` of a quantized tensor is contiguous, as from CUDA (empty_quantized).
    assert torch.equal(actual.cpu(), expected)


def per_tensor(x, dtype=torch.quint8):
    return torch.quantize_per_tensor(x, 0.05, 3 if dtype != torch.qint8 else -2, dtype)


def per_channel(x, dtype=torch.qint8, axis=1):
    channels = x.shape[axis]
    scales = torch.linspace(0.02, 0.1, channels, dtype=torch.float64).to(x.device)
    zero_points = torch.arange(channels, dtype=torch.int64).to(x.device) - int(dtype != torch.quint8)
    return torch.quantize_per_channel(x, scales, zero_points, axis, dtype)


def both(fn, x):
    """``fn`` applied to the CPU tensor ``x`` and to its openreg copy."""
    return fn(x.to(DEVICE)), fn(x)


# --------------------------------------------------------------------------
# Creation
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", QDTYPES, ids=str)
@pytest.mark.parametrize(
    "layout",
    ["contiguous", "transposed", "channels_last", "offset"],
)
def test_quantize_per_tensor_matches_cpu(dtype, layout):
    x = make_cpu((2, 3, 4, 5), seed=1) * 4
    if layout == "transposed":
        x = x.transpose(1, 3)
    elif layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    elif layout == "offset":
        x = x[1:, :, 1:]
    actual, expected = both(lambda t: per_tensor(t, dtype), x)
    assert actual.untyped_storage().device.type == DEVICE
    assert_same_quantized(actual, expected)
    assert_same(actual.dequantize(), expected.dequantize())


def test_quantize_per_tensor_with_tensor_parameters_matches_cpu():
    x = make_cpu((4, 6), seed=2)
    for scale_device in ("cpu", DEVICE):  # a 0-dim CPU scale is a scalar, as on CUDA
        scale = torch.tensor(0.03, device=scale_device)
        zero_point = torch.tensor(5, device=scale_device)
        actual = torch.quantize_per_tensor(x.to(DEVICE), scale, zero_point, torch.quint8)
        assert_same_quantized(actual, torch.quantize_per_tensor(x, scale.cpu(), zero_point.cpu(), torch.quint8))


@pytest.mark.parametrize("dtype", QDTYPES, ids=str)
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_quantize_per_channel_matches_cpu(dtype, axis):
    x = make_cpu((3, 4, 5), seed=3) * 2
    actual, expected = both(lambda t: per_channel(t, dtype, axis), x)
    assert actual.qscheme() == torch.per_channel_affine
    assert_same_quantized(actual, expected)
    assert_same(actual.dequantize(), expected.dequantize())


def test_quantize_per_channel_with_float_zero_points_matches_cpu():
    x = make_cpu((4, 3), seed=4)

    def quantize(t):
        scales = torch.tensor([0.1, 0.2, 0.3], device=t.device)
        zero_points = torch.tensor([0.5, -1.0, 2.0], device=t.device)
        return torch.quantize_per_channel(x.to(t.device), scales, zero_points, 1, torch.quint8)

    actual, expected = both(quantize, x)
    assert actual.qscheme() == torch.per_channel_affine_float_qparams
    assert_same_quantized(actual, expected)
    assert_same(actual.dequantize(), expected.dequantize())


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int32], ids=str)
def test_make_per_tensor_quantized_tensor_matches_cpu(dtype):
    ints = make_cpu((3, 5), dtype=dtype, seed=5)
    actual, expected = both(lambda t: torch._make_per_tensor_quantized_tensor(t, 0.25, 2), ints)
    assert_same_quantized(actual, expected)


def test_make_per_channel_quantized_tensor_matches_cpu():
    ints = make_cpu((3, 4), dtype=torch.int8, seed=6)

    def make(t):
        scales = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64, device=t.device)
        return torch._make_per_channel_quantized_tensor(t, scales, torch.tensor([0, 1, -1], device=t.device), 0)

    actual, expected = both(make, ints)
    assert_same_quantized(actual, expected)


@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last], ids=str)
def test_empty_affine_quantized_is_device_memory_laid_out_like_cpu(memory_format):
    def make(device):
        return torch._empty_affine_quantized(
            (2, 3, 4, 5), scale=0.5, zero_point=7, dtype=torch.qint8, device=device, memory_format=memory_format
        )

    before = torch.openreg.memory_allocated()
    actual, expected = make(DEVICE), make("cpu")
    assert torch.openreg.memory_allocated() - before >= expected.untyped_storage().nbytes()
    assert actual.device == torch.device(DEVICE, 0) and actual.untyped_storage().device.type == DEVICE
    assert (actual.dtype, actual.shape, actual.stride()) == (expected.dtype, expected.shape, expected.stride())
    assert (actual.q_scale(), actual.q_zero_point()) == (0.5, 7)


def test_empty_per_channel_affine_quantized_keeps_parameters_on_its_device():
    scales = torch.tensor([0.1, 0.2], dtype=torch.float64)
    zero_points = torch.tensor([3, 4])
    actual = torch._empty_per_channel_affine_quantized(
        (2, 3), scales=scales, zero_points=zero_points, axis=0, dtype=torch.quint8, device=DEVICE
    )
    assert actual.device.type == DEVICE
    assert_same(actual.q_per_channel_scales(), scales)
    assert_same(actual.q_per_channel_zero_points(), zero_points)
    # Parameters given on openreg for a CPU tensor end up on the CPU.
    on_cpu = torch._empty_per_channel_affine_quantized(
        (2, 3), scales=scales.to(DEVICE), zero_points=zero_points.to(DEVICE), axis=0, dtype=torch.quint8
    )
    assert on_cpu.device.type == "cpu" and on_cpu.q_per_channel_scales().device.type == "cpu"
    with pytest.raises(RuntimeError, match="Creation of quantized tensor requires quantized dtype"):  # the CPU's
        torch._empty_per_channel_affine_quantized(
            (2, 3), scales=scales.to(DEVICE), zero_points=zero_points.to(DEVICE), axis=0, device=DEVICE
        )


def test_empty_with_a_quantized_dtype_has_no_parameters_as_on_cpu():
    actual = torch.empty(2, 3, dtype=torch.quint8, device=DEVICE)
    expected = torch.empty(2, 3, dtype=torch.quint8)
    assert actual.is_quantized and actual.device.type == DEVICE
    assert (actual.shape, actual.stride()) == (expected.shape, expected.stride())
    with pytest.raises(RuntimeError, match="UnknownQuantizer"):
        expected.q_scale()
    with pytest.raises(RuntimeError, match="UnknownQuantizer"):
        actual.q_scale()


def test_empty_like_and_new_empty_keep_the_parameters():
    q = per_tensor(make_cpu((3, 4), seed=7)).to(DEVICE)
    made = torch.empty_like(q)
    assert (made.device, made.dtype, made.shape) == (q.device, q.dtype, q.shape)
    assert (made.q_scale(), made.q_zero_point()) == (q.q_scale(), q.q_zero_point())
    channel = per_channel(make_cpu((3, 4), seed=7)).to(DEVICE)
    made = torch.empty_like(channel)
    assert_same(made.q_per_channel_scales(), channel.q_per_channel_scales().cpu())


@pytest.mark.parametrize("dtype", [torch.quint4x2, torch.quint2x4], ids=str)
def test_sub_byte_quantized_dtypes_raise_naming_openreg(dtype):
    x = make_cpu((4, 4), seed=8)
    with pytest.raises(NotImplementedError, match="openreg device have dtype torch.quint8, torch.qint8"):
        torch.quantize_per_tensor(x.to(DEVICE), 0.1, 1, dtype)
    with pytest.raises(NotImplementedError, match="openreg device have dtype"):
        torch._empty_affine_quantized((4,), dtype=dtype, device=DEVICE)
    with pytest.raises(NotImplementedError, match="openreg device have dtype"):
        torch.quantize_per_tensor(x, 0.1, 1, dtype).to(DEVICE)


def test_device_capability_lists_the_quantized_dtypes():
    dtypes = torch.accelerator.get_device_capability(DEVICE)["supported_dtypes"]
    assert {torch.quint8, torch.qint8, torch.qint32} <= set(dtypes)
    assert torch.quint4x2 not in dtypes and torch.quint2x4 not in dtypes


def test_quantized_tensor_on_a_second_device():
    if torch.openreg.device_count() < 2:
        pytest.skip("needs two openreg devices")
    x = make_cpu((3, 4), seed=9)
    actual = per_channel(x.to(f"{DEVICE}:1"))
    assert actual.device == torch.device(DEVICE, 1)
    assert actual.q_per_channel_scales().device == torch.device(DEVICE, 1)
    assert torch.equal(actual.cpu(), per_channel(x))
    moved = actual.to(f"{DEVICE}:0")
    assert moved.device == torch.device(DEVICE, 0) and moved.q_per_channel_scales().device == moved.device
    assert torch.equal(moved.cpu(), per_channel(x))


# --------------------------------------------------------------------------
# Copies
# --------------------------------------------------------------------------


@pytest.mark.parametrize("make", [per_tensor, per_channel], ids=["per_tensor", "per_channel"])
def test_to_and_from_openreg_keeps_everything(make):
    expected = make(make_cpu((3, 4, 5), seed=10))
    on_device = expected.to(DEVICE)
    assert on_device.untyped_storage().device.type == DEVICE
    assert_same_quantized(on_device, expected)
    back = on_device.cpu()
    assert torch.equal(back, expected)
    if expected.qscheme() == torch.per_channel_affine:
        assert back.q_per_channel_scales().device.type == "cpu"
    if make is per_tensor:  # the CPU refuses non-contiguous per-channel tensors
        # Copies across devices are contiguous, as PyTorch makes them for CUDA (empty_quantized), and land on
        # the device asked for, also for views that are not dense.
        for view in (lambda q: q.transpose(0, 2), lambda q: q[:, 1], lambda q: q[..., ::2]):
            moved, back = view(expected).to(DEVICE), view(on_device).cpu()
            assert moved.device.type == DEVICE and back.device.type == "cpu"
            assert moved.is_contiguous() and back.is_contiguous()
            assert torch.equal(moved.cpu(), view(expected)) and torch.equal(back, view(expected))


def test_copy_between_quantized_tensors_takes_the_source_parameters():
    src = per_tensor(make_cpu((3, 4), seed=12))
    for source in (src, src.to(DEVICE)):
        dst = torch._empty_affine_quantized((3, 4), scale=1.0, zero_point=0, dtype=torch.quint8, device=DEVICE)
        dst.copy_(source)
        assert_same_quantized(dst, src)
    channel = per_channel(make_cpu((3, 4), seed=12))
    dst = torch.empty_like(channel.to(DEVICE))
    dst.copy_(channel)  # parameters copied to the destination's device
    assert_same_quantized(dst, channel)
    cpu_dst = torch.empty_like(channel)
    cpu_dst.copy_(channel.to(DEVICE))
    assert torch.equal(cpu_dst, channel) and cpu_dst.q_per_channel_scales().device.type == "cpu"


def test_copy_of_floats_into_a_quantized_tensor_quantizes_like_cpu():
    x = make_cpu((3, 4), seed=13)
    for source in (x, x.to(DEVICE)):
        dst = torch._empty_affine_quantized((3, 4), scale=0.1, zero_point=4, dtype=torch.quint8, device=DEVICE)
        dst.copy_(source)
        expected = torch._empty_affine_quantized((3, 4), scale=0.1, zero_point=4, dtype=torch.quint8)
        assert_same_quantized(dst, expected.copy_(x))


def test_copy_errors_are_the_cpu_ones():
    q = per_tensor(make_cpu((3, 4), seed=14))
    with pytest.raises(RuntimeError, match="Copying from quantized Tensor to non-quantized Tensor is not allowed"):
        torch.empty(3, 4, device=DEVICE).copy_(q.to(DEVICE))
    with pytest.raises(RuntimeError, match="Quantized Copy only works with same qscheme"):
        q.to(DEVICE).copy_(per_channel(make_cpu((3, 4), seed=14)))
    with pytest.raises(RuntimeError, match="Quantized copy only works with kFloat as source Tensor"):
        q.to(DEVICE).copy_(torch.ones(3, 4, dtype=torch.float64, device=DEVICE))


# --------------------------------------------------------------------------
# Views and shape operators (storage shared with the base, as on CUDA)
# --------------------------------------------------------------------------

VIEWS = {
    "view": lambda q: q.view(4, 15),
    "reshape": lambda q: q.reshape(6, 10),
    "permute": lambda q: q.permute(2, 0, 1),
    "transpose": lambda q: q.transpose(0, 2),
    "t_of_2d": lambda q: q[0].t(),
    "select": lambda q: q.select(1, 2),
    "int_index": lambda q: q[1, 2],
    "slice": lambda q: q[:, 1:3, ::2],
    "narrow": lambda q: q.narrow(2, 1, 3),
    "expand": lambda q: q[:1, :1].expand(2, 4, 5),
    "unsqueeze": lambda q: q.unsqueeze(1),
    "squeeze": lambda q: q[:, :1].squeeze(),
    "squeeze_dim": lambda q: q[:, :1].squeeze(1),
    "squeeze_dims": lambda q: q[:1, :1].squeeze((0, 1)),
    "as_strided": lambda q: q.as_strided((3, 3), (7, 2), 4),
    "unfold": lambda q: q.unfold(2, 2, 1),
    "flatten": lambda q: q.flatten(1),
    "unbind": lambda q: q.unbind(1)[2],
    "chunk": lambda q: q.chunk(2, dim=2)[1],
    "movedim": lambda q: q.movedim(0, 2),
    "detach": lambda q: q.detach(),
}


@pytest.mark.parametrize("make", [per_tensor, per_channel], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("name", list(VIEWS))
def test_view_operators_alias_and_match_cpu(make, name):
    view = VIEWS[name]
    base = make(make_cpu((3, 4, 5), seed=15))
    on_device = base.to(DEVICE)
    try:
        expected = view(base)
    except RuntimeError as error:
        # The CPU refuses strides other than contiguous ones for per-channel tensors.
        with pytest.raises(type(error), match=re.escape(str(error))):
            view(on_device)
        return
    actual = view(on_device)
    assert actual.untyped_storage().data_ptr() == on_device.untyped_storage().data_ptr()
    assert_same_quantized(actual, expected)


def test_contiguous_and_clone_match_cpu():
    base = per_tensor(make_cpu((3, 4, 5), seed=16))
    on_device = base.to(DEVICE)
    for fn in (
        lambda q: q.transpose(0, 2).contiguous(),
        lambda q: q.clone(),
        lambda q: q[:, ::2].clone(),
        lambda q: q.transpose(0, 1).reshape(4, 15),
    ):
        actual = fn(on_device)
        assert actual.untyped_storage().data_ptr() != on_device.untyped_storage().data_ptr()
        assert_same_quantized(actual, fn(base))
    channel = per_channel(make_cpu((3, 4, 5), seed=16))
    assert_same_quantized(channel.to(DEVICE).clone(), channel.clone())


def test_writes_through_a_view_reach_the_base():
    base = per_tensor(make_cpu((4, 6), seed=17))
    on_device = base.to(DEVICE)
    on_device[1:3].fill_(1.0)
    base[1:3].fill_(1.0)
    assert_same_quantized(on_device, base)


# --------------------------------------------------------------------------
# Compute operators CUDA has for quantized tensors: the CPU's kernels
# --------------------------------------------------------------------------

COMPUTE = {
    "dequantize": lambda q: q.dequantize(),
    "int_repr": lambda q: q.int_repr(),
    "index_select": lambda q: q.index_select(1, torch.tensor([3, 0, 3], device=q.device)),
    "flip": lambda q: q.flip(0, 2),
    "relu": lambda q: F.relu(q),
    "gelu": lambda q: F.gelu(q),
    "max_dim": lambda q: q.max(dim=1)[0],
    "max_dim_indices": lambda q: q.max(dim=2, keepdim=True)[1],
    "min_dim": lambda q: q.min(dim=0)[0],
    "adaptive_avg_pool2d": lambda q: F.adaptive_avg_pool2d(q, (2, 3)),
    "max_pool2d": lambda q: F.max_pool2d(q, 2),
    "item": lambda q: torch.tensor(q[1, 2, 3].item()),
}


@pytest.mark.parametrize("name", list(COMPUTE))
def test_compute_operators_match_cpu(name):
    fn = COMPUTE[name]
    base = per_tensor(make_cpu((3, 4, 5), seed=18) * 3, torch.quint8)
    actual, expected = fn(base.to(DEVICE)), fn(base)
    if name == "item":
        assert torch.equal(actual, expected)
    elif expected.is_quantized:
        assert_same_quantized(actual, expected)
    else:
        assert_same(actual, expected)


def test_in_place_compute_operators_match_cpu():
    mask = make_cpu((3, 4, 5), dtype=torch.bool, seed=19)
    index = (torch.tensor([0, 2]), torch.tensor([1, 3]))
    for fn in (
        lambda q: q.relu_(),
        lambda q: q.fill_(0.3),
        lambda q: q.fill_(torch.tensor(-0.2, device=q.device)),
        lambda q: q.masked_fill_(mask.to(q.device), 0.7),
        lambda q: q.masked_fill_(mask.to(q.device), torch.tensor(0.1, device=q.device)),
        lambda q: q.index_put_(tuple(i.to(q.device) for i in index), torch.tensor(0.45, device=q.device)),
    ):
        base = per_tensor(make_cpu((3, 4, 5), seed=19) * 2, torch.qint8)
        on_device = base.to(DEVICE)
        result = fn(on_device)
        assert result is on_device
        assert_same_quantized(on_device, fn(base))


def test_compute_on_a_device_mismatch_raises_as_on_cuda():
    q = per_tensor(make_cpu((3, 4), seed=20)).to(DEVICE)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        q.index_select(0, torch.tensor([0, 1]))


def test_printing_shows_the_values_and_parameters():
    q = per_tensor(make_cpu((2, 3), seed=21))
    text = repr(q.to(DEVICE))
    assert "device='openreg:0'" in text and "scale=0.05" in text and "zero_point=3" in text
    values = repr(q).split("]]")[0]
    assert text.split("]]")[0] == values


def test_fallback_counts_quantized_compute():
    q = per_tensor(make_cpu((2, 3), seed=22)).to(DEVICE)
    torch.openreg.reset_fallback_stats()
    q.int_repr()
    assert torch.openreg.fallback_stats().get("aten::int_repr") == 1


# --------------------------------------------------------------------------
# Operators CUDA has no quantized kernel for
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda q: torch.equal(q, q),
        lambda q: q.resize_(2, 2),
        lambda q: torch.max(q),
        lambda q: q.sort(),
        lambda q: torch.cat([q, q]),
        lambda q: q[torch.tensor([0, 1], device=DEVICE)],
        lambda q: q + q,
        lambda q: torch.empty_strided((2,), (1,), dtype=torch.quint8, device=DEVICE),
    ],
    ids=["equal", "resize_", "max", "sort", "cat", "index_with_tensor", "add", "empty_strided"],
)
def test_operators_without_a_cuda_quantized_kernel_raise_naming_openreg(fn):
    q = per_tensor(make_cpu((3, 4), seed=23)).to(DEVICE)
    # The operator that fails is named: the one called, or the one it calls to allocate its result.
    with pytest.raises(
        NotImplementedError, match="(Could not run 'aten::|aten::empty_strided: ).*quantized openreg tensors"
    ):
        fn(q)


def test_set_storage_keeps_the_quantizer_and_checks_the_device():
    base = per_tensor(make_cpu((4, 6), seed=25))
    on_device = base.to(DEVICE)
    target = torch.empty_like(on_device)
    target.set_(on_device.untyped_storage(), 6, (3, 2), (6, 1))
    assert target.untyped_storage().data_ptr() == on_device.untyped_storage().data_ptr()
    expected = torch.empty_like(base).set_(base.untyped_storage(), 6, (3, 2), (6, 1))
    assert_same_quantized(target, expected)
    with pytest.raises(RuntimeError, match="Attempted to set the storage of a tensor on device"):
        torch.empty_like(on_device).set_(base.untyped_storage(), 0, (2,), (1,))


# torch.load's rebuild of a quantized tensor warns about TypedStorage, on the CPU too.
@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
@pytest.mark.parametrize("make", [per_tensor, per_channel], ids=["per_tensor", "per_channel"])
def test_save_load_and_deepcopy_keep_device_and_parameters(make, tmp_path):
    expected = make(make_cpu((3, 4), seed=26))
    on_device = expected.to(DEVICE)
    torch.save(on_device, tmp_path / "q.pt")
    for restored in (torch.load(tmp_path / "q.pt", weights_only=True), copy.deepcopy(on_device)):
        assert restored.untyped_storage().data_ptr() != on_device.untyped_storage().data_ptr()
        assert_same_quantized(restored, expected)
