"""scaled_dot_product_attention on openreg: the device answers the backend
choice (_fused_sdp_choice_stub and the _fused_sdp_choice operator) with
OVERRIDEABLE for the inputs its fused kernel takes, and the fused kernel
(_scaled_dot_product_fused_attention_overrideable and its backward) computes
what the CPU computes for the same call, bit for bit, eager, compiled and
under autocast. Everything else takes the backend the CPU takes."""

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode

import torch_openreg  # noqa: F401

from conftest import DEVICE, assert_same, dtype_id, make_cpu

FUSED = torch.ops.aten._scaled_dot_product_fused_attention_overrideable
FUSED_BACKWARD = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward


class Operators(TorchDispatchMode):
    """Records the operators a call runs (below the composites)."""

    def __init__(self):
        super().__init__()
        self.names = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func.__name__.split(".")[0])
        return func(*args, **(kwargs or {}))


def qkv(q_heads=4, kv_heads=4, q_len=8, kv_len=8, head_dim=16, dtype=torch.float32):
    return (
        make_cpu((2, q_heads, q_len, head_dim), dtype, seed=1),
        make_cpu((2, kv_heads, kv_len, head_dim), dtype, seed=2),
        make_cpu((2, kv_heads, kv_len, head_dim), dtype, seed=3),
    )


def forward_and_backward(device, q, k, v, **kwargs):
    """Output and the three input gradients of one attention call on ``device``."""
    leaves = [t.to(device).detach().requires_grad_() for t in (q, k, v)]
    kwargs = {name: value.to(device) if isinstance(value, torch.Tensor) else value for name, value in kwargs.items()}
    with Operators() as seen:
        output = F.scaled_dot_product_attention(*leaves, **kwargs)
        output.backward(make_cpu(output.shape, output.dtype, seed=4).to(device))
    return [output] + [leaf.grad for leaf in leaves], seen.names


CASES = {
    "plain": (qkv(), {}),
    "causal": (qkv(), {"is_causal": True}),
    "float_mask": (qkv(kv_len=12), {"attn_mask": make_cpu((8, 12), seed=5)}),
    "bool_mask": (qkv(), {"attn_mask": make_cpu((2, 1, 8, 8), seed=5) > 0}),
    "grouped_query": (qkv(kv_heads=2), {"enable_gqa": True}),
    "scale": (qkv(), {"scale": 0.3}),
    "transposed_heads": (tuple(t.transpose(1, 2).contiguous().transpose(1, 2) for t in qkv()), {}),
    # math on torch 2.13's CPU, its flash kernel from 2.14 on: openreg follows either way
    "three_dims": (tuple(t[0] for t in qkv()), {}),
}


@pytest.mark.parametrize("case", CASES)
def test_fused_kernel_equals_the_cpu_forward_and_backward(case):
    (q, k, v), kwargs = CASES[case]
    expected, cpu_ops = forward_and_backward("cpu", q, k, v, **kwargs)
    actual, device_ops = forward_and_backward(DEVICE, q, k, v, **kwargs)
    # openreg runs its fused kernel exactly where the CPU runs its flash kernel.
    fused = {
        "_scaled_dot_product_fused_attention_overrideable",
        "_scaled_dot_product_fused_attention_overrideable_backward",
    }
    cpu_ran_flash = "_scaled_dot_product_flash_attention_for_cpu" in cpu_ops
    assert cpu_ran_flash or case == "three_dims"
    assert {name for name in device_ops if "attention" in name} == (fused if cpu_ran_flash else set()), device_ops
    for got, want in zip(actual, expected):
        assert_same(got, want)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64], ids=dtype_id)
def test_fused_kernel_equals_the_cpu_in_every_dtype_it_takes(dtype):
    q, k, v = qkv(dtype=dtype)
    expected, _ = forward_and_backward("cpu", q, k, v, is_causal=True)
    actual, device_ops = forward_and_backward(DEVICE, q, k, v, is_causal=True)
    assert "_scaled_dot_product_fused_attention_overrideable" in device_ops
    for got, want in zip(actual, expected):
        assert_same(got, want)


def test_choice_is_overrideable_for_what_the_fused_kernel_takes():
    # PyTorch's own privateuse1 check: half precision, 4 x 2 heads x 256 x 128.
    q, k, v = (make_cpu((4, 2, 256, 128), torch.float16, seed=s).to(DEVICE) for s in (1, 2, 3))
    assert torch._fused_sdp_choice(q, k, v) == SDPBackend.OVERRIDEABLE.value
    q, k, v = (t.to(DEVICE) for t in qkv(kv_heads=2))
    assert torch._fused_sdp_choice(q, k, v, enable_gqa=True) == SDPBackend.OVERRIDEABLE.value


def _variant(name):
    q, k, v = qkv()
    kwargs = {}
    if name == "dropout":
        kwargs["dropout_p"] = 0.5
    elif name == "three_dims":
        q, k, v = q[0], k[0], v[0]
    elif name == "mask_requires_grad":
        kwargs["attn_mask"] = make_cpu((8, 8), seed=5).requires_grad_()
    elif name == "one_kv_head":  # multi-query attention without enable_gqa
        q, k, v = qkv(kv_heads=1)
    elif name == "grouped_heads_without_flag":
        q, k, v = qkv(kv_heads=2)
    elif name == "value_head_size_differs":
        v = make_cpu((2, 4, 8, 32), seed=3)
    elif name == "strided_last_dim":  # sliced by the test after the move: .to() would compact it
        q = make_cpu((2, 4, 8, 32), seed=1)
    elif name == "empty_sequence":
        q, k, v = qkv(q_len=0, kv_len=0)
    elif name == "integer_mask_shape":
        kwargs["attn_mask"] = make_cpu((3, 8, 8), seed=5)
    return (q, k, v), kwargs


VARIANTS = [
    "dropout",
    "three_dims",
    "mask_requires_grad",
    "one_kv_head",
    "grouped_heads_without_flag",
    "value_head_size_differs",
    "strided_last_dim",
    "empty_sequence",
    "integer_mask_shape",
]


@pytest.mark.parametrize("name", VARIANTS)
def test_choice_follows_the_cpus_flash_gates(name):
    """openreg answers OVERRIDEABLE exactly where the CPU answers its flash
    kernel, and the CPU's answer (or error) everywhere else."""
    (q, k, v), kwargs = _variant(name)
    view = (lambda t: t[..., ::2]) if name == "strided_last_dim" else (lambda t: t)
    on_cpu = (view(q), k, v)
    on_device = (view(q.to(DEVICE)), k.to(DEVICE), v.to(DEVICE))
    device_kwargs = {
        key: value.to(DEVICE) if isinstance(value, torch.Tensor) else value for key, value in kwargs.items()
    }
    try:
        expected = torch._fused_sdp_choice(*on_cpu, **kwargs)
    except RuntimeError as error:
        with pytest.raises(RuntimeError, match=str(error).splitlines()[0][:40]):
            torch._fused_sdp_choice(*on_device, **device_kwargs)
        return
    if expected == SDPBackend.FLASH_ATTENTION.value:
        expected = SDPBackend.OVERRIDEABLE.value
    assert torch._fused_sdp_choice(*on_device, **device_kwargs) == expected


def test_math_backend_with_dropout_draws_the_cpus_mask():
    q, k, v = qkv()
    torch.manual_seed(0)
    expected, _ = forward_and_backward("cpu", q, k, v, dropout_p=0.3)
    torch.manual_seed(0)
    actual, device_ops = forward_and_backward(DEVICE, q, k, v, dropout_p=0.3)
    # The math composite: matmuls, softmax and dropout, no fused operator.
    assert "native_dropout" in device_ops
    assert not {name for name in device_ops if "attention" in name}, device_ops
    for got, want in zip(actual, expected):
        assert_same(got, want)


def test_mask_that_requires_grad_takes_math_and_gets_the_cpus_gradient():
    q, k, v = qkv()
    mask = make_cpu((2, 4, 8, 8), seed=5)
    grads = []
    for device in ("cpu", DEVICE):
        leaf = mask.to(device).detach().requires_grad_()
        F.scaled_dot_product_attention(*(t.to(device) for t in (q, k, v)), attn_mask=leaf).sum().backward()
        grads.append(leaf.grad)
    assert_same(grads[1], grads[0])


@pytest.mark.parametrize(
    "backends, expected",
    [
        ([SDPBackend.MATH], SDPBackend.MATH),
        ([SDPBackend.OVERRIDEABLE], SDPBackend.OVERRIDEABLE),
        # flash without overrideable: the CPU's own flash kernel, as the CPU runs it
        ([SDPBackend.FLASH_ATTENTION], SDPBackend.FLASH_ATTENTION),
    ],
    ids=["math", "overrideable", "flash"],
)
def test_sdpa_kernel_switches_choose_the_backend(backends, expected):
    q, k, v = qkv()
    # The CPU's kernel for the same switches (flash for overrideable: the kernel openreg's runs).
    with sdpa_kernel(backends if expected != SDPBackend.OVERRIDEABLE else [SDPBackend.FLASH_ATTENTION]):
        want = F.scaled_dot_product_attention(q, k, v)
    with sdpa_kernel(backends):
        assert torch._fused_sdp_choice(q.to(DEVICE), k.to(DEVICE), v.to(DEVICE)) == expected.value
        assert_same(F.scaled_dot_product_attention(q.to(DEVICE), k.to(DEVICE), v.to(DEVICE)), want)


def test_no_enabled_backend_raises_as_on_the_cpu():
    q, k, v = (t.to(DEVICE) for t in qkv())
    with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
        with pytest.raises(RuntimeError, match="No viable backend"):
            F.scaled_dot_product_attention(q, k, v)


@pytest.mark.slow
def test_compiled_attention_runs_the_fused_kernel_as_compiled_cpu_runs_its_flash_kernel():
    from torch._inductor.utils import run_and_get_code

    def block(q, k, v, mask):
        return F.scaled_dot_product_attention(q.relu(), k, v, attn_mask=mask).sin()

    q, k, v = qkv()
    mask = make_cpu((8, 8), seed=5)
    results, sources = [], []
    for device in ("cpu", DEVICE):
        torch._dynamo.reset()
        leaves = [t.to(device).detach().requires_grad_() for t in (q, k, v)]

        def step():
            output = torch.compile(block)(*leaves, mask.to(device))
            output.sum().backward()
            return output

        output, code = run_and_get_code(step)
        results.append([output.detach()] + [leaf.grad for leaf in leaves])
        sources.append("\n".join(code))
    assert "_scaled_dot_product_flash_attention_for_cpu" in sources[0]
    assert "_scaled_dot_product_fused_attention_overrideable_backward" in sources[1]
    for got, want in zip(results[1], results[0]):
        assert_same(got, want)


def test_autocast_attention_equals_cpu_autocast():
    q, k, v = qkv()
    results = []
    for device in ("cpu", DEVICE):
        leaves = [t.to(device).detach().requires_grad_() for t in (q, k, v)]
        with torch.autocast(device, dtype=torch.bfloat16):
            output = F.scaled_dot_product_attention(*leaves, is_causal=True)
        output.float().sum().backward()
        results.append([output] + [leaf.grad for leaf in leaves])
    assert results[1][0].dtype == torch.bfloat16
    for got, want in zip(results[1], results[0]):
        assert_same(got, want)


def test_fused_operators_called_directly():
    # What PyTorch's test_transformers_privateuse1 calls: the forward with an
    # additive bias, then the backward asked for all four gradients.
    q, k, v = qkv(dtype=torch.float16)
    bias = make_cpu((2, 4, 8, 8), torch.float16, seed=5)
    grad_out = make_cpu((2, 4, 8, 16), torch.float16, seed=6)
    outputs = FUSED(q.to(DEVICE), k.to(DEVICE), v.to(DEVICE), attn_bias=bias.to(DEVICE))
    output, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, seed, offset, debug_mask = outputs
    expected_output, expected_logsumexp = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, attn_mask=bias
    )
    assert_same(output, expected_output)
    assert_same(logsumexp, expected_logsumexp.contiguous())
    assert (cum_seq_q, cum_seq_k, debug_mask, max_q, max_k) == (None, None, None, 8, 8)
    grads = FUSED_BACKWARD(
        grad_out.to(DEVICE),
        q.to(DEVICE),
        k.to(DEVICE),
        v.to(DEVICE),
        bias.to(DEVICE),
        [True] * 4,
        output,
        logsumexp,
        cum_seq_q,
        cum_seq_k,
        max_q,
        max_k,
        dropout_p=0.0,
        is_causal=False,
        philox_seed=seed,
        philox_offset=offset,
    )
    expected_grads = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
        grad_out, q, k, v, expected_output, expected_logsumexp, 0.0, False, attn_mask=bias
    )
    for got, want, like in zip(grads[:3], expected_grads, (q, k, v)):
        assert_same(got, want.contiguous(), check_stride=False)
        assert got.stride() == like.stride()
    # The bias gradient is the CPU math backend's.
    leaf = bias.clone().requires_grad_()
    F.scaled_dot_product_attention(q, k, v, attn_mask=leaf).backward(grad_out)
    assert_same(grads[3], leaf.grad)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"dropout_p": 0.1}, "has no dropout"),
        ({"return_debug_mask": True}, "has no debug attention mask"),
    ],
)
def test_fused_kernel_refuses_what_it_does_not_compute(kwargs, message):
    q, k, v = (t.to(DEVICE) for t in qkv())
    with pytest.raises(NotImplementedError, match=f"openreg: .*overrideable {message}"):
        FUSED(q, k, v, **kwargs)


def test_mixed_devices_raise():
    q, k, v = qkv()
    with pytest.raises(RuntimeError, match="same device type"):
        F.scaled_dot_product_attention(q.to(DEVICE), k, v)
