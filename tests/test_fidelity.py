"""Fidelity to the CPU (and to CUDA's rules) in places found from outside.

Each test compares openreg against the same computation on the CPU, or
against the behaviour CUDA documents where the CPU has no counterpart (moving
modules between devices, device checks of outputs).
"""

import copy
import re
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import DEVICE, assert_same

# --------------------------------------------------------------------------
# Module.to() moves parameters in place (torch._has_compatible_shallow_copy_type)
# --------------------------------------------------------------------------


class TiedLM(nn.Module):
    """A small language model whose output head shares the embedding matrix."""

    def __init__(self, vocab=50, dim=16, context=8):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(context, dim) * 0.02)
        self.block = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, tokens):
        h = self.emb(tokens) + self.pos[: tokens.shape[1]]
        h = h + self.block(h)
        return self.head(self.norm(h))


def train_steps(model, optimizer, batches, device):
    for tokens in batches:
        tokens = tokens.to(device)
        optimizer.zero_grad()
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()


@pytest.mark.parametrize("optimizer_before_move", [False, True], ids=["opt_after_to", "opt_before_to"])
def test_tied_language_model_trains_like_cpu(optimizer_before_move):
    torch.manual_seed(0)
    cpu = TiedLM()
    moved = copy.deepcopy(cpu)
    if optimizer_before_move:
        # References the optimizer holds must follow the parameters, as on CUDA.
        opt_moved = torch.optim.AdamW(moved.parameters(), lr=1e-2)
        moved.to(DEVICE)
    else:
        moved.to(DEVICE)
        opt_moved = torch.optim.AdamW(moved.parameters(), lr=1e-2)
    assert moved.head.weight is moved.emb.weight
    assert len(list(moved.parameters())) == len(list(cpu.parameters()))
    opt_cpu = torch.optim.AdamW(cpu.parameters(), lr=1e-2)

    g = torch.Generator().manual_seed(1)
    batches = [torch.randint(0, 50, (3, 8), generator=g) for _ in range(4)]
    train_steps(cpu, opt_cpu, batches, "cpu")
    train_steps(moved, opt_moved, batches, DEVICE)
    moved_parameters = dict(moved.named_parameters())
    differing = [
        name for name, expected in cpu.named_parameters() if not torch.equal(moved_parameters[name].cpu(), expected)
    ]
    assert differing == []


def test_module_to_keeps_parameter_objects_both_ways():
    lin = nn.Linear(3, 2)
    weight, bias = lin.weight, lin.bias
    lin.weight.grad = torch.ones(2, 3)
    grad = lin.weight.grad
    lin.to(DEVICE)
    assert lin.weight is weight and lin.bias is bias
    assert weight.device.type == DEVICE and isinstance(weight, nn.Parameter) and weight.requires_grad
    assert weight.grad is grad and grad.device.type == DEVICE
    lin.to(torch.float64)
    assert lin.weight is weight and weight.dtype == torch.float64
    lin.to("cpu")
    assert lin.weight is weight and weight.device.type == "cpu" and grad.device.type == "cpu"


def test_module_to_keeps_tensor_hooks():
    lin = nn.Linear(3, 2)
    calls = []
    lin.weight.register_hook(lambda g: calls.append(("hook", g.device.type)))
    lin.weight.register_post_accumulate_grad_hook(lambda p: calls.append(("post_accumulate", p.grad.device.type)))
    lin.to(DEVICE)
    lin(torch.randn(4, 3, device=DEVICE)).sum().backward()
    assert calls == [("hook", DEVICE), ("post_accumulate", DEVICE)]


def test_set_data_across_devices():
    p = nn.Parameter(torch.zeros(3))
    data = torch.arange(3.0, device=DEVICE)
    p.data = data
    assert p.device.type == DEVICE and p.requires_grad
    assert_same(p.detach(), torch.arange(3.0))


@pytest.mark.parametrize(
    "make_other, expected",
    [
        (lambda: torch.randn(3), True),
        (lambda: torch.randn(3, device=DEVICE), True),
        (lambda: torch.randn(3, device="meta"), False),  # meta -> cuda: a new Parameter too
        (lambda: torch.randn(3, 3).to_sparse(), False),
    ],
    ids=["cpu", "openreg", "meta", "sparse_cpu"],
)
def test_has_compatible_shallow_copy_type_follows_cuda(make_other, expected):
    dense = torch.randn(3, device=DEVICE)
    other = make_other()
    assert torch._has_compatible_shallow_copy_type(dense, other) is expected
    assert torch._has_compatible_shallow_copy_type(other, dense) is expected


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_has_compatible_shallow_copy_type_sparse():
    cpu = torch.randn(3, 3).to_sparse()
    dev = cpu.to(DEVICE)
    assert torch._has_compatible_shallow_copy_type(cpu, dev)
    assert torch._has_compatible_shallow_copy_type(dev, cpu)
    csr = torch.randn(3, 3).to_sparse_csr()
    assert torch._has_compatible_shallow_copy_type(csr, csr.to(DEVICE))


@pytest.mark.parametrize(
    "make, shape",
    [
        (lambda: nn.LazyLinear(5), (2, 7)),
        (lambda: nn.LazyConv1d(4, 3), (2, 3, 9)),
        (lambda: nn.LazyConv2d(4, 3), (2, 3, 6, 6)),
        (lambda: nn.LazyConvTranspose2d(4, 3), (2, 3, 5, 5)),
        (lambda: nn.LazyBatchNorm1d(), (4, 3)),
    ],
    ids=["LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConvTranspose2d", "LazyBatchNorm1d"],
)
def test_lazy_modules_after_module_to(make, shape):
    x = torch.randn(shape)
    torch.manual_seed(3)
    expected = make()(x)
    torch.manual_seed(3)
    module = make().to(DEVICE)
    assert all(isinstance(p, nn.parameter.UninitializedParameter) for p in module.parameters())
    actual = module(x.to(DEVICE))
    assert all(p.device.type == DEVICE for p in module.parameters())
    assert_same(actual.detach(), expected.detach())


# --------------------------------------------------------------------------
# Dropout draws the CPU's mask, laid out as the CPU lays it out
# --------------------------------------------------------------------------

DROPOUT_LAYOUTS = {
    "contiguous": lambda: torch.randn(4, 5, 6),
    "transposed": lambda: torch.randn(17, 2, 64).transpose(0, 1),
    "channels_last": lambda: torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
    "sliced": lambda: torch.randn(6, 10)[:, ::3],
    "offset": lambda: torch.randn(5, 7)[2:],
    "expanded": lambda: torch.randn(1, 9).expand(4, 9),
    "scalar": lambda: torch.randn(()),
    "empty": lambda: torch.randn(0, 3).t(),
}
DROPOUT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def same_draw(fn, cpu_input, seed=0):
    """``fn`` on the CPU and on openreg after the same seed: (cpu result, openreg result)."""
    torch.manual_seed(seed)
    expected = fn(cpu_input)
    torch.manual_seed(seed)
    actual = fn(cpu_input.to(DEVICE))
    return expected, actual


@pytest.mark.parametrize("layout", DROPOUT_LAYOUTS)
@pytest.mark.parametrize("dtype", DROPOUT_DTYPES, ids=str)
@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("train", [True, False, None])
def test_native_dropout_matches_cpu(layout, dtype, p, train):
    x = DROPOUT_LAYOUTS[layout]().to(dtype)
    (expected_out, expected_mask), (out, mask) = same_draw(lambda t: torch.native_dropout(t, p, train), x)
    assert_same(out, expected_out)
    assert_same(mask, expected_mask)


@pytest.mark.parametrize("layout", DROPOUT_LAYOUTS)
@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_forward_and_backward_match_cpu(layout, p):
    def run(t):
        t = t.detach().requires_grad_()
        out = F.dropout(t, p, training=True)
        out.backward(torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(t.device))
        return out.detach(), t.grad

    (expected_out, expected_grad), (out, grad) = same_draw(run, DROPOUT_LAYOUTS[layout]())
    assert_same(out, expected_out)
    assert_same(grad, expected_grad)


@pytest.mark.parametrize("dtype", DROPOUT_DTYPES, ids=str)
def test_native_dropout_backward_matches_cpu(dtype):
    x = torch.randn(17, 2, 64).transpose(0, 1).to(dtype)
    grad = torch.randn(2, 64, 17).transpose(1, 2).to(dtype)
    (_, expected_mask), (_, mask) = same_draw(lambda t: torch.native_dropout(t, 0.2, True), x)
    expected = torch.ops.aten.native_dropout_backward(grad, expected_mask, 1 / 0.8)
    assert_same(torch.ops.aten.native_dropout_backward(grad.to(DEVICE), mask, 1 / 0.8), expected)


def test_attention_dropout_on_transposed_heads_matches_cpu():
    # The pattern of a vision transformer in train mode: heads are transposed
    # back before the output dropout.
    layer = nn.Dropout(0.1)
    heads = torch.randn(2, 4, 9, 8)  # batch, heads, tokens, head_dim
    expected, actual = same_draw(lambda t: layer(t.transpose(1, 2).flatten(2)), heads)
    assert_same(actual, expected)


# --------------------------------------------------------------------------
# TensorIterator operators lay out their results as the CPU does
# --------------------------------------------------------------------------

# name -> (shape of the base tensor, view of it); each view is taken of a CPU
# base and of the same base on openreg, so both sides have the same strides.
ITERATOR_LAYOUTS = {
    "contiguous": ((17, 3), lambda t: t),
    "column_major": ((3, 17), lambda t: t.t()),
    "expanded_row": ((3,), lambda t: t.expand(17, 3)),
    "expanded_column": ((17, 1), lambda t: t.expand(17, 3)),
    "expanded_transposed": ((17,), lambda t: t.expand(3, 17).t()),
    "offset": ((20, 3), lambda t: t[3:]),
    "strided": ((17, 6), lambda t: t[:, ::2]),
    "zero_strides": ((1, 1), lambda t: t.expand(17, 3)),
    "zero_dim": ((), lambda t: t),
}
WRITABLE_LAYOUTS = ["contiguous", "column_major", "offset", "strided"]
BINARY_ITERATOR_OPS = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "eq": torch.eq}
DTYPE_PAIRS = [
    (torch.int64, torch.float32),
    (torch.float32, torch.int64),
    (torch.float32, torch.float32),
    (torch.float32, torch.float64),
    (torch.int32, torch.int64),
    (torch.bool, torch.float16),
]


def layout_pair(layout, dtype, seed):
    """(cpu tensor, openreg tensor) with the same values, sizes and strides."""
    shape, view = ITERATOR_LAYOUTS[layout]
    base = (torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 10).to(dtype)
    return view(base), view(base.to(DEVICE))


def same_result(actual, expected):
    """assert_same, with NaN equal to NaN (integer division by zero)."""
    assert actual.device.type == DEVICE
    assert (actual.dtype, actual.shape, actual.stride()) == (expected.dtype, expected.shape, expected.stride())
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)


def mismatches(run):
    """Layout pairs where ``run(a, b)`` differs between the CPU and openreg."""
    failed = []
    for left in ITERATOR_LAYOUTS:
        for right in ITERATOR_LAYOUTS:
            (a, a_dev), (b, b_dev) = layout_pair(left, run.dtypes[0], 1), layout_pair(right, run.dtypes[1], 2)
            try:
                expected = run(a, b)
            except RuntimeError as error:
                with pytest.raises(RuntimeError) as raised:
                    run(a_dev, b_dev)
                if type(raised.value) is not type(error):
                    failed.append((left, right, repr(raised.value), repr(error)))
                continue
            try:
                same_result(run(a_dev, b_dev), expected)
            except AssertionError as error:
                failed.append((left, right, str(error)[:200]))
    return failed


class Functional:
    def __init__(self, op, dtypes):
        self.op, self.dtypes = op, dtypes

    def __call__(self, a, b):
        return self.op(a, b)


class OutResized(Functional):
    """out= given as an empty tensor of the result dtype: resized by the operator."""

    def __call__(self, a, b):
        out = torch.empty(0, dtype=torch.result_type(a, b) if self.op is not torch.eq else torch.bool, device=a.device)
        if self.op is torch.div and not out.dtype.is_floating_point:
            out = out.float()
        result = self.op(a, b, out=out)
        assert result is out
        return out


class OutColumnMajor(Functional):
    """out= of the right size in column-major order (kept: no resize, no restride), in float64."""

    def __call__(self, a, b):
        out = torch.empty(3, 17, dtype=torch.bool if self.op is torch.eq else torch.float64, device=a.device).t()
        self.op(a, b, out=out)
        return out


# Zero-dim operands make the (17, 3) out= tensor resize, with PyTorch's deprecation warning, on both devices.
@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
@pytest.mark.parametrize("dtypes", DTYPE_PAIRS, ids=lambda d: f"{dtype_name(d[0])}-{dtype_name(d[1])}")
@pytest.mark.parametrize("op", BINARY_ITERATOR_OPS)
@pytest.mark.parametrize("form", [Functional, OutResized, OutColumnMajor], ids=lambda f: f.__name__)
def test_binary_iterator_layouts_match_cpu(form, op, dtypes):
    assert mismatches(form(BINARY_ITERATOR_OPS[op], dtypes)) == []


@pytest.mark.parametrize("dtypes", DTYPE_PAIRS, ids=lambda d: f"{dtype_name(d[0])}-{dtype_name(d[1])}")
@pytest.mark.parametrize("op", ["add_", "sub_", "mul_", "div_"])
def test_binary_iterator_in_place_matches_cpu(op, dtypes):
    failed = []
    for left in WRITABLE_LAYOUTS:
        for right in ITERATOR_LAYOUTS:
            (a, a_dev), (b, b_dev) = layout_pair(left, dtypes[0], 1), layout_pair(right, dtypes[1], 2)
            try:
                getattr(a, op)(b)
            except RuntimeError as error:
                with pytest.raises(type(error)):
                    getattr(a_dev, op)(b_dev)
                continue
            assert getattr(a_dev, op)(b_dev) is a_dev
            try:
                same_result(a_dev, a)
            except AssertionError as error:
                failed.append((left, right, str(error)[:200]))
    assert failed == []


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


@pytest.mark.parametrize("op", [torch.sin, torch.exp, torch.sqrt, torch.neg, torch.sigmoid], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.float32], ids=dtype_name)
def test_unary_iterator_layouts_match_cpu(op, dtype):
    failed = []
    for layout in ITERATOR_LAYOUTS:
        a, a_dev = layout_pair(layout, dtype, 1)
        try:
            expected = op(a)
        except RuntimeError as error:
            with pytest.raises(type(error)):
                op(a_dev)
            continue
        try:
            same_result(op(a_dev), expected)
        except AssertionError as error:
            failed.append((layout, str(error)[:200]))
    assert failed == []


def test_l1_loss_of_int_and_transposed_float_matches_cpu():
    # Where the layout difference was first seen: the following sum differed
    # in its last bit.
    target = torch.randint(0, 5, (17, 3))
    pred = torch.randn(3, 17).t()
    expected = F.l1_loss(pred, target.expand(17, 3))
    same_result(F.l1_loss(pred.to(DEVICE), target.to(DEVICE).expand(17, 3)), expected)
    same_result(torch.tensor([2]).to(DEVICE).expand(17, 3) - pred.to(DEVICE), torch.tensor([2]).expand(17, 3) - pred)


# --------------------------------------------------------------------------
# 0-dim CPU tensors are read-only scalars: never outputs (CUDA's rule)
# --------------------------------------------------------------------------

SAME_DEVICE = re.escape(
    "Expected all tensors to be on the same device, but found at least two devices, openreg:0 and cpu!"
)


def cpu_scalar(value=7.0, dtype=torch.float32):
    return torch.tensor(value, dtype=dtype)


# name -> call with openreg `x` (3 elements) and the CPU 0-dim tensor `c` it must refuse to write.
WRITES_TO_CPU_SCALAR = {
    "fallback out=": lambda x, c: torch.acos(x[0], out=c),
    "fallback out= (nonzero)": lambda x, c: torch.nonzero(x[0], out=c.long()),
    "fallback out= (two outputs)": lambda x, c: torch.max(x, 0, out=(c, torch.empty((), dtype=torch.long))),
    "fallback out= (second output)": lambda x, c: torch.max(x, 0, out=(torch.empty((), device=DEVICE), c.long())),
    "fallback out= (binary)": lambda x, c: torch.atan2(x[0], x[1], out=c),
    "fallback in-place": lambda x, c: c.copysign_(x[0]),
    "fallback in-place (index_put_)": lambda x, c: c.index_put_((), x[0]),
    "stub out=": lambda x, c: torch.sin(x[0], out=c),
    "stub out= (binary)": lambda x, c: torch.add(x[0], x[1], out=c),
    "stub out= (promoting)": lambda x, c: torch.mul(x[0].long(), x[1], out=c),
    "stub out= (comparison)": lambda x, c: torch.eq(x[0], x[1], out=c.bool()),
    "stub out= (abs)": lambda x, c: torch.abs(x[0], out=c),
    "stub out= (sum)": lambda x, c: torch.sum(x, 0, out=c),
    "stub in-place": lambda x, c: c.add_(x[0]),
    "stub in-place (div)": lambda x, c: c.div_(x[0]),
}


@pytest.mark.parametrize("case", WRITES_TO_CPU_SCALAR)
def test_cpu_scalar_as_output_raises(case):
    x = torch.rand(3, device=DEVICE)
    c = cpu_scalar()
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        WRITES_TO_CPU_SCALAR[case](x, c)
    assert c.item() == 7.0


# name -> call with `x` (3 elements) and a 0-dim `c`, both on one device, or x
# on openreg and c a CPU scalar: the read-only uses CUDA accepts.
READS_CPU_SCALAR = {
    "fallback functional": lambda x, c: torch.atan2(x, c),
    "fallback out=": lambda x, c: torch.atan2(x, c, out=torch.empty(3, device=x.device)),
    "fallback in-place": lambda x, c: x.clone().copysign_(-c),
    "stub functional": lambda x, c: torch.sub(x, c),
    "stub out=": lambda x, c: torch.mul(x, c, out=torch.empty(0, device=x.device)),
    "stub in-place": lambda x, c: x.clone().div_(c),
    "index_put_ value": lambda x, c: x.clone().index_put_((torch.tensor([1]),), c),
}


@pytest.mark.parametrize("case", READS_CPU_SCALAR)
def test_cpu_scalar_as_input_is_accepted(case):
    x = torch.rand(3)
    expected = READS_CPU_SCALAR[case](x, cpu_scalar())
    assert_same(READS_CPU_SCALAR[case](x.to(DEVICE), cpu_scalar()), expected)


def test_written_argument_on_another_openreg_device_raises():
    x = torch.rand(3, device="openreg:0")
    for call in (
        lambda: torch.acos(x, out=torch.empty(3, device="openreg:1")),
        lambda: torch.sin(x, out=torch.empty(3, device="openreg:1")),
        lambda: torch.empty((), device="openreg:1").copysign_(x[0]),
    ):
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            call()


# --------------------------------------------------------------------------
# Warnings raised by CPU kernels fire as often as on the CPU
# --------------------------------------------------------------------------


def warnings_of(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    return result, [str(w.message) for w in caught]


def index_with_mask(device, mask_dtype, backward):
    x = torch.arange(6.0).reshape(2, 3).to(device).requires_grad_(backward)
    mask = torch.tensor([[1, 0, 1], [0, 1, 0]], dtype=mask_dtype).to(device)
    selected = x[mask]
    if backward:
        (selected * torch.arange(3.0, device=device)).sum().backward()
        return x.grad
    return selected


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
@pytest.mark.parametrize("mask_dtype", [torch.uint8, torch.bool], ids=dtype_name)
def test_indexing_with_a_mask_warns_as_often_as_cpu(mask_dtype, backward):
    expected, expected_warnings = warnings_of(lambda: index_with_mask("cpu", mask_dtype, backward))
    actual, actual_warnings = warnings_of(lambda: index_with_mask(DEVICE, mask_dtype, backward))
    assert actual_warnings == expected_warnings
    assert len(expected_warnings) == (0 if mask_dtype == torch.bool else 1 + backward)
    assert_same(actual.detach(), expected.detach())


# --------------------------------------------------------------------------
# A CPU batch against openreg weights: refused as CUDA refuses it (docs/libraries.md, the type string)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2, 3, 8, 8), (1, 3, 224, 224)])  # batches that select torch's MKLDNN path
def test_cpu_batch_against_device_weights_is_refused_naming_both_types(shape):
    weight = torch.randn(4, 3, 3, 3, device=DEVICE)
    with pytest.raises(RuntimeError, match=re.escape("Input type (torch.FloatTensor) and weight type (")):
        F.conv2d(torch.randn(shape), weight)


@pytest.mark.xfail(
    strict=True,
    reason="torch's processErrorMsgInplace renames only the CPU's and CUDA's types (openregFloatType stays; "
    "docs/libraries.md gives the upstream change)",
)
def test_the_refusal_names_the_weight_type_as_tensor_type_does():
    weight = torch.randn(4, 3, 3, 3, device=DEVICE)
    with pytest.raises(RuntimeError) as refusal:
        F.conv2d(torch.randn(2, 3, 8, 8), weight)
    # CUDA's message names torch.cuda.FloatTensor, which is what a CUDA weight's .type() gives
    assert f"weight type ({weight.type()})" in str(refusal.value)
