"""Where CUDA and the CPU disagree, openreg answers as CUDA (docs/cuda-contract.md): dtypes CUDA's kernels lack,
operators CUDA lacks, determinism alerts, uninitialized memory and graph-capture rules. Each class: the bug raises
on openreg as on CUDA, correct code passes (equal to the CPU), and ``torch.openreg.cuda_contract.disable()`` (or
``OPENREG_CUDA_CONTRACT=0``) restores the CPU's answer."""

import json
import math
import re
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.testing._internal.common_utils import DeterministicGuard

from conftest import DEVICE, assert_same, make_cpu, run_python

contract = torch.openreg.cuda_contract


def grad_of(module_or_fn, x_cpu, device):
    """The input's gradient of ``fn(x).sum()`` on ``device``."""
    x = x_cpu.detach().to(device).requires_grad_()
    module_or_fn(x).sum().backward()
    return x.grad


# ---- determinism: the operators whose CUDA kernels alert -------------------------------------------------------------

x4 = make_cpu((1, 2, 6, 6), seed=1)
x5 = make_cpu((1, 2, 4, 4, 4), seed=2)
x3 = make_cpu((1, 2, 8), seed=3)

# (case id, the calls in deterministic mode, the caller CUDA's kernel names). Each runs its forward on openreg
# outside deterministic mode where the alert is in a backward (as torch's own tests of CUDA do), then the part
# that alerts inside.
ALERTING = [
    ("avg_pool3d_backward", lambda d: grad_of(torch.nn.AvgPool3d(2), x5, d), "avg_pool3d_backward_cuda"),
    (
        "adaptive_avg_pool2d_backward",
        lambda d: grad_of(torch.nn.AdaptiveAvgPool2d(3), x4, d),
        "adaptive_avg_pool2d_backward_cuda",
    ),
    (
        "adaptive_avg_pool3d_backward",
        lambda d: grad_of(torch.nn.AdaptiveAvgPool3d(3), x5, d),
        "adaptive_avg_pool3d_backward_cuda",
    ),
    (
        "adaptive_max_pool2d_backward",
        lambda d: grad_of(torch.nn.AdaptiveMaxPool2d(3), x4, d),
        "adaptive_max_pool2d_backward_cuda",
    ),
    (
        "fractional_max_pool2d_backward",
        lambda d: grad_of(
            lambda x: F.fractional_max_pool2d(
                x, 2, output_size=3, _random_samples=torch.full((1, 2, 2), 0.5, device=d)
            ),
            x4,
            d,
        ),
        "fractional_max_pool2d_backward_cuda",
    ),
    (
        "fractional_max_pool3d_backward",
        lambda d: grad_of(
            lambda x: F.fractional_max_pool3d(
                x, 2, output_size=2, _random_samples=torch.full((1, 2, 3), 0.5, device=d)
            ),
            x5,
            d,
        ),
        "fractional_max_pool3d_backward_cuda",
    ),
    (
        "upsample_linear1d_backward",
        lambda d: grad_of(lambda x: F.interpolate(x, scale_factor=2, mode="linear"), x3, d),
        "upsample_linear1d_backward_out_cuda",
    ),
    (
        "reflection_pad1d_backward",
        lambda d: grad_of(torch.nn.ReflectionPad1d(2), x3, d),
        "reflection_pad1d_backward_out_cuda",
    ),
    (
        "reflection_pad2d_backward",
        lambda d: grad_of(torch.nn.ReflectionPad2d(2), x4, d),
        "reflection_pad2d_backward_cuda",
    ),
    (
        "reflection_pad3d_backward",
        lambda d: grad_of(torch.nn.ReflectionPad3d(1), x5, d),
        "reflection_pad3d_backward_out_cuda",
    ),
    (
        "nll_loss2d_forward",
        lambda d: F.cross_entropy(x4.to(d), torch.zeros(1, 6, 6, dtype=torch.long, device=d)),
        "nll_loss2d_forward_out_cuda_template",
    ),
    (
        "ctc_loss_backward",
        lambda d: grad_of(
            lambda x: F.ctc_loss(x.log_softmax(2), torch.ones(1, 2, dtype=torch.long, device=d), [6], [2]),
            make_cpu((6, 1, 4), seed=4),
            d,
        ),
        "ctc_loss_backward_gpu",
    ),
    (
        "embedding_bag_max_backward",
        lambda d: grad_of(
            lambda w: F.embedding_bag(torch.tensor([[0, 2], [1, 3]], device=d), w, mode="max"),
            make_cpu((4, 3), seed=5),
            d,
        ),
        "embedding_bag_backward_cuda_max",
    ),
    (
        "put_accumulate",
        lambda d: torch.zeros(4, device=d).put_(
            torch.tensor([1, 1], device=d), torch.ones(2, device=d), accumulate=True
        ),
        "put_",
    ),
    ("histc_float", lambda d: torch.histc(make_cpu(10, seed=6).to(d), bins=4), "_histc_cuda with floating point input"),
    (
        "bincount_weights",
        lambda d: torch.bincount(torch.tensor([0, 1, 1], device=d), weights=torch.ones(3, device=d)),
        "_bincount_cuda",
    ),
    ("median_dim", lambda d: make_cpu((3, 4), seed=7).to(d).median(dim=1), "median CUDA with indices output"),
    ("nanmedian_dim", lambda d: make_cpu((3, 4), seed=8).to(d).nanmedian(dim=1), "median CUDA with indices output"),
    (
        "grid_sample_backward",
        lambda d: grad_of(lambda x: F.grid_sample(x, torch.zeros(1, 2, 2, 2, device=d), align_corners=False), x4, d),
        "grid_sampler_2d_backward_cuda",
    ),
    (
        "scatter_reduce_prod",
        lambda d: torch.ones(3, device=d).scatter_reduce(
            0, torch.tensor([0, 0, 1], device=d), torch.full((3,), 2.0, device=d), "prod"
        ),
        "scatter_reduce_cuda_prod_",
    ),
    (
        "scatter_multiply",
        lambda d: torch.ones(3, device=d).scatter_(
            0, torch.tensor([0, 0, 1], device=d), torch.full((3,), 2.0, device=d), reduce="multiply"
        ),
        "scatter_reduce_cuda_kernel",
    ),
    (
        "index_reduce",
        lambda d: torch.ones(3, device=d).index_reduce_(
            0, torch.tensor([0, 0], device=d), torch.full((2,), 2.0, device=d), "prod"
        ),
        "index_reduce_cuda",
    ),
]
if torch.__version__ < "2.15":  # 2.15's F.interpolate reroutes bicubic as it does bilinear (deterministic backward)
    ALERTING.append(
        (
            "upsample_bicubic2d_backward",
            lambda d: grad_of(lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"), x4, d),
            "upsample_bicubic2d_backward_out_cuda",
        )
    )
if torch.__version__.startswith("2.13."):  # 2.14's docstring no longer lists cumsum: CUDA's scan became deterministic
    ALERTING.append(("cumsum_float", lambda d: make_cpu(5, seed=9).to(d).cumsum(0), "cumsum_cuda_kernel"))

# The backward cases run their forward outside deterministic mode: split them into (setup outside, alerting inside).


def _run_deterministic(fn, device, **guard):
    with DeterministicGuard(True, **guard):
        return fn(device)


@pytest.mark.parametrize("name, fn, caller", ALERTING, ids=[case[0] for case in ALERTING])
def test_nondeterministic_operator_alerts_as_on_cuda(name, fn, caller):
    with pytest.raises(RuntimeError, match=f"^{caller} does not have a deterministic implementation, but you set"):
        _run_deterministic(fn, DEVICE)
    # warn_only: a warning, and the result the CPU computes
    with pytest.warns(UserWarning, match=f"{caller} does not have a deterministic implementation"):
        result = _run_deterministic(fn, DEVICE, warn_only=True)
    expected = fn("cpu")
    for got, want in zip(torch.utils._pytree.tree_leaves(result), torch.utils._pytree.tree_leaves(expected)):
        assert_same(got, want, check_stride=False)


@pytest.mark.parametrize(
    "name, fn, caller", ALERTING[:4] + ALERTING[-3:], ids=[c[0] for c in ALERTING[:4] + ALERTING[-3:]]
)
def test_no_alert_outside_deterministic_mode_or_with_the_cpu_contract(name, fn, caller):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fn(DEVICE)
        with contract.enabled(False):
            _run_deterministic(fn, DEVICE)


# The docstring's "act deterministically" operations (CUDA runs them deterministically, through a deterministic
# kernel or a Python-level reroute that tests input.is_cuda): no alert on openreg either.
DETERMINISTIC_ON_CUDA = [
    (
        "index_add_",
        lambda d: torch.zeros(3, device=d).index_add_(0, torch.tensor([0, 0], device=d), torch.ones(2, device=d)),
    ),
    (
        "scatter_add_",
        lambda d: torch.zeros(3, device=d).scatter_add_(0, torch.tensor([0, 0], device=d), torch.ones(2, device=d)),
    ),
    (
        "index_put_accumulate",
        lambda d: torch.zeros(3, device=d).index_put_(
            (torch.tensor([0, 0], device=d),), torch.ones(2, device=d), accumulate=True
        ),
    ),
    (
        "index_copy",
        lambda d: torch.zeros(3, device=d).index_copy(0, torch.tensor([1], device=d), torch.ones(1, device=d)),
    ),
    (
        "scatter_src",
        lambda d: torch.zeros(3, device=d).scatter(0, torch.tensor([1], device=d), torch.ones(1, device=d)),
    ),
    (
        "scatter_reduce_sum",
        lambda d: torch.zeros(3, device=d).scatter_reduce(
            0, torch.tensor([0, 0], device=d), torch.ones(2, device=d), "sum"
        ),
    ),
    (
        "scatter_reduce_amax",
        lambda d: torch.zeros(3, device=d).scatter_reduce(
            0, torch.tensor([0, 0], device=d), torch.ones(2, device=d), "amax"
        ),
    ),
    (
        "gather_backward",
        lambda d: grad_of(lambda x: x.gather(1, torch.zeros(1, 2, 6, 6, dtype=torch.long, device=d)), x4, d),
    ),
    ("index_select_backward", lambda d: grad_of(lambda x: x.index_select(2, torch.tensor([0, 0], device=d)), x4, d)),
    ("getitem_backward", lambda d: grad_of(lambda x: x[:, :, torch.tensor([0, 0], device=d)], x4, d)),
    ("conv2d_backward", lambda d: grad_of(lambda x: F.conv2d(x, torch.ones(2, 2, 3, 3, device=d)), x4, d)),
    ("max_pool3d_backward", lambda d: grad_of(torch.nn.MaxPool3d(2), x5, d)),
    ("replication_pad2d_backward", lambda d: grad_of(torch.nn.ReplicationPad2d(1), x4, d)),
    ("bilinear_backward", lambda d: grad_of(lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), x4, d)),
    (
        "nll_loss_2d_input",
        lambda d: F.cross_entropy(make_cpu((3, 4), seed=10).to(d), torch.tensor([0, 1, 2], device=d)),
    ),
    (
        "nll_loss2d_no_reduction",
        lambda d: F.cross_entropy(x4.to(d), torch.zeros(1, 6, 6, dtype=torch.long, device=d), reduction="none"),
    ),
    (
        "embedding_bag_sum_backward",
        lambda d: grad_of(
            lambda w: F.embedding_bag(torch.tensor([[0, 2]], device=d), w, mode="sum"), make_cpu((4, 3), seed=5), d
        ),
    ),
    ("put_no_accumulate_is_the_cpus", None),
    ("bincount_no_weights", lambda d: torch.bincount(torch.tensor([0, 1, 1], device=d))),
    ("median_all", lambda d: make_cpu((3, 4), seed=7).to(d).median()),
    ("cumsum_int", lambda d: torch.arange(5, device=d).cumsum(0)),
]


@pytest.mark.parametrize(
    "name, fn", [c for c in DETERMINISTIC_ON_CUDA if c[1]], ids=[c[0] for c in DETERMINISTIC_ON_CUDA if c[1]]
)
def test_operations_cuda_runs_deterministically_do_not_alert(name, fn):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        result = _run_deterministic(fn, DEVICE, warn_only=True)
    expected = fn("cpu")
    for got, want in zip(torch.utils._pytree.tree_leaves(result), torch.utils._pytree.tree_leaves(expected)):
        assert_same(got, want, check_stride=False)


def test_alerts_shared_with_the_cpu_stay():
    # put_ without accumulate and max_unpool alert on every device (ATen's shared kernels), openreg included.
    with pytest.raises(RuntimeError, match="^put_ does not have a deterministic"):
        _run_deterministic(
            lambda d: torch.zeros(3, device=d).put_(torch.tensor([1], device=d), torch.ones(1, device=d)), DEVICE
        )
    out, indices = F.max_pool2d(x4.to(DEVICE), 2, return_indices=True)
    with pytest.raises(RuntimeError, match="^max_unpooling2d_forward_out does not have"):
        _run_deterministic(lambda d: F.max_unpool2d(out, indices, 2), DEVICE)


# ---- uninitialized memory: torch.utils.deterministic.fill_uninitialized_memory ---------------------------------------


def _filled(dtype):
    return math.nan if dtype.is_floating_point or dtype.is_complex else torch.iinfo(dtype).max


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.complex64, torch.int64, torch.uint8], ids=str)
def test_empty_is_filled_under_deterministic_mode_as_on_cpu(dtype):
    with DeterministicGuard(True):
        cases = {
            "empty": lambda d: torch.empty(5, dtype=dtype, device=d),
            "empty_strided": lambda d: torch.empty_strided((2, 3), (1, 2), dtype=dtype, device=d),
            "empty_like": lambda d: torch.empty_like(torch.zeros(4, dtype=dtype, device=d)),
            "new_empty": lambda d: torch.zeros(2, dtype=dtype, device=d).new_empty(6),
        }
        for name, make in cases.items():
            got, want = make(DEVICE), make("cpu")
            expected = torch.full_like(want, _filled(dtype))
            torch.testing.assert_close(want, expected, rtol=0, atol=0, equal_nan=True, msg=name)
            torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0, equal_nan=True, msg=name)


def test_resize_fills_only_the_grown_part():
    with DeterministicGuard(True):
        t = torch.arange(4.0, device=DEVICE)
        t.resize_(7)
        assert torch.equal(t.cpu()[:4], torch.arange(4.0))
        assert t.cpu()[4:].isnan().all()
        i = torch.arange(3, device=DEVICE)
        i.resize_(5)
        assert i.cpu().tolist() == [0, 1, 2, torch.iinfo(torch.int64).max, torch.iinfo(torch.int64).max]


def test_no_fill_when_the_setting_or_the_mode_is_off():
    if torch.openreg.sanitizer.is_enabled():
        pytest.skip("reads uninitialized memory on purpose, which the sanitizer reports (and poisons)")

    # Stale device memory: a freed block of ones comes back from the cache.
    def reused_empty():
        torch.ones(64, device=DEVICE)
        return torch.empty(64, device=DEVICE)

    with DeterministicGuard(True, fill_uninitialized_memory=False):
        assert not reused_empty().cpu().isnan().any()
    assert not reused_empty().cpu().isnan().any()


# ---- operators CUDA has no kernel for ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, fn",
    [
        ("histogram", lambda d: torch.histogram(torch.ones(4, device=d), bins=3)),
        (
            "histogram_bins_tensor",
            lambda d: torch.histogram(torch.ones(4, device=d), bins=torch.tensor([0.0, 1.0, 2.0], device=d)),
        ),
        ("histogramdd", lambda d: torch.histogramdd(torch.ones(4, 2, device=d), bins=[2, 2])),
    ],
)
def test_operators_cuda_lacks_raise(name, fn):
    with pytest.raises(NotImplementedError, match="with arguments from the 'openreg' backend: CUDA has no kernel"):
        fn(DEVICE)
    with contract.enabled(False):
        cpu, dev = fn("cpu"), fn(DEVICE)
    for got, want in zip(torch.utils._pytree.tree_leaves(dev), torch.utils._pytree.tree_leaves(cpu)):
        assert_same(got, want)


# ---- the table itself -------------------------------------------------------------------------------------------------


def test_every_rule_names_an_operator_of_this_torch_and_a_source():
    import yaml

    with open(contract._RULES_FILE) as f:
        table = yaml.safe_load(f)
    assert set(table) == {
        "dtype_refusals",
        "nondeterministic_alerts",
        "missing_on_cuda",
        "widened_dtypes",
        "composed_dtypes",
        "not_refused",
        "not_widened",
    }
    assert all(entry["reason"] for entry in table.pop("not_refused") + table.pop("not_widened"))
    for kind, entries in table.items():
        for entry in entries:
            assert entry.get("source"), entry
            for op in entry["operators"]:
                name, _, overload = op.partition(".")
                if kind == "nondeterministic_alerts" and "releases" in entry:
                    continue
                assert torch._C._dispatch_find_schema_or_throw(name, overload), op
    assert len(contract.rules()) >= 40


def test_the_option_restores_the_cpus_answer_in_a_fresh_process():
    result = run_python(
        """
        import torch
        from torch.testing._internal.common_utils import DeterministicGuard
        assert not torch.openreg.cuda_contract.is_enabled()
        print(torch.histogram(torch.ones(4, device="openreg"), bins=2).hist.cpu().tolist())
        with DeterministicGuard(True):
            torch.bincount(torch.tensor([0, 1], device="openreg"), weights=torch.ones(2, device="openreg"))
        print("ok")
        """,
        OPENREG_CUDA_CONTRACT="0",
    )
    assert result.stdout.split() == ["[0.0,", "4.0]", "ok"], result.stdout + result.stderr


# ---- graph capture: what CUDA's stream capture forbids ----------------------------------------------------------------

CAPTURE_FORBIDDEN = [
    ("item", lambda x: x.sum().item(), torch.AcceleratorError, "operation not permitted when stream is capturing"),
    (
        "synchronize",
        lambda x: torch.openreg.synchronize(),
        torch.AcceleratorError,
        "operation not permitted when stream is capturing",
    ),
    (
        "stream_synchronize",
        lambda x: torch.openreg.current_stream().synchronize(),
        torch.AcceleratorError,
        "not permitted",
    ),
    ("nonzero", lambda x: x.nonzero(), torch.AcceleratorError, "operation not permitted when stream is capturing"),
    ("boolean_mask", lambda x: x[x > 0], torch.AcceleratorError, "operation not permitted when stream is capturing"),
    # (x[mask] = scalar is masked_fill_ on torch 2.15, which needs no synchronization)
    (
        "masked_index_put",
        lambda x: x.index_put_((x > 0,), torch.zeros(1, device=DEVICE)),
        torch.AcceleratorError,
        "operation not permitted",
    ),
    (
        "cpu",
        lambda x: x.cpu(),
        RuntimeError,
        "Cannot copy between CPU and openreg tensors during openreg graph capture",
    ),
    ("from_unpinned", lambda x: x.copy_(torch.ones(8)), RuntimeError, "unless the CPU tensor is pinned"),
    (
        "tensor_on_device",
        lambda x: torch.tensor([1.0, 2.0], device=DEVICE),
        RuntimeError,
        "unless the CPU tensor is pinned",
    ),
    ("pinned_blocking", lambda x: x.copy_(torch.ones(8).pin_memory()), torch.AcceleratorError, "not permitted"),
    ("pin_memory", lambda x: torch.ones(1 << 20).pin_memory(), torch.AcceleratorError, "pinned host memory allocation"),
]


@pytest.mark.parametrize("name, call, error, message", CAPTURE_FORBIDDEN, ids=[c[0] for c in CAPTURE_FORBIDDEN])
def test_capture_refuses_what_cuda_refuses_and_is_invalidated(name, call, error, message):
    x = make_cpu(8, seed=20).to(DEVICE)
    pinned = torch.ones(8).pin_memory() if name == "pinned_blocking" else None  # allocated before the capture
    g = torch.openreg.OpenRegGraph()
    with pytest.raises(RuntimeError) as raised:
        with torch.openreg.graph(g):
            x * 2
            call(x) if pinned is None else x.copy_(pinned)
    # As with torch.cuda.graph: a call that invalidates the capture makes the block's exit (capture_end) raise
    # cudaErrorStreamCaptureInvalidated's error, the call's own error as its context.
    chain = [raised.value, raised.value.__context__]
    invalidates = error is torch.AcceleratorError
    if invalidates:
        assert isinstance(chain[0], torch.AcceleratorError) and "previous error during capture" in str(chain[0])
    cause = chain[1] if invalidates else chain[0]
    assert isinstance(cause, error) and message in str(cause), repr(cause)
    assert not torch.openreg.is_current_stream_capturing()


def test_invalidated_capture_end_raises_cudas_error():
    x = make_cpu(4, seed=21).to(DEVICE)
    g = torch.openreg.OpenRegGraph()
    s = torch.openreg.Stream()
    with torch.openreg.stream(s):
        g.capture_begin()
        with pytest.raises(torch.AcceleratorError):
            x.sum().item()
        with pytest.raises(torch.AcceleratorError, match="operation failed due to a previous error during capture"):
            g.capture_end()
    assert not torch.openreg.is_current_stream_capturing()
    # The graph can capture again, and the stream works after the failed capture.
    with torch.openreg.graph(g):
        y = x + 1
    x.copy_(torch.full((4,), 3.0).to(DEVICE))
    g.replay()
    assert_same(y, torch.full((4,), 4.0))


def test_capture_allows_what_cuda_allows():
    x = make_cpu(8, seed=22).to(DEVICE)
    pinned = torch.ones(8).pin_memory()
    host = torch.empty(8).pin_memory()
    g = torch.openreg.OpenRegGraph()
    with torch.openreg.graph(g):
        x.copy_(pinned, non_blocking=True)
        y = (x * 2).sin()
        host.copy_(y, non_blocking=True)
        torch.empty(16, device=DEVICE)  # device allocations come from the graph's pool
    pinned.fill_(5.0)
    g.replay()
    torch.openreg.synchronize()
    assert_same(y, (torch.full((8,), 5.0) * 2).sin())
    assert torch.equal(host, (torch.full((8,), 5.0) * 2).sin())


def test_relaxed_capture_allows_other_streams_and_threads():
    import threading

    x = make_cpu(8, seed=23).to(DEVICE)
    g = torch.openreg.OpenRegGraph()
    results = {}

    def read_elsewhere():
        try:
            results["value"] = x.sum().item()
        except Exception as error:  # noqa: BLE001 - the test reports what happened
            results["error"] = error

    with torch.openreg.graph(g, capture_error_mode="relaxed"):
        y = x * 2
        thread = threading.Thread(target=read_elsewhere)
        thread.start()
        thread.join(timeout=60)
    assert results == {"value": x.cpu().sum().item()}
    with pytest.raises(torch.AcceleratorError, match="previous error during capture") as raised:
        with torch.openreg.graph(torch.openreg.OpenRegGraph(), capture_error_mode="relaxed"):
            torch.openreg.current_stream().synchronize()  # the capturing stream itself
    assert "not permitted" in str(raised.value.__context__)
    # global (the default): another thread's synchronizing call is refused too
    with pytest.raises(torch.AcceleratorError, match="previous error during capture"):
        with torch.openreg.graph(torch.openreg.OpenRegGraph()):
            results.clear()
            thread = threading.Thread(target=read_elsewhere)
            thread.start()
            thread.join(timeout=60)
    assert isinstance(results["error"], torch.AcceleratorError)
    del y


# ---- dtypes CUDA's kernels lack -----------------------------------------------------------------------------------


def ints(*shape, dtype=torch.int64, seed=30):
    return torch.randint(0, 5, shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


img = torch.randint(0, 255, (1, 3, 4, 4), generator=torch.Generator().manual_seed(31), dtype=torch.uint8)

# (case id, the call on CPU tensors (moved to openreg), CUDA's message)
REFUSED = [
    ("matmul_long", lambda a: a @ a, (ints(3, 3),), '"addmm_cuda" not implemented for \'Long\''),
    ("mm_int32", torch.mm, (ints(3, 3, dtype=torch.int32),) * 2, '"addmm_cuda" not implemented for \'Int\''),
    (
        "addmm_uint8",
        torch.addmm,
        (ints(3, dtype=torch.uint8), ints(3, 3, dtype=torch.uint8), ints(3, 3, dtype=torch.uint8)),
        '"addmm_cuda" not implemented for \'Byte\'',
    ),
    ("linear_long", F.linear, (ints(2, 3), ints(4, 3), ints(4)), '"addmm_cuda" not implemented for \'Long\''),
    ("bmm_int16", torch.bmm, (ints(2, 3, 3, dtype=torch.int16),) * 2, '"baddbmm_cuda" not implemented for \'Short\''),
    ("batched_matmul", torch.matmul, (ints(2, 3, 3), ints(2, 3, 3)), '"baddbmm_cuda" not implemented for \'Long\''),
    ("einsum", lambda a, b: torch.einsum("bij,bjk->bik", a, b), (ints(2, 3, 3), ints(2, 3, 3)), "baddbmm_cuda"),
    (
        "mv_int8",
        torch.mv,
        (ints(3, 3, dtype=torch.int8), ints(3, dtype=torch.int8)),
        '"addmv_impl_cuda" not implemented for \'Char\'',
    ),
    ("dot_long", torch.dot, (ints(3), ints(3)), '"dot" not implemented for \'Long\''),
    (
        "conv2d_long",
        F.conv2d,
        (ints(1, 2, 5, 5), ints(2, 2, 3, 3)),
        '"convolution_overrideable" not implemented for \'Long\'',
    ),
    ("conv_transpose1d_long", F.conv_transpose1d, (ints(1, 2, 5), ints(2, 2, 3)), "not implemented for 'Long'"),
    (
        "avg_pool2d_long",
        lambda x: F.avg_pool2d(x, 2),
        (ints(1, 2, 4, 4),),
        '"avg_pool2d_out_cuda_frame" not implemented for \'Long\'',
    ),
    ("avg_pool1d_long", lambda x: F.avg_pool1d(x, 2), (ints(1, 2, 4),), "avg_pool2d_out_cuda_frame"),
    ("local_response_norm_long", lambda x: F.local_response_norm(x, 2), (ints(1, 4, 3, 3),), "avg_pool3d_out_cuda"),
    (
        "max_pool2d_long",
        lambda x: F.max_pool2d(x, 2),
        (ints(1, 2, 4, 4),),
        '"max_pool2d_with_indices_out_cuda_frame" not implemented for \'Long\'',
    ),
    (
        "max_pool3d_uint8",
        lambda x: F.max_pool3d(x, 2),
        (ints(1, 1, 4, 4, 4, dtype=torch.uint8),),
        "max_pool3d_with_indices_out_frame",
    ),
    (
        "bilinear_uint8",
        lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
        (img,),
        '"upsample_bilinear2d_out_frame" not implemented for \'Byte\'',
    ),
    ("bicubic_uint8", lambda x: F.interpolate(x, size=(6, 6), mode="bicubic"), (img,), "upsample_bicubic2d_out_frame"),
    (
        "igamma_half",
        torch.igamma,
        (torch.ones(3, dtype=torch.half), torch.ones(3, dtype=torch.half)),
        '"igamma_cuda" not implemented for \'Half\'',
    ),
    ("histc_half", lambda x: torch.histc(x, bins=3), (torch.ones(4, dtype=torch.half),), "HalfTensor is not supported"),
    (
        "histc_bfloat16",
        lambda x: torch.histc(x, bins=3),
        (torch.ones(4, dtype=torch.bfloat16),),
        '"histc" not implemented for \'BFloat16\'',
    ),
    (
        "scatter_reduce_amax_bool",
        lambda x, i: x.scatter_reduce(0, i, x, "amax"),
        (torch.tensor([True, False]), torch.tensor([0, 0])),
        "cuda_scatter_gather_base_kernel_func",
    ),
]

if torch.__version__.startswith("2.13."):  # 2.14's OpInfo lists half and bfloat16 angle for CUDA
    REFUSED.append(
        (
            "angle_bfloat16",
            torch.angle,
            (torch.ones(3, dtype=torch.bfloat16),),
            "\"angle_cuda\" not implemented for 'BFloat16'",
        )
    )


@pytest.mark.parametrize("name, fn, args, message", REFUSED, ids=[c[0] for c in REFUSED])
def test_dtype_cuda_lacks_raises_as_on_cuda_and_the_cpu_contract_computes_it(name, fn, args, message):
    device_args = [a.to(DEVICE) for a in args]
    error = RuntimeError if "HalfTensor" in message else NotImplementedError
    with pytest.raises(error, match=re.escape(message)):
        fn(*device_args)
    with contract.enabled(False):
        assert_same(fn(*device_args), fn(*args), check_stride=False)


ACCEPTED = [
    ("matmul_float", lambda a: a @ a, (make_cpu((3, 3), seed=32),)),
    ("matmul_bfloat16", lambda a: a @ a, (make_cpu((3, 3), seed=33).bfloat16(),)),
    ("empty_int_matmul", torch.mm, (ints(0, 3), ints(3, 2))),  # CUDA returns before its dispatch
    ("k0_int_matmul", torch.mm, (ints(2, 0), ints(0, 2))),
    ("conv2d_float", F.conv2d, (make_cpu((1, 2, 5, 5), seed=34), make_cpu((2, 2, 3, 3), seed=35))),
    ("bilinear_uint8_same_size", lambda x: F.interpolate(x, size=(4, 4), mode="bilinear"), (img,)),
    ("nearest_uint8", lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), (img,)),
    ("max_pool2d_float", lambda x: F.max_pool2d(x, 2), (make_cpu((1, 2, 4, 4), seed=36),)),
    ("avg_pool2d_half", lambda x: F.avg_pool2d(x, 2), (make_cpu((1, 2, 4, 4), seed=37).half(),)),
    ("igamma_promoted", torch.igamma, (torch.ones(3, dtype=torch.half), torch.ones(3))),  # common dtype float32
    ("angle_int", torch.angle, (ints(3),)),  # promoted to float
    ("histc_float", lambda x: torch.histc(x, bins=3), (make_cpu(6, seed=38),)),
    (
        "scatter_reduce_sum_bool",
        lambda x, i: x.scatter_reduce(0, i, x, "sum"),
        (torch.tensor([True, False]), torch.tensor([0, 0])),
    ),
]


@pytest.mark.parametrize("name, fn, args", ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_dtypes_cuda_has_compute_as_the_cpu(name, fn, args):
    assert_same(fn(*[a.to(DEVICE) for a in args]), fn(*args), check_stride=False)


@pytest.mark.slow
def test_the_table_accounts_for_every_opinfo_difference_of_this_torch():
    # Regenerated from the installed torch's OpInfo database, resolved as on an sm_80 GPU: every CPU dtype CUDA
    # lacks is refused or recorded as not refused with a reason, and no refusal covers a dtype CUDA has; every CUDA
    # dtype the CPU lacks is widened or recorded as not widened, and no widening covers a dtype CUDA lacks.
    result = run_python(
        """
        import json
        import torch
        from torch_openreg.testing import cuda_dtypes
        names = lambda table: {name: sorted(map(str, dtypes)) for name, dtypes in table.items()}
        differences = cuda_dtypes.opinfo_differences()
        from torch.testing._internal.common_methods_invocations import op_db
        cuda = {op.full_name: sorted(map(str, op.dtypesIf.get("cuda", op.dtypes))) for op in op_db}
        print(json.dumps([
            names({name: cpu_only for name, (cpu_only, _) in differences.items()}),
            names({name: cuda_only for name, (_, cuda_only) in differences.items()}),
            names(cuda_dtypes.refused_by_opinfo()), names(cuda_dtypes.recorded_by_opinfo("not_refused")),
            names(cuda_dtypes.computed_by_opinfo()), names(cuda_dtypes.recorded_by_opinfo("not_widened")), cuda,
        ]))
        """,
        timeout=300,
    )
    cpu_only, cuda_only, refused, not_refused, computed, not_widened, cuda = json.loads(result.stdout.splitlines()[-1])

    def unaccounted(differences, *tables):
        left = {
            name: set(dtypes).difference(*(table.get(name, []) for table in tables))
            - set().union(*(table.get(name.split(".")[0], []) for table in tables[:1]))
            for name, dtypes in differences.items()
        }
        return {name: sorted(d) for name, d in left.items() if d}

    assert unaccounted(cpu_only, refused, not_refused) == {}
    assert unaccounted(cuda_only, computed, not_widened) == {}
    false_alarms = {name: sorted(set(dtypes) & set(cuda[name])) for name, dtypes in refused.items() if name in cuda}
    assert {name: d for name, d in false_alarms.items() if d} == {}
    # A widening serves the dtypes CUDA's entry has (cuda_dtypes.apply gives openreg no others).
    assert set(refused) | set(not_refused) | set(computed) | set(not_widened) <= set(cuda), (
        "an opinfos entry names no OpInfo"
    )


# ---- random streams of the device's own ------------------------------------------------------------------------------


@pytest.mark.slow
def test_random_stream_of_the_devices_own_differs_from_the_cpus_and_repeats():
    code = """
        import torch
        torch.manual_seed(7)
        device = torch.rand(6, device="openreg").cpu()
        mask = torch.nn.functional.dropout(torch.ones(64, device="openreg"), 0.5).cpu()
        torch.manual_seed(7)
        cpu = torch.rand(6)
        cpu_mask = torch.nn.functional.dropout(torch.ones(64), 0.5)
        g = torch.Generator(device="openreg").manual_seed(3)
        print(torch.equal(device, cpu), torch.equal(mask, cpu_mask), torch.openreg.initial_seed(), g.initial_seed(),
              torch.randperm(8, device="openreg", generator=g).tolist(), device.tolist())
    """
    own, again = (run_python(code, OPENREG_RANDOM_STREAM="device").stdout.split(" ", 4) for _ in range(2))
    assert own[:4] == ["False", "False", "7", "3"], own
    assert own == again  # the same numbers every run
    default = run_python(code).stdout.split(" ", 4)
    assert default[:2] == ["True", "True"], default


# ---- dtypes CUDA has and the CPU lacks ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int32, torch.int64], ids=str)
def test_integer_histc_computes_as_cuda_does(dtype):
    x = torch.tensor([0, 1, 1, 3, 7, 7, 7, 9], dtype=dtype)
    with pytest.raises(RuntimeError, match="not implemented for"):
        torch.histc(x, bins=4)  # the CPU has no integer histc; CUDA has
    for kwargs in ({"bins": 4}, {"bins": 5, "min": 1, "max": 8}, {"bins": 3, "min": 2, "max": 2}):
        got = torch.histc(x.to(DEVICE), **kwargs)
        # documented as the CPU's float64 computation cast back, exact for these values
        assert_same(got, torch.histc(x.double(), **kwargs).to(dtype))
    with contract.enabled(False), pytest.raises(RuntimeError, match="not implemented for"):
        torch.histc(x.to(DEVICE), bins=4)
    with DeterministicGuard(True):
        torch.histc(x.to(DEVICE), bins=4)  # CUDA alerts for floating input only


def _counterpart(dtype, from_, to):
    """``dtype`` in a call computed in ``to`` instead of ``from_``: the dtype itself and its real or complex
    counterpart (complex32's abs is half), as csrc/aten/CudaContract.cpp maps them; None if unchanged."""
    if dtype == from_:
        return to
    if from_.is_complex and to.is_complex and dtype == from_.to_real():
        return to.to_real()
    if from_.itemsize > 1 and from_.is_floating_point and to.is_floating_point and dtype == from_.to_complex():
        return to.to_complex() if to.to_complex() != dtype else None
    return None


def widened_on_the_cpu(fn, args, from_, to):
    """The CPU's computation of ``fn(*args)`` in ``to``, its results cast back: what openreg documents its widened
    calls to equal."""
    wider = [a.to(_counterpart(a.dtype, from_, to) or a.dtype) if isinstance(a, torch.Tensor) else a for a in args]
    result = fn(*wider)
    narrow = lambda t: t.to(_counterpart(t.dtype, to, from_) or t.dtype) if isinstance(t, torch.Tensor) else t
    return type(result)(map(narrow, result)) if isinstance(result, tuple) else narrow(result)


def assert_same_bits(actual, expected, **kwargs):
    """assert_same, also for complex32 (whose torch.equal the CPU lacks): compared as pairs of halves."""
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    if expected.dtype == torch.complex32:
        actual, expected = torch.view_as_real(actual), torch.view_as_real(expected)
    elif expected.dtype.itemsize == 1 and expected.dtype.is_floating_point:  # float8: their bytes
        actual, expected = actual.view(torch.uint8), expected.view(torch.uint8)
    if expected.layout == torch.sparse_csr:
        actual, expected = actual.to_dense(), expected.to_dense()
    assert_same(actual, expected, **kwargs)


c32 = torch.complex(make_cpu(6, seed=40), make_cpu(6, seed=41)).to(torch.complex32)
c32_2 = torch.complex(make_cpu(6, seed=42), make_cpu(6, seed=43)).to(torch.complex32)
h5 = make_cpu((1, 2, 4, 4, 4), seed=44)
WIDENED = [
    # (case id, the call, its CPU arguments, the dtype CUDA computes, the one openreg computes it in)
    ("sin_complex32", torch.sin, (c32,), torch.complex32, torch.complex64),  # a DispatchStub operator
    ("acos_complex32", torch.acos, (c32,), torch.complex32, torch.complex64),  # the fallback
    ("sigmoid_complex32", torch.sigmoid, (c32,), torch.complex32, torch.complex64),
    ("div_complex32", torch.div, (c32, c32_2), torch.complex32, torch.complex64),
    ("pow_complex32", lambda a: a**2, (c32,), torch.complex32, torch.complex64),
    ("lerp_complex32", lambda a, b: torch.lerp(a, b, 0.25), (c32, c32_2), torch.complex32, torch.complex64),
    ("angle_complex32", torch.angle, (c32,), torch.complex32, torch.complex64),  # a half result
    ("sum_complex32", lambda a: a.reshape(2, 3).sum(1), (c32,), torch.complex32, torch.complex64),
    ("prod_complex32", torch.prod, (c32,), torch.complex32, torch.complex64),
    ("trace_complex32", lambda a: a[:4].reshape(2, 2).trace(), (c32,), torch.complex32, torch.complex64),
    ("fft_complex32", lambda a: torch.fft.fft(a[:4]), (c32,), torch.complex32, torch.complex64),
    ("hfft_complex32", lambda a: torch.fft.hfft(a[:5]), (c32,), torch.complex32, torch.complex64),  # 8 outputs
    ("trace_bool", torch.trace, (torch.eye(3, dtype=torch.bool),), torch.bool, torch.uint8),  # a Long result
    ("abs_bool", torch.abs, (torch.tensor([True, False]),), torch.bool, torch.uint8),
    ("avg_pool3d_half", lambda x: F.avg_pool3d(x, 2), (h5.half(),), torch.half, torch.float32),
    ("avg_pool3d_bfloat16", lambda x: F.avg_pool3d(x, 2), (h5.bfloat16(),), torch.bfloat16, torch.float32),
    (
        "multi_margin_loss_half",
        F.multi_margin_loss,
        (make_cpu((3, 4), seed=45).half(), torch.tensor([0, 3, 1])),
        torch.half,
        torch.float32,
    ),
    (
        "multilabel_margin_loss_bfloat16",
        F.multilabel_margin_loss,
        (make_cpu((2, 4), seed=46).bfloat16(), torch.tensor([[0, 2, -1, 1], [3, -1, 0, 0]])),
        torch.bfloat16,
        torch.float32,
    ),
    (
        "antialiased_bilinear_half",
        lambda x: F.interpolate(x, size=(3, 5), mode="bilinear", antialias=True),
        (make_cpu((1, 2, 6, 7), seed=47).half(),),
        torch.half,
        torch.float32,
    ),
]


RELEASE = tuple(int(part) for part in torch.__version__.split(".")[:2])
if RELEASE >= (2, 14):  # rules of those releases (cuda_contract.yaml's `releases`)
    WIDENED.append(
        (
            "sampled_addmm_half",
            lambda c, a, b: torch.sparse.sampled_addmm(c, a, b),
            (torch.eye(3).half().to_sparse_csr(), make_cpu((3, 4), seed=50).half(), make_cpu((4, 3), seed=51).half()),
            torch.half,
            torch.float32,
        )
    )
if RELEASE >= (2, 15):
    f8 = torch.float8_e4m3fn
    WIDENED.append(
        (
            "scatter_float8",
            lambda x, s: x.scatter(0, torch.tensor([3, 0]).to(x.device), s),
            (make_cpu(5, seed=52).to(f8), make_cpu(2, seed=53).to(f8)),
            f8,
            torch.float32,
        )
    )


@pytest.mark.parametrize("name, fn, args, from_, to", WIDENED, ids=[c[0] for c in WIDENED])
def test_dtypes_cuda_has_and_the_cpu_lacks_compute_in_a_wider_one(name, fn, args, from_, to):
    with pytest.raises((RuntimeError, NotImplementedError)):
        fn(*args)  # the CPU's kernel has no such dtype
    device_args = [a.to(DEVICE) for a in args]
    assert_same_bits(fn(*device_args), widened_on_the_cpu(fn, args, from_, to), check_stride=False)
    with contract.enabled(False), pytest.raises((RuntimeError, NotImplementedError)):
        fn(*device_args)  # the CPU's answer


def test_widened_in_place_and_out_calls_write_the_callers_tensor():
    for fn in (torch.sin, torch.exp, torch.acos):  # two DispatchStub operators, one through the fallback
        x = c32.to(DEVICE)
        storage = x.untyped_storage().data_ptr()
        getattr(x, fn.__name__ + "_")()
        assert x.untyped_storage().data_ptr() == storage and x.dtype == torch.complex32
        assert_same_bits(x, widened_on_the_cpu(fn, (c32,), torch.complex32, torch.complex64))
        out = torch.empty(0, dtype=torch.complex32, device=DEVICE)  # resized by the call
        assert fn(c32.to(DEVICE), out=out) is out
        assert_same_bits(out, x.cpu())
    # a structured out= overload of a pooling backward, through the fallback
    grad = torch.empty(0, dtype=torch.half, device=DEVICE)
    x = h5.half().to(DEVICE)
    torch.ops.aten.avg_pool3d_backward.grad_input(
        torch.ones(1, 2, 2, 2, 2, dtype=torch.half, device=DEVICE),
        x,
        [2] * 3,
        [2] * 3,
        [0] * 3,
        False,
        True,
        None,
        grad_input=grad,
    )
    assert grad.shape == x.shape and grad.dtype == torch.half
    assert torch.equal(grad.cpu(), torch.full(x.shape, 0.125, dtype=torch.half))
    # The iterator's check names the call's dtypes, not the wider ones
    with pytest.raises(RuntimeError, match="result type ComplexHalf can't be cast to the desired output type Half"):
        torch.acos(c32.to(DEVICE), out=torch.empty(6, dtype=torch.half, device=DEVICE))


def test_widened_backward_as_cuda_computes_it():
    for dtype in (torch.half, torch.bfloat16):
        got = grad_of(torch.nn.AvgPool3d(2), h5.to(dtype), DEVICE)
        assert_same(got, grad_of(torch.nn.AvgPool3d(2), h5, "cpu").to(dtype))
    x = c32.to(DEVICE).requires_grad_()
    torch.tanh(x).abs().sum().backward()
    assert x.grad.dtype == torch.complex32
    x64 = c32.to(torch.complex64).requires_grad_()
    torch.tanh(x64).abs().sum().backward()
    torch.testing.assert_close(x.grad.cpu().to(torch.complex64), x64.grad, atol=2e-2, rtol=2e-2)


def nan_riddled_complex(dtype):
    """Complex values with NaN in the real part of one element, the imaginary part of another, both of a third."""
    x = torch.complex(make_cpu((3, 4), seed=54), make_cpu((3, 4), seed=55))
    x[0, 1] = complex(math.nan, 1.0)
    x[1, 2] = complex(2.0, math.nan)
    x[2, 3] = complex(math.nan, math.nan)
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
def test_complex_nansum_and_nanmean_count_nan_elements_as_zero_as_cuda_does(dtype):
    x = nan_riddled_complex(dtype)
    with pytest.raises(RuntimeError, match="nansum on CPU does not support complex inputs"):
        torch.nansum(x)
    zeroed = x.masked_fill(x.isnan(), 0)  # nansum's definition, computed by the CPU's sum
    count = x.isnan().logical_not().sum(1)
    on_device = x.to(DEVICE)
    assert_same(torch.nansum(on_device), zeroed.sum())
    assert_same(torch.nansum(on_device, 1, keepdim=True), zeroed.sum(1, keepdim=True))
    assert_same(torch.nanmean(on_device, 1), zeroed.sum(1) / count)
    out = torch.empty(0, dtype=dtype, device=DEVICE)
    assert torch.nansum(on_device, 0, out=out) is out
    assert_same(out, zeroed.sum(0))
    # The gradient passes where the element is not NaN (nansum_backward), on openreg's operators.
    leaf = on_device.clone().requires_grad_()
    torch.nansum(leaf).abs().backward()
    reference = x.clone().requires_grad_()
    reference.masked_fill(x.isnan(), 0).sum().abs().backward()
    assert_same(leaf.grad, reference.grad)
    with contract.enabled(False), pytest.raises(RuntimeError, match="nansum on CPU does not support complex inputs"):
        torch.nansum(on_device)  # the CPU's answer


def test_complex32_nansum_sums_in_complex64_and_real_nansum_is_the_cpus():
    x = nan_riddled_complex(torch.complex32).to(torch.complex64)  # complex32's values
    expected = x.masked_fill(x.isnan(), 0).sum(0).to(torch.complex32)
    assert_same_bits(torch.nansum(x.to(torch.complex32).to(DEVICE), 0), expected)
    real = torch.view_as_real(x)[..., 0].contiguous()
    assert_same(torch.nansum(real.to(DEVICE), 1), torch.nansum(real, 1))
    assert_same(torch.nansum(real.to(DEVICE).half()), torch.nansum(real.half()))


def test_half_ffts_need_power_of_two_signal_sizes_as_cufft_does():
    x = torch.complex(make_cpu((2, 6), seed=48), make_cpu((2, 6), seed=49)).to(torch.complex32).to(DEVICE)
    with pytest.raises(
        RuntimeError, match=re.escape("powers of two when computing in half precision, but got a signal size of[6]")
    ):
        torch.fft.fft(x)
    with pytest.raises(RuntimeError, match=re.escape("signal size of[2, 6]")):
        torch.fft.fft2(x)
    with pytest.raises(RuntimeError, match=re.escape("signal size of[10]")):
        torch.fft.hfft(x)  # the real output's size, 2 * (6 - 1)
    assert torch.fft.fft(x, n=8).shape == (2, 8)  # padded to a power of two
    assert torch.fft.hfft(x[:, :5]).shape == (2, 8)
    with contract.enabled(False), pytest.raises(RuntimeError, match="MKL FFT doesn't support"):
        torch.fft.fft(x, n=8)
