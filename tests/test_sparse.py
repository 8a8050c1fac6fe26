"""Sparse layouts on openreg: COO (SparsePrivateUse1) and CSR/CSC/BSR/BSC (SparseCsrPrivateUse1).

Structural operators are PyTorch's device-generic kernels (csrc/aten/SparseTensors.cpp); everything that computes
runs the CPU's sparse kernel on host views of the device components (csrc/aten/SparseFallback.cpp). So every result
must equal the CPU's exactly: layout, sizes, nnz, index tensors, values, dtype and the COO coalesced flag.
"""

import re
import warnings

import pytest
import torch

from conftest import DEVICE, assert_same, dtype_id, make_cpu

pytestmark = pytest.mark.filterwarnings("ignore:Sparse (CSR )?.*:UserWarning")

COMPRESSED = [torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc]
BLOCKED = (torch.sparse_bsr, torch.sparse_bsc)
# CPU sparse kernels cover these (to_sparse, coalesce, add, mul, to_dense); half types only where noted.
DTYPES = [torch.float32, torch.float64, torch.int64, torch.bool, torch.float16, torch.bfloat16, torch.complex64]


def layout_id(layout):
    return str(layout).replace("torch.", "")


def components(t):
    """The tensors that define a sparse tensor, by name."""
    if t.layout == torch.sparse_coo:
        return {"indices": t._indices(), "values": t._values()}
    if t.layout in (torch.sparse_csr, torch.sparse_bsr):
        return {"crow_indices": t.crow_indices(), "col_indices": t.col_indices(), "values": t.values()}
    return {"ccol_indices": t.ccol_indices(), "row_indices": t.row_indices(), "values": t.values()}


def assert_sparse_same(actual, expected, device_type=DEVICE):
    """``actual`` (on ``device_type``) equals the CPU sparse tensor ``expected`` in structure and values."""
    assert actual.device.type == device_type, actual.device
    assert expected.device.type == "cpu", expected.device
    assert actual.layout == expected.layout, (actual.layout, expected.layout)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual._nnz() == expected._nnz(), (actual._nnz(), expected._nnz())
    assert actual.sparse_dim() == expected.sparse_dim()
    assert actual.dense_dim() == expected.dense_dim()
    if expected.layout == torch.sparse_coo:
        assert actual.is_coalesced() == expected.is_coalesced()
    got, want = components(actual), components(expected)
    for name in want:
        assert got[name].device == actual.device, (name, got[name].device, actual.device)
        host = got[name].cpu()
        assert host.dtype == want[name].dtype, (name, host.dtype, want[name].dtype)
        assert torch.equal(host, want[name]), f"{name}:\nactual:\n{host}\nexpected:\n{want[name]}"


def assert_result_same(actual, expected):
    if expected.layout == torch.strided:
        assert_same(actual, expected, check_stride=False)
    else:
        assert_sparse_same(actual, expected)


def on_device(value):
    return value.to(DEVICE) if isinstance(value, torch.Tensor) else value


def check_same(fn, *cpu_args):
    """``fn`` on CPU tensors and on openreg copies of them: equal results, or the CPU's exception and message."""
    try:
        expected = fn(*cpu_args)
    except Exception as error:  # noqa: BLE001 - whatever the CPU raises is the expectation
        with pytest.raises(type(error)) as info:
            fn(*map(on_device, cpu_args))
        expected_message = str(error).splitlines()[0]
        missing = re.match(
            r"(Could not run '.*' with arguments from the ')Sparse(Csr)?CPU(' backend)", expected_message
        )
        if missing:
            # No CPU kernel at all: the same error, naming the openreg key rather than the CPU's.
            prefix, csr, suffix = missing.groups()
            assert str(info.value).startswith(f"{prefix}Sparse{csr or ''}PrivateUse1{suffix}"), str(info.value)
        else:
            assert str(info.value).splitlines()[0] == expected_message
        return None
    actual = fn(*map(on_device, cpu_args))
    assert_result_same(actual, expected)
    return actual


def sparse_input(dtype=torch.float32, shape=(5, 6), seed=0, density_seed=1):
    """A dense CPU tensor with about half of its entries zero."""
    values = make_cpu(shape, dtype, seed=seed)
    keep = make_cpu(shape, torch.bool, seed=density_seed)
    return torch.where(keep, values, torch.zeros((), dtype=dtype))


def uncoalesced_coo(dtype=torch.float32):
    """A COO tensor with duplicate and unsorted indices, and its dense equivalent."""
    indices = torch.tensor([[2, 0, 1, 2, 0], [1, 3, 0, 1, 3]])
    values = make_cpu(5, dtype, seed=3)
    return torch.sparse_coo_tensor(indices, values, (3, 4))


def to_sparse_kwargs(layout):
    return {"layout": layout, "blocksize": (2, 2) if layout in BLOCKED else None}


# --------------------------------------------------------------------------
# Construction and conversion
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_sparse_coo_tensor_constructor(dtype):
    cpu = uncoalesced_coo(dtype)
    actual = torch.sparse_coo_tensor(cpu._indices().to(DEVICE), cpu._values().to(DEVICE), cpu.shape)
    assert_sparse_same(actual, cpu)
    assert not actual.is_coalesced()
    direct = torch.sparse_coo_tensor(cpu._indices(), cpu._values(), cpu.shape, device=DEVICE)
    assert_sparse_same(direct, cpu)


@pytest.mark.parametrize("layout", COMPRESSED, ids=layout_id)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool], ids=dtype_id)
def test_compressed_constructors(layout, dtype):
    cpu = sparse_input(dtype, (4, 6)).to_sparse(**to_sparse_kwargs(layout))
    parts = [p.to(DEVICE) for p in components(cpu).values()]
    actual = torch.sparse_compressed_tensor(*parts, cpu.shape, layout=layout)
    assert_sparse_same(actual, cpu)
    constructor = {
        torch.sparse_csr: torch.sparse_csr_tensor,
        torch.sparse_csc: torch.sparse_csc_tensor,
        torch.sparse_bsr: torch.sparse_bsr_tensor,
        torch.sparse_bsc: torch.sparse_bsc_tensor,
    }[layout]
    direct = constructor(*components(cpu).values(), cpu.shape, device=DEVICE)
    assert_sparse_same(direct, cpu)


@pytest.mark.parametrize("layout", [torch.sparse_coo] + COMPRESSED, ids=layout_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_dense_to_sparse(layout, dtype):
    dense = sparse_input(dtype, (4, 6))
    expected = dense.to_sparse(**to_sparse_kwargs(layout))
    assert_sparse_same(dev(dense).to_sparse(**to_sparse_kwargs(layout)), expected)
    method = {
        torch.sparse_coo: lambda t: t.to_sparse(),
        torch.sparse_csr: lambda t: t.to_sparse_csr(),
        torch.sparse_csc: lambda t: t.to_sparse_csc(),
        torch.sparse_bsr: lambda t: t.to_sparse_bsr((2, 2)),
        torch.sparse_bsc: lambda t: t.to_sparse_bsc((2, 2)),
    }[layout]
    assert_sparse_same(method(dev(dense)), method(dense))


def dev(t):
    return t.to(DEVICE)


def test_dense_to_sparse_with_dims():
    dense = sparse_input(torch.float32, (3, 4, 2))
    assert_sparse_same(dev(dense).to_sparse(2), dense.to_sparse(2))  # hybrid: one dense dimension
    assert_sparse_same(dev(dense).to_sparse_csr(dense_dim=1), dense.to_sparse_csr(dense_dim=1))
    pattern = sparse_input(torch.float32, (4, 4))
    batched = torch.stack([pattern, 2 * pattern])  # batches need equal nnz
    assert_sparse_same(dev(batched).to_sparse_csr(), batched.to_sparse_csr())
    assert_sparse_same(dev(batched).to_sparse_bsr((2, 2)), batched.to_sparse_bsr((2, 2)))
    # non-contiguous dense input
    assert_sparse_same(dev(dense).transpose(0, 2).to_sparse(), dense.transpose(0, 2).to_sparse())


@pytest.mark.parametrize("layout", [torch.sparse_coo] + COMPRESSED, ids=layout_id)
def test_zero_nnz_and_zero_size(layout):
    kwargs = to_sparse_kwargs(layout)
    for dense in (torch.zeros(4, 6), torch.zeros(0, 4)):
        expected = dense.to_sparse(**kwargs)
        actual = dev(dense).to_sparse(**kwargs)
        assert_sparse_same(actual, expected)
        assert_same(actual.to_dense(), dense)
        assert_sparse_same(expected.to(DEVICE), expected)
        assert_sparse_same(actual.cpu(), expected, device_type="cpu")


@pytest.mark.parametrize("layout", [torch.sparse_coo] + COMPRESSED, ids=layout_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_round_trip_between_devices(layout, dtype):
    cpu = sparse_input(dtype, (4, 6)).to_sparse(**to_sparse_kwargs(layout))
    on_device = cpu.to(DEVICE)
    assert_sparse_same(on_device, cpu)
    back = on_device.cpu()
    assert back.device.type == "cpu"
    assert_sparse_same(back.to(DEVICE), cpu)
    assert_same(on_device.to_dense(), cpu.to_dense())


def test_round_trip_keeps_uncoalesced_indices():
    cpu = uncoalesced_coo()
    on_device = cpu.to(DEVICE)
    assert_sparse_same(on_device, cpu)
    assert_sparse_same(on_device.cpu(), cpu, device_type="cpu")
    assert_same(on_device.to_dense(), cpu.to_dense())


def test_second_device(restore_device):
    cpu = uncoalesced_coo()
    on_one = cpu.to(f"{DEVICE}:1")
    assert on_one.device == torch.device(DEVICE, 1)
    assert on_one._indices().device == on_one._values().device == on_one.device
    result = on_one.coalesce()
    assert result.device == torch.device(DEVICE, 1)
    assert result._values().device == result.device
    assert_sparse_same(result, cpu.coalesce())
    empty = torch.empty(2, 3, layout=torch.sparse_coo, device=f"{DEVICE}:1")
    assert empty._indices().device == empty._values().device == torch.device(DEVICE, 1)
    csr = torch.ones(2, 2).to_sparse_csr().to(f"{DEVICE}:1")
    assert csr.crow_indices().device == csr.values().device == torch.device(DEVICE, 1)
    assert_same(csr.to_dense(), torch.ones(2, 2))


def test_accessors_are_device_tensors():
    cpu = uncoalesced_coo().coalesce()
    actual = cpu.to(DEVICE)
    # .to() copied the components (narrowed views on the CPU) densely, as for CUDA: strides may differ
    assert_same(actual.indices(), cpu.indices(), check_stride=False)
    assert_same(actual.values(), cpu.values(), check_stride=False)
    assert actual.sparse_dim() == 2 and actual.dense_dim() == 0 and actual._nnz() == cpu._nnz()
    csr = sparse_input().to_sparse_csr()
    on_device = csr.to(DEVICE)
    assert_same(on_device.crow_indices(), csr.crow_indices())
    assert_same(on_device.col_indices(), csr.col_indices())
    assert_same(on_device.values(), csr.values())
    csc = sparse_input().to_sparse_csc()
    assert_same(csc.to(DEVICE).ccol_indices(), csc.ccol_indices())
    assert_same(csc.to(DEVICE).row_indices(), csc.row_indices())


@pytest.mark.parametrize("source", [torch.sparse_coo] + COMPRESSED, ids=layout_id)
@pytest.mark.parametrize("target", [torch.sparse_coo] + COMPRESSED, ids=layout_id)
def test_layout_conversions(source, target):
    cpu = sparse_input(torch.float64, (4, 6)).to_sparse(**to_sparse_kwargs(source))
    kwargs = to_sparse_kwargs(target)
    try:
        expected = cpu.to_sparse(**kwargs)
    except RuntimeError as error:
        # Conversions the CPU does not implement fail the same way.
        with pytest.raises(type(error), match=str(error).splitlines()[0][:40]):
            cpu.to(DEVICE).to_sparse(**kwargs)
        return
    assert_sparse_same(cpu.to(DEVICE).to_sparse(**kwargs), expected)


# --------------------------------------------------------------------------
# Compute
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool, torch.bfloat16], ids=dtype_id)
def test_coalesce(dtype):
    cpu = uncoalesced_coo(dtype)
    actual = cpu.to(DEVICE).coalesce()
    assert_sparse_same(actual, cpu.coalesce())
    assert actual.is_coalesced()
    # coalesce() of a coalesced tensor is that tensor, as on the CPU
    assert actual.coalesce() is actual


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.int64, torch.float16, torch.bfloat16], ids=dtype_id
)
def test_coo_arithmetic(dtype):
    # Some CPU kernels lack half types ("cadd_sparse" not implemented for 'Half'): then the same error.
    a, b = uncoalesced_coo(dtype), sparse_input(dtype, (3, 4), seed=5).to_sparse()
    dense = make_cpu((3, 4), dtype, seed=7)
    check_same(lambda x, y: x + y, a, b)
    check_same(lambda x, y: x - y, a, b)
    check_same(lambda x, y: x * y, a, b)
    check_same(lambda x: x * 3, a)
    check_same(lambda d, x: d + x, dense, a)
    check_same(lambda d, x: torch.add(d, x, alpha=2), dense, a)
    check_same(lambda x, d: x.coalesce() * d, a, dense)


@pytest.mark.parametrize("layout", COMPRESSED, ids=layout_id)
def test_compressed_arithmetic(layout):
    kwargs = to_sparse_kwargs(layout)
    a = sparse_input(torch.float32, (4, 6)).to_sparse(**kwargs)
    b = sparse_input(torch.float32, (4, 6), seed=2, density_seed=3).to_sparse(**kwargs)
    check_same(lambda x: x * 2, a)
    check_same(lambda x: -x, a)
    check_same(lambda x: x.sin(), a)
    check_same(lambda x: x.abs(), a)
    check_same(lambda x, y: x + y, a, b)
    check_same(lambda x, y: x * y, a, b)


def test_in_place_on_device_memory():
    # sin_ and neg_ work on the values in place on the CPU; on openreg the CPU kernel does the same on device memory.
    for layout in (torch.sparse_coo, torch.sparse_csr):
        cpu = sparse_input().to_sparse(layout=layout)
        actual = cpu.to(DEVICE)
        values_ptr = actual.values().data_ptr()
        assert actual.sin_() is actual
        assert actual.neg_() is actual
        assert actual.values().data_ptr() == values_ptr
        assert_sparse_same(actual, cpu.sin_().neg_())


def test_in_place_replacing_components():
    # add_ of a sparse tensor grows the indices and values: new components, written back to the argument.
    a_cpu, b_cpu = uncoalesced_coo(), sparse_input(torch.float32, (3, 4), seed=5).to_sparse()
    a, b = a_cpu.to(DEVICE), b_cpu.to(DEVICE)
    assert a.add_(b) is a
    assert_sparse_same(a, a_cpu.add_(b_cpu))
    assert a._values().device == a.device


def test_out_argument():
    a_cpu, b_cpu = uncoalesced_coo(), sparse_input(torch.float32, (3, 4), seed=5).to_sparse()
    out_cpu = torch.empty(0, layout=torch.sparse_coo)
    out = torch.empty(0, layout=torch.sparse_coo, device=DEVICE)
    result = torch.add(a_cpu.to(DEVICE), b_cpu.to(DEVICE), out=out)
    assert result is out
    assert_sparse_same(out, torch.add(a_cpu, b_cpu, out=out_cpu))
    dense_out = torch.zeros(3, 4, device=DEVICE)
    torch.mul(dev(torch.ones(3, 4)), a_cpu.to(DEVICE).to_dense(), out=dense_out)
    assert_same(dense_out, a_cpu.to_dense())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=dtype_id)
def test_sparse_mm(dtype):
    sparse_cpu = sparse_input(dtype, (5, 6)).to_sparse()
    dense_cpu = make_cpu((6, 3), dtype, seed=4)
    sparse, dense = sparse_cpu.to(DEVICE), dev(dense_cpu)
    assert_same(torch.sparse.mm(sparse, dense), torch.sparse.mm(sparse_cpu, dense_cpu))
    assert_same(torch.mm(sparse, dense), torch.mm(sparse_cpu, dense_cpu))
    assert_same(sparse @ dense, sparse_cpu @ dense_cpu)
    other_cpu = sparse_input(dtype, (6, 4), seed=8).to_sparse()
    assert_sparse_same(torch.sparse.mm(sparse, other_cpu.to(DEVICE)), torch.sparse.mm(sparse_cpu, other_cpu))
    csr_cpu = sparse_cpu.to_sparse_csr()
    assert_same(csr_cpu.to(DEVICE) @ dense, csr_cpu @ dense_cpu)
    bias_cpu = make_cpu((5, 3), dtype, seed=9)
    assert_same(
        torch.addmm(dev(bias_cpu), sparse, dense, beta=0.5, alpha=2),
        torch.addmm(bias_cpu, sparse_cpu, dense_cpu, beta=0.5, alpha=2),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=dtype_id)
def test_sampled_addmm(dtype):
    mask_cpu = sparse_input(dtype, (4, 5)).to_sparse_csr()
    m1_cpu, m2_cpu = make_cpu((4, 3), dtype, seed=1), make_cpu((3, 5), dtype, seed=2)
    expected = torch.sparse.sampled_addmm(mask_cpu, m1_cpu, m2_cpu, beta=0.5, alpha=2)
    actual = torch.sparse.sampled_addmm(mask_cpu.to(DEVICE), dev(m1_cpu), dev(m2_cpu), beta=0.5, alpha=2)
    assert_sparse_same(actual, expected)
    out = torch.empty_like(mask_cpu).to(DEVICE)
    result = torch.sparse.sampled_addmm(mask_cpu.to(DEVICE), dev(m1_cpu), dev(m2_cpu), out=out)
    assert result is out
    assert_sparse_same(out, torch.sparse.sampled_addmm(mask_cpu, m1_cpu, m2_cpu))


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin", "prod"])
def test_sparse_mm_reduce(reduce):
    csr_cpu = sparse_input(torch.float32, (4, 5)).to_sparse_csr()
    dense_cpu = make_cpu((5, 3), torch.float32, seed=4)
    check_same(lambda c, d: torch.sparse.mm(c, d, reduce), csr_cpu, dense_cpu)  # prod: the CPU's error


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr], ids=layout_id)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bfloat16], ids=dtype_id)
def test_sum(layout, dtype):
    cpu = sparse_input(dtype, (4, 6)).to_sparse(layout=layout)
    check_same(lambda x: x.sum(), cpu)
    check_same(lambda x: x.sum(dim=0), cpu)
    check_same(lambda x: torch.sparse.sum(x), cpu)
    check_same(lambda x: torch.sparse.sum(x, dim=1), cpu)


def test_structure_operators():
    cpu = uncoalesced_coo().coalesce()
    actual = cpu.to(DEVICE)
    assert_sparse_same(actual.t(), cpu.t())
    assert_sparse_same(actual.clone(), cpu.clone())
    assert_sparse_same(actual.unsqueeze(0), cpu.unsqueeze(0))
    assert_sparse_same(actual.permute(1, 0), cpu.permute(1, 0))
    assert_sparse_same(torch.cat([actual, actual]), torch.cat([cpu, cpu]))
    assert_sparse_same(actual.index_select(1, dev(torch.tensor([3, 0]))), cpu.index_select(1, torch.tensor([3, 0])))
    assert_sparse_same(actual.double(), cpu.double())
    assert_sparse_same(torch.sparse.softmax(actual, 1), torch.sparse.softmax(cpu, 1))
    assert_sparse_same(
        torch.zeros(3, 4, layout=torch.sparse_coo, device=DEVICE), torch.zeros(3, 4, layout=torch.sparse_coo)
    )
    target = torch.zeros(3, 4).to_sparse().to(DEVICE)
    assert target.copy_(actual) is target
    assert_sparse_same(target, cpu)
    csr_cpu = sparse_input().to_sparse_csr()
    csr = csr_cpu.to(DEVICE)
    assert_sparse_same(csr.clone(), csr_cpu.clone())
    assert_sparse_same(csr.select(0, 1), csr_cpu.select(0, 1))
    target = (csr_cpu * 0).to(DEVICE)  # copy_ between compressed tensors needs equal nnz
    assert target.copy_(csr) is target
    assert_sparse_same(target, csr_cpu)
    zero = csr.clone().zero_()
    assert_sparse_same(zero, csr_cpu.clone().zero_())


def test_random_operator_uses_device_generator():
    csr_cpu = sparse_input().to_sparse_csr()
    torch.manual_seed(11)
    expected = csr_cpu.clone().normal_()
    torch.openreg.manual_seed(11)  # the CPU generator has moved on: only the device's gives `expected` again
    cpu_state = torch.get_rng_state()
    actual = csr_cpu.to(DEVICE).normal_()
    assert_sparse_same(actual, expected)
    assert torch.equal(torch.get_rng_state(), cpu_state)


# --------------------------------------------------------------------------
# Autograd
# --------------------------------------------------------------------------


@pytest.mark.parametrize("layout", [torch.sparse_coo] + COMPRESSED, ids=layout_id)
def test_autograd_through_to_sparse_and_to_dense(layout):
    x_cpu = sparse_input(torch.float64, (4, 6)).requires_grad_()
    x = dev(x_cpu.detach()).requires_grad_()
    weight_cpu = make_cpu((4, 6), torch.float64, seed=3)
    kwargs = to_sparse_kwargs(layout)
    (x_cpu.to_sparse(**kwargs).to_dense() * weight_cpu).sum().backward()
    (x.to_sparse(**kwargs).to_dense() * dev(weight_cpu)).sum().backward()
    assert_same(x.grad, x_cpu.grad)


def test_autograd_sparse_mm():
    s_cpu = sparse_input(torch.float64, (4, 5)).to_sparse().requires_grad_()
    d_cpu = make_cpu((5, 3), torch.float64, seed=2).requires_grad_()
    s = s_cpu.detach().to(DEVICE).requires_grad_()
    d = dev(d_cpu.detach()).requires_grad_()
    torch.sparse.mm(s_cpu, d_cpu).pow(2).sum().backward()
    torch.sparse.mm(s, d).pow(2).sum().backward()
    assert_same(d.grad, d_cpu.grad)
    assert_sparse_same(s.grad, s_cpu.grad)


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
def test_autograd_sparse_mm_reduce(reduce):
    csr_cpu = sparse_input(torch.float64, (4, 5)).to_sparse_csr().requires_grad_()
    d_cpu = make_cpu((5, 3), torch.float64, seed=2).requires_grad_()
    csr = csr_cpu.detach().to(DEVICE).requires_grad_()
    d = dev(d_cpu.detach()).requires_grad_()
    torch.sparse.mm(csr_cpu, d_cpu, reduce).sum().backward()
    torch.sparse.mm(csr, d, reduce).sum().backward()
    assert_same(d.grad, d_cpu.grad)
    assert_sparse_same(csr.grad, csr_cpu.grad)


def test_sparse_embedding_gradient():
    weight_cpu = make_cpu((6, 3), torch.float32).requires_grad_()
    weight = dev(weight_cpu.detach()).requires_grad_()
    indices = torch.tensor([4, 1, 4, 0])
    torch.nn.functional.embedding(indices, weight_cpu, sparse=True).pow(2).sum().backward()
    torch.nn.functional.embedding(dev(indices), weight, sparse=True).pow(2).sum().backward()
    assert_sparse_same(weight.grad, weight_cpu.grad)
    torch.optim.SparseAdam([weight_cpu]).step()
    torch.optim.SparseAdam([weight]).step()
    assert_same(weight.detach(), weight_cpu.detach())


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


def test_mixed_devices_raise_the_same_device_error():
    sparse_cpu = sparse_input().to_sparse()
    dense = dev(make_cpu((6, 3)))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.sparse.mm(sparse_cpu, dense)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.sparse.mm(sparse_cpu.to(DEVICE), dense.cpu())
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        sparse_cpu.to(DEVICE) + sparse_cpu
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        sparse_cpu.to_sparse_csr().to(DEVICE) @ make_cpu((6, 3))
    # nothing is left broken
    assert_same(torch.sparse.mm(sparse_cpu.to(DEVICE), dense), torch.sparse.mm(sparse_cpu, dense.cpu()))


def test_a_cpu_scalar_tensor_is_no_output_for_a_sparse_operator():
    # As CUDA: a 0-dim CPU tensor may be read as a scalar, never written.
    sparse = sparse_input().to_sparse().to(DEVICE)
    dense = dev(make_cpu((6, 3)))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.mm(sparse, dense, out=torch.empty(()))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.addmm(dense.new_zeros(sparse.shape[0], 3), sparse, dense, out=torch.empty(()))


@pytest.mark.parametrize(
    "case",
    [
        ("sparse + dense", lambda s, c, d: s + d),
        ("csr @ csr into addmm", lambda s, c, d: torch.addmm(c, c, d)),
        ("mm reduce with an unknown reduction", lambda s, c, d: torch.sparse.mm(c, d, "median")),
        ("mm reduce of a COO tensor", lambda s, c, d: torch.sparse.mm(s, d, "sum")),
        ("to_sparse with a bad blocksize", lambda s, c, d: d.to_sparse_bsr((4, 4))),
        ("coo indices of a compressed tensor", lambda s, c, d: c.indices()),
        ("no SparseCPU kernel", lambda s, c, d: torch.cumsum(s, 0)),
        ("no SparseCsrCPU kernel", lambda s, c, d: torch.cumsum(c, 0)),
        (
            "invalid COO invariants",
            lambda s, c, d: torch.sparse_coo_tensor(
                torch.tensor([[0, 5]], device=d.device), torch.ones(2, device=d.device), (3,), check_invariants=True
            ),
        ),
    ],
    ids=lambda case: case[0],
)
def test_cpu_errors_are_kept(case):
    _, fn = case
    s = sparse_input(torch.float32, (6, 6)).to_sparse()
    assert check_same(fn, s, s.to_sparse_csr(), make_cpu((6, 6))) is None, "the CPU was expected to raise"
    # the device still works
    assert_same(dev(torch.ones(2)) + 1, torch.ones(2) + 1)


def test_pinning_is_refused():
    sparse = sparse_input().to_sparse().to(DEVICE)
    assert not sparse.is_pinned()
    with pytest.raises(RuntimeError, match="only dense CPU tensors can be pinned"):
        sparse.pin_memory()


# --------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------


def test_no_cpu_sparse_kernel_is_shadowed_by_a_composite():
    """Every operator the CPU serves with a sparse kernel reaches an openreg kernel or the sparse fallback.

    For a sparse key without a kernel of its own, the dispatcher prefers a CompositeExplicitAutograd (and, for
    SparseCsr keys, a generated CompositeExplicitAutogradNonFunctional) kernel over the backend fallback; those are
    written for strided tensors. The sparse fallback registers the operators concerned; this catches a PyTorch update
    that adds one. is_pinned and _pin_memory keep their composites (every non-CPU tensor is unpinnable).
    """
    shadowed = []
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::") or name in ("aten::is_pinned", "aten::_pin_memory"):
            continue
        for cpu_key, key in (("SparseCPU", "SparsePrivateUse1"), ("SparseCsrCPU", "SparseCsrPrivateUse1")):
            if not torch._C._dispatch_has_kernel_for_dispatch_key(name, cpu_key):
                continue
            entry = next(
                line for line in torch._C._dispatch_dump_table(name).splitlines() if line.startswith(key + ":")
            )
            # A kernel registered for the key itself, or the backend fallback; a composite reads
            # "[default backend kernel]" or "[math kernel]".
            if not entry.endswith(("[kernel]", "[backend fallback]")):
                shadowed.append(f"{name} ({key}): {entry}")
    assert not shadowed, "\n".join(shadowed)


def test_fallback_is_counted():
    sparse = sparse_input().to_sparse().to(DEVICE)
    torch.openreg.reset_fallback_stats()
    sparse * sparse
    assert torch.openreg.fallback_stats().get("aten::mul.Tensor") == 1


@pytest.mark.slow
def test_strict_mode_refuses_sparse_fallback():
    from conftest import check_ok, run_python

    out = check_ok(
        run_python(
            """
        import warnings, torch
        warnings.simplefilter("ignore")
        s = torch.ones(2, 2).to_sparse().to("openreg")   # structural: openreg kernels
        print("nnz", s._nnz())
        try:
            s * s
        except NotImplementedError as error:
            print("refused", "aten::mul.Tensor" in str(error))
        """,
            OPENREG_FALLBACK="0",
        )
    )
    assert "nnz 4" in out and "refused True" in out


def test_no_warnings_beyond_the_cpus():
    cpu = uncoalesced_coo()
    with warnings.catch_warnings(record=True) as cpu_warnings:
        warnings.simplefilter("always")
        torch.sparse.mm(cpu.coalesce(), torch.ones(4, 2))
    with warnings.catch_warnings(record=True) as device_warnings:
        warnings.simplefilter("always")
        torch.sparse.mm(cpu.to(DEVICE).coalesce(), torch.ones(4, 2, device=DEVICE))
    assert [str(w.message) for w in device_warnings] == [str(w.message) for w in cpu_warnings]


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr, torch.sparse_bsc], ids=layout_id)
def test_save_load_and_deepcopy(layout):
    import copy
    import io

    cpu = sparse_input(torch.float32, (4, 6)).to_sparse(**to_sparse_kwargs(layout))
    buffer = io.BytesIO()
    torch.save(cpu.to(DEVICE), buffer)
    buffer.seek(0)
    assert_sparse_same(torch.load(buffer), cpu)
    assert_sparse_same(copy.deepcopy(cpu.to(DEVICE)), cpu)


def test_hybrid_and_autograd_of_sum():
    dense = sparse_input(torch.float64, (3, 4, 2))
    hybrid = dense.to_sparse(2)
    check_same(lambda x: x * x, hybrid)
    check_same(lambda x: torch.sparse.sum(x, dim=0), hybrid)
    check_same(lambda x, d: torch.sparse.mm(torch.sparse.sum(x, dim=2), d), hybrid, make_cpu((4, 3), torch.float64))
    x_cpu = hybrid.clone().requires_grad_()
    x = hybrid.to(DEVICE).requires_grad_()
    torch.sparse.sum(x_cpu, dim=1).to_dense().pow(2).sum().backward()
    torch.sparse.sum(x, dim=1).to_dense().pow(2).sum().backward()
    assert_sparse_same(x.grad, x_cpu.grad)


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr], ids=layout_id)
def test_structure_operators_run_on_the_tensors_device(layout):
    # The device-generic structure kernels allocate components on their argument's device, not the current one;
    # copy_ takes a source on the CPU, as on CUDA.
    dense = sparse_input(torch.float32, (4, 6))
    convert = (lambda t: t.to_sparse()) if layout == torch.sparse_coo else (lambda t: t.to_sparse_csr())
    expected = convert(dense)
    on_1 = convert(dense.to("openreg:1"))
    with torch.openreg.device(0):
        results = [on_1.clone(), torch.empty_like(on_1), on_1.clone().zero_(), on_1.clone().copy_(expected)]
    for result in results:
        assert result.device == torch.device("openreg:1")
        assert result.values().device == torch.device("openreg:1")
    assert_sparse_same(results[0], expected)
    assert_sparse_same(results[3], expected)
    assert_sparse_same(results[2], convert(torch.zeros(4, 6)))
    into_cpu = convert(2 * dense).copy_(on_1)  # same pattern: compressed copies need equal nnz
    assert into_cpu.device.type == "cpu"
    assert torch.equal(into_cpu.to_dense(), dense)
