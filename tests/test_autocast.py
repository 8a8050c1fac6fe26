"""torch.autocast("openreg") follows CUDA's operator policy.

The lists are the AT_FORALL_* macros of the installed torch's
ATen/autocast_mode.h (CUDA's lists). For a few representative operators of each
list, the output dtype is the policy's and the values equal the CPU computing
the same casts explicitly (not CPU autocast: its lists differ).

``python tests/test_autocast.py`` prints the policy table of docs/amp.md from
the header; a test checks that the table is current.
"""

import os
import re
import warnings

import pytest
import torch
import torch.nn.functional as F

from conftest import DEVICE, assert_same, dtype_id, make_cpu

LOW_DTYPES = [torch.float16, torch.bfloat16]
DOCS = os.path.join(os.path.dirname(__file__), "..", "docs", "amp.md")

# ---------------------------------------------------------------------------
# The lists, read from the header the C++ registration expands.

POLICIES = {
    "AT_FORALL_LOWER_PRECISION_FP": "lower_precision_fp",
    "AT_FORALL_FP32": "fp32",
    "AT_FORALL_FP32_SET_OPT_DTYPE": "fp32_set_opt_dtype",
    "AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE": "fp32_append_dtype",
    "AT_FORALL_PROMOTE": "promote",
}


def header_lists():
    """{policy: [operator names with overload]} from ATen/autocast_mode.h."""
    path = os.path.join(os.path.dirname(torch.__file__), "include", "ATen", "autocast_mode.h")
    with open(path) as f:
        text = f.read()
    lists = {}
    for macro, policy in POLICIES.items():
        match = re.search(r"#define " + macro + r"\(_\)((?:[^\n]*\\\n)*[^\n]*)", text)
        assert match, macro
        body = match.group(1)
        if policy == "fp32_append_dtype":
            names = re.findall(r'"([\w.]+)"', body)
        else:
            names = [
                op + ("." + overload if overload else "")
                for op, overload in re.findall(r"_\((\w+)(?:,\s*(\w+))?\)", body)
            ]
        assert names, macro
        lists[policy] = names
    return lists


def policy_table_markdown():
    rows = ["| policy | operators |", "|---|---|"]
    for policy, names in header_lists().items():
        rows.append(f"| `{policy}` | " + ", ".join(f"`{n}`" for n in names) + " |")
    return "\n".join(rows)


def test_every_listed_operator_has_an_autocast_kernel():
    for policy, names in header_lists().items():
        for name in names:
            assert torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "AutocastPrivateUse1"), (
                policy,
                name,
            )


def test_operators_outside_the_lists_fall_through():
    for name in ["relu", "add.Tensor", "cat", "sin"]:
        assert not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "AutocastPrivateUse1"), name


def test_docs_table_matches_the_header():
    with open(DOCS) as f:
        docs = f.read()
    assert policy_table_markdown() in docs, "regenerate the table with: python tests/test_autocast.py"


# ---------------------------------------------------------------------------
# Representative operators: (name, function, CPU input tensors).


def _inputs(*shapes, dtype=torch.float32, low=None, high=None):
    return [make_cpu(s, dtype, seed=i, low=low, high=high) for i, s in enumerate(shapes)]


LOWER_PRECISION_CASES = [
    ("mm", torch.mm, lambda: _inputs((4, 5), (5, 3))),
    ("mv", torch.mv, lambda: _inputs((4, 5), (5,))),
    ("matmul", torch.matmul, lambda: _inputs((2, 4, 5), (5, 3))),
    ("addmm", torch.addmm, lambda: _inputs((4, 3), (4, 5), (5, 3))),
    ("bmm", torch.bmm, lambda: _inputs((2, 3, 4), (2, 4, 5))),
    ("baddbmm", torch.baddbmm, lambda: _inputs((2, 3, 5), (2, 3, 4), (2, 4, 5))),
    ("linear", F.linear, lambda: _inputs((2, 5), (3, 5), (3,))),
    ("conv2d", F.conv2d, lambda: _inputs((1, 2, 5, 5), (3, 2, 3, 3), (3,))),
    ("prelu", F.prelu, lambda: _inputs((2, 3, 4), (3,))),
    ("einsum", lambda a, b: torch.einsum("ij,jk->ik", a, b), lambda: _inputs((4, 5), (5, 3))),
]

FP32_CASES = [
    ("exp", torch.exp, lambda: _inputs((4, 5))),
    ("log", torch.log, lambda: _inputs((4, 5), low=0.5, high=3.0)),
    ("acos", torch.acos, lambda: _inputs((4, 5), low=-0.9, high=0.9)),
    ("pow.Tensor_Scalar", lambda x: torch.pow(x, 3), lambda: _inputs((4, 5))),
    ("softplus", F.softplus, lambda: _inputs((4, 5))),
    ("layer_norm", lambda x, w, b: F.layer_norm(x, (5,), w, b), lambda: _inputs((4, 5), (5,), (5,))),
    ("mse_loss", F.mse_loss, lambda: _inputs((4, 5), (4, 5))),
    ("cdist", torch.cdist, lambda: _inputs((4, 5), (3, 5))),
    ("logsumexp", lambda x: torch.logsumexp(x, 1), lambda: _inputs((4, 5))),
    ("upsample_nearest2d", lambda x: F.interpolate(x, scale_factor=2.0), lambda: _inputs((1, 2, 3, 3))),
]

# fp32_set_opt_dtype: the explicit form passes dtype=float32.
SET_OPT_DTYPE_CASES = [
    ("softmax.int", lambda x, **kw: torch.softmax(x, 1, **kw), lambda: _inputs((4, 5))),
    ("log_softmax.int", lambda x, **kw: torch.log_softmax(x, 1, **kw), lambda: _inputs((4, 5))),
    ("cumsum", lambda x, **kw: torch.cumsum(x, 1, **kw), lambda: _inputs((4, 5))),
    ("sum", lambda x, **kw: torch.sum(x, **kw), lambda: _inputs((4, 5))),
    ("sum.dim_IntList", lambda x, **kw: torch.sum(x, 0, **kw), lambda: _inputs((4, 5))),
    ("prod", lambda x, **kw: torch.prod(x, **kw), lambda: _inputs((2, 3))),
    ("linalg_vector_norm", lambda x, **kw: torch.linalg.vector_norm(x, **kw), lambda: _inputs((4, 5))),
]

PROMOTE_CASES = [
    ("addcmul", torch.addcmul, lambda: _inputs((4, 5), (4, 5), (4, 5))),
    ("addcdiv", torch.addcdiv, lambda: _inputs((4, 5), (4, 5), (4, 5), low=0.5, high=2.0)),
    ("atan2", torch.atan2, lambda: _inputs((4, 5), (4, 5))),
    ("dot", torch.dot, lambda: _inputs((5,), (5,))),
    ("cross", lambda a, b: torch.cross(a, b, dim=1), lambda: _inputs((4, 3), (4, 3))),
]


def _run_on_openreg(fn, cpu_args, autocast_dtype, **kwargs):
    args = [a.to(DEVICE) for a in cpu_args]
    with torch.autocast(DEVICE, dtype=autocast_dtype):
        return fn(*args, **kwargs)


@pytest.mark.parametrize("dtype", LOW_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("name,fn,make", LOWER_PRECISION_CASES, ids=[c[0] for c in LOWER_PRECISION_CASES])
def test_lower_precision_list(name, fn, make, dtype):
    args = make()
    out = _run_on_openreg(fn, args, dtype)
    assert out.dtype == dtype
    assert_same(out, fn(*[a.to(dtype) for a in args]), check_stride=False)


@pytest.mark.parametrize("dtype", LOW_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("name,fn,make", FP32_CASES, ids=[c[0] for c in FP32_CASES])
def test_fp32_list(name, fn, make, dtype):
    # Lower-precision inputs (what a preceding matmul produced) run in float32.
    args = [a.to(dtype) for a in make()]
    out = _run_on_openreg(fn, args, dtype)
    assert out.dtype == torch.float32
    assert_same(out, fn(*[a.float() for a in args]), check_stride=False)


@pytest.mark.parametrize("dtype", LOW_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("name,fn,make", SET_OPT_DTYPE_CASES, ids=[c[0] for c in SET_OPT_DTYPE_CASES])
def test_fp32_set_opt_dtype_list(name, fn, make, dtype):
    args = [a.to(dtype) for a in make()]
    out = _run_on_openreg(fn, args, dtype)
    assert out.dtype == torch.float32
    assert_same(out, fn(*args, dtype=torch.float32), check_stride=False)
    # A dtype the caller gives explicitly is kept.
    out = _run_on_openreg(fn, args, dtype, dtype=torch.float64)
    assert_same(out, fn(*args, dtype=torch.float64), check_stride=False)


@pytest.mark.parametrize("dtype", LOW_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("name,fn,make", PROMOTE_CASES, ids=[c[0] for c in PROMOTE_CASES])
def test_promote_list(name, fn, make, dtype):
    args = make()
    # All lower precision: stays lower precision.
    low = [a.to(dtype) for a in args]
    out = _run_on_openreg(fn, low, dtype)
    assert out.dtype == dtype
    assert_same(out, fn(*low), check_stride=False)
    # One float32 argument among lower-precision ones: everything runs in float32.
    mixed = [args[0]] + low[1:]
    out = _run_on_openreg(fn, mixed, dtype)
    assert out.dtype == torch.float32
    assert_same(out, fn(*[a.float() for a in mixed]), check_stride=False)


@pytest.mark.parametrize("dtype", LOW_DTYPES, ids=dtype_id)
def test_norm_appends_a_float32_dtype(dtype):
    x = make_cpu((4, 5), dtype)
    out = _run_on_openreg(torch.ops.aten.norm.Scalar, [x], dtype, p=2)
    assert_same(out, torch.ops.aten.norm.ScalarOpt_dtype(x, 2, dtype=torch.float32))
    out = _run_on_openreg(lambda t: torch.ops.aten.norm.ScalarOpt_dim(t, 2, [1], False), [x], dtype)
    assert_same(out, torch.ops.aten.norm.ScalarOpt_dim_dtype(x, 2, [1], False, dtype=torch.float32))


@pytest.mark.parametrize("dtype", LOW_DTYPES, ids=dtype_id)
def test_operators_outside_the_lists_keep_their_dtypes(dtype):
    a, b = make_cpu((4, 5)), make_cpu((4, 5), seed=1)
    low = a.to(dtype)
    assert _run_on_openreg(torch.relu, [low], dtype).dtype == dtype
    assert _run_on_openreg(torch.relu, [a], dtype).dtype == torch.float32
    out = _run_on_openreg(torch.add, [low, b], dtype)
    assert_same(out, torch.add(low, b))
    out = _run_on_openreg(lambda x, y: torch.cat([x, y]), [low, b], dtype)
    assert_same(out, torch.cat([low, b]))


def test_lists_are_cudas_not_the_cpus():
    """exp is fp32 and mv lower precision on CUDA; CPU autocast lists neither."""
    x = make_cpu((4, 5), torch.bfloat16)
    m, v = make_cpu((4, 5)), make_cpu((5,), seed=1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.exp(x).dtype == torch.bfloat16
        assert torch.mv(m, v).dtype == torch.float32
    assert _run_on_openreg(torch.exp, [x], torch.bfloat16).dtype == torch.float32
    assert _run_on_openreg(torch.mv, [m, v], torch.bfloat16).dtype == torch.bfloat16


def test_binary_cross_entropy_is_banned_as_on_cuda():
    p, t = make_cpu((4,), low=0.1, high=0.9), make_cpu((4,), seed=1, low=0.0, high=1.0)
    with pytest.raises(RuntimeError, match="binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast"):
        _run_on_openreg(F.binary_cross_entropy, [p, t], torch.float16)
    # Outside autocast it runs.
    assert_same(F.binary_cross_entropy(p.to(DEVICE), t.to(DEVICE)), F.binary_cross_entropy(p, t))


def test_cpu_tensors_are_not_cast_by_openreg_autocast():
    a, b = make_cpu((4, 5)), make_cpu((5, 3), seed=1)
    with torch.autocast(DEVICE, dtype=torch.float16):
        assert torch.mm(a, b).dtype == torch.float32


def test_default_dtype_is_float16_as_on_cuda():
    with torch.autocast(DEVICE):
        assert torch.get_autocast_dtype(DEVICE) == torch.float16
        assert torch.is_autocast_enabled(DEVICE)
    assert not torch.is_autocast_enabled(DEVICE)


# ---------------------------------------------------------------------------
# Context behaviour.


def test_nested_and_disabled_regions():
    a, b = make_cpu((4, 5)).to(DEVICE), make_cpu((5, 3), seed=1).to(DEVICE)
    with torch.autocast(DEVICE, dtype=torch.float16):
        assert torch.mm(a, b).dtype == torch.float16
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            assert torch.mm(a, b).dtype == torch.bfloat16
            with torch.autocast(DEVICE, enabled=False):
                assert torch.mm(a, b).dtype == torch.float32
            assert torch.mm(a, b).dtype == torch.bfloat16
        assert torch.mm(a, b).dtype == torch.float16
    assert torch.mm(a, b).dtype == torch.float32


def test_as_a_decorator():
    @torch.autocast(DEVICE, dtype=torch.bfloat16)
    def f(x, y):
        return x @ y

    a, b = make_cpu((4, 5)), make_cpu((5, 3), seed=1)
    assert_same(f(a.to(DEVICE), b.to(DEVICE)), a.bfloat16() @ b.bfloat16())


def _weight_and_input():
    w = make_cpu((5, 3)).to(DEVICE).requires_grad_()
    x = make_cpu((4, 5), seed=1).to(DEVICE)
    return w, x


def test_weight_cast_is_cached_inside_a_region_and_dropped_on_exit():
    # The cache holds the float16 copy of a float32 leaf that requires grad:
    # an in-place update of the weight inside the region is not seen by the
    # next matmul (that is the cache's contract), and is seen after the exit.
    w, x = _weight_and_input()
    with torch.autocast(DEVICE, dtype=torch.float16):
        assert torch.is_autocast_cache_enabled()
        first = x @ w
        with torch.no_grad():
            w.mul_(2)
        assert torch.equal((x @ w).cpu(), first.cpu())
    with torch.autocast(DEVICE, dtype=torch.float16):
        again = x @ w
    expected = x.cpu().half() @ w.detach().cpu().half()
    assert_same(again, expected)
    assert not torch.equal(again.cpu(), first.cpu())


def test_cache_disabled_casts_every_time():
    w, x = _weight_and_input()
    with torch.autocast(DEVICE, dtype=torch.float16, cache_enabled=False):
        assert not torch.is_autocast_cache_enabled()
        x @ w
        with torch.no_grad():
            w.mul_(2)
        out = x @ w
    assert torch.is_autocast_cache_enabled()
    assert_same(out, x.cpu().half() @ w.detach().cpu().half())


def test_gradients_flow_back_in_float32():
    w, x = _weight_and_input()
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        out = (x @ w).float().sum()
    out.backward()
    wc = w.detach().cpu().requires_grad_()
    (x.cpu().bfloat16() @ wc.bfloat16()).float().sum().backward()
    assert w.grad.dtype == torch.float32
    assert_same(w.grad, wc.grad)


@pytest.mark.slow
def test_inside_torch_compile_aot_eager():
    def f(x, w):
        return torch.softmax(x @ w, dim=1)

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    w, x = _weight_and_input()
    with torch.autocast(DEVICE, dtype=torch.float16):
        out = compiled(x, w)
    expected = torch.softmax(x.cpu().half() @ w.detach().cpu().half(), dim=1, dtype=torch.float32)
    assert_same(out, expected, check_stride=False)
    out.sum().backward()
    assert w.grad.dtype == torch.float32


# ---------------------------------------------------------------------------
# Device module and torch.openreg.amp.


def test_supported_dtypes():
    assert torch.openreg.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    assert torch.openreg.is_bf16_supported()
    assert torch.amp.is_autocast_available(DEVICE)
    assert not torch.openreg.amp.amp_definitely_not_available()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=dtype_id)
def test_unsupported_dtype_warns_and_disables_autocast(dtype):
    a, b = make_cpu((4, 5)).to(DEVICE), make_cpu((5, 3), seed=1).to(DEVICE)
    with pytest.warns(UserWarning, match="In openreg autocast, but the target dtype is not supported"):
        region = torch.autocast(DEVICE, dtype=dtype)
    with region:
        assert not torch.is_autocast_enabled(DEVICE)
        assert torch.mm(a, b).dtype == torch.float32


def test_deprecated_openreg_amp_autocast():
    a, b = make_cpu((4, 5)), make_cpu((5, 3), seed=1)
    with pytest.warns(FutureWarning, match=r"torch.amp.autocast\('openreg'"):
        region = torch.openreg.amp.autocast(dtype=torch.bfloat16)
    with region:
        out = a.to(DEVICE) @ b.to(DEVICE)
    assert_same(out, a.bfloat16() @ b.bfloat16())


def test_custom_fwd_casts_inputs_and_disables_autocast_inside():
    seen = {}

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)

        class Scale(torch.autograd.Function):
            @staticmethod
            @torch.openreg.amp.custom_fwd(cast_inputs=torch.float32)
            def forward(ctx, x):
                seen["dtype"] = x.dtype
                seen["autocast"] = torch.is_autocast_enabled(DEVICE)
                return x * 2

            @staticmethod
            @torch.openreg.amp.custom_bwd
            def backward(ctx, grad):
                seen["backward_autocast"] = torch.is_autocast_enabled(DEVICE)
                return grad * 2

    x = make_cpu((3,), torch.float16).to(DEVICE).requires_grad_()
    with torch.autocast(DEVICE, dtype=torch.float16):
        out = Scale.apply(x)
    out.sum().backward()
    assert seen == {"dtype": torch.float32, "autocast": False, "backward_autocast": False}
    assert out.dtype == torch.float32
    assert_same(x.grad, torch.full((3,), 2.0, dtype=torch.float16))


if __name__ == "__main__":
    print(policy_table_markdown())
