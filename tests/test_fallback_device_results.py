"""The functional TensorIterator operators that run on the CPU fallback (atan2, bitwise_xor, fmod, ...), and the
functional operators tagged pointwise that reach it without a kernel of their own (relu, gelu, hardswish, ...),
have their CPU kernel allocate the result directly in device memory, so it reaches the device without a copy.

The result must still be laid out exactly as on the CPU (dtype, shape, strides, values), its memory must be
the device's (counted by the allocator, freed with the tensor), the device memory must be closed to the host
after the call (memory protection), and CPU allocations outside the call must stay CPU memory.
"""

import gc
import signal

import pytest
import torch

from conftest import DEVICE, assert_same, check_ok, make_cpu, run_python


def dev(t):
    return t.to(DEVICE)


def _pair(cpu):
    """The same tensor on both sides; views are taken on the device so that strides match."""
    return cpu, dev(cpu)


def _cases():
    g = torch.Generator().manual_seed(3)
    a = torch.randn(6, 5, generator=g)
    b = torch.randn(5, 6, generator=g).double()
    i = torch.randint(-9, 9, (17, 3), generator=g)
    u = torch.randint(0, 255, (3, 17), generator=g).to(torch.uint8)
    return {
        # type promotion with a transposed operand: the CPU orders the result by the converted copy
        "atan2_promote_transposed": (torch.atan2, (a, b), (None, lambda t: t.t())),
        "atan2_broadcast_column": (torch.atan2, (a, a[:, :1].contiguous()), (None, None)),
        "atan2_strided_slices": (torch.atan2, (a, a), (lambda t: t[::2, :4], lambda t: t[1::2, 1:])),
        "atan2_expanded_scalar": (torch.atan2, (a, torch.tensor([0.5])), (None, lambda t: t.expand(6, 5))),
        "xor_promote_expanded_permuted": (
            torch.bitwise_xor,
            (torch.tensor([2]), u),
            (lambda t: t.expand(17, 3), lambda t: t.t()),
        ),
        "xor_int_int": (torch.bitwise_xor, (i, i.flip(0)), (None, None)),
        "fmod_int_float": (torch.fmod, (i, a[:3, :1].contiguous()), (lambda t: t[:3], None)),
        "signbit_permuted": (torch.signbit, (a,), (lambda t: t.t(),)),
        "atan2_zero_elements": (torch.atan2, (a[:0], a[:0]), (None, None)),
        "atan2_zero_dim": (torch.atan2, (torch.tensor(0.25), torch.tensor(-2.0)), (None, None)),
        # pointwise operators of the plain fallback
        "relu_permuted": (torch.relu, (a,), (lambda t: t.t(),)),
        "gelu_large": (torch.nn.functional.gelu, (torch.randn(64, 300, generator=g),), (None,)),
        "hardswish_strided_slices": (torch.nn.functional.hardswish, (a,), (lambda t: t[::2, 1:],)),
    }


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_result_equals_cpu_layout_and_values(name):
    op, inputs, views = CASES[name]
    cpu_args, dev_args = [], []
    for t, view in zip(inputs, views):
        c, d = _pair(t)
        cpu_args.append(view(c) if view else c)
        dev_args.append(view(d) if view else d)
    for c, d in zip(cpu_args, dev_args):
        assert c.stride() == d.stride()
    torch.openreg.reset_fallback_stats()
    result = op(*dev_args)
    assert sum(torch.openreg.fallback_stats().values()) == 1
    assert_same(result, op(*cpu_args))
    assert result.untyped_storage().device.type == DEVICE


@pytest.mark.parametrize("op", [torch.atan2, lambda a, b: torch.relu(a)], ids=["iterator", "pointwise"])
def test_result_memory_is_the_devices_and_is_freed_with_the_tensor(op):
    gc.collect()  # earlier tests' cyclic garbage holding device memory, freed by a collection in mid-test otherwise
    a, b = dev(make_cpu((256,), torch.float32)), dev(make_cpu((256,), torch.float32))
    op(a, b)  # warm the allocator's cache
    before = torch.openreg.memory_allocated()
    result = op(a, b)
    assert torch.openreg.memory_allocated() - before == result.untyped_storage().nbytes() == 1024
    del result
    assert torch.openreg.memory_allocated() == before
    # On the same thread, after the call, CPU allocations are host memory again.
    host = torch.empty(1 << 16)
    assert torch.openreg.memory_allocated() == before
    assert host.untyped_storage().device.type == "cpu"


def test_result_access_closes_with_the_call():
    # The access the kernel wrote its result through is closed with the call's other accesses (CpuAliases.h): once
    # the result is gone, its memory can go back to the device (orFree refuses memory with an open access).
    # 16 MiB: large enough for a segment of its own.
    a = b = torch.ones(1 << 22, device=DEVICE)
    torch.openreg.empty_cache()
    reserved = torch.openreg.memory_reserved()
    result = torch.atan2(a, b)
    assert torch.openreg.memory_reserved() > reserved
    del result
    torch.openreg.empty_cache()
    assert torch.openreg.memory_reserved() == reserved


@pytest.mark.slow
def test_kernel_error_frees_device_memory_and_ends_the_scope():
    # Earlier tests' cyclic garbage holding device memory would otherwise be freed by a collection in mid-test.
    gc.collect()
    x = dev(torch.ones(8))
    before = torch.openreg.memory_allocated()
    with pytest.raises(RuntimeError) as device_error:
        torch.bitwise_xor(x, x)  # float: the CPU kernel refuses after allocating the result
    with pytest.raises(RuntimeError) as cpu_error:
        torch.bitwise_xor(torch.ones(8), torch.ones(8))
    assert str(device_error.value) == str(cpu_error.value)
    assert torch.openreg.memory_allocated() == before
    torch.empty(1 << 16)
    assert torch.openreg.memory_allocated() == before


def test_out_errors_are_the_cpus():
    a, b = make_cpu((4, 5), torch.float32), make_cpu((4, 5), torch.float32)
    for out_cpu in (torch.empty(4, 5, dtype=torch.int64), torch.empty(4, 5, dtype=torch.bool)):
        with pytest.raises(RuntimeError) as cpu_error:
            torch.atan2(a, b, out=out_cpu)
        with pytest.raises(RuntimeError) as device_error:
            torch.atan2(dev(a), dev(b), out=dev(out_cpu))
        assert str(device_error.value) == str(cpu_error.value)
    wider = dev(torch.empty(4, 5, dtype=torch.float64))  # a float result may be written to a wider dtype
    torch.atan2(dev(a), dev(b), out=wider)
    assert_same(wider, torch.atan2(a, b, out=torch.empty(4, 5, dtype=torch.float64)))
    out = dev(torch.empty(3))
    with pytest.warns(UserWarning, match="resized"):
        torch.atan2(dev(a), dev(b), out=out)
    assert_same(out, torch.atan2(a, b))


_READ_RESULT = """
import ctypes
import torch
x = torch.tensor([1.5, -2.0, 3.25], device="openreg")
y = torch.atan2(x, x)  # allocated by the CPU kernel, in device memory
print("ready", flush=True)
print("y_bytes=" + ctypes.string_at(y.data_ptr(), 12).hex(), flush=True)
"""


@pytest.mark.slow
def test_result_memory_is_protected_after_the_call():
    proc = run_python(_READ_RESULT)
    assert "ready" in proc.stdout, proc.stderr
    assert "y_bytes=" not in proc.stdout
    assert proc.returncode == -signal.SIGSEGV, (proc.returncode, proc.stdout, proc.stderr)


def _conv_and_batch_norm(device):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 3, 12, 12, generator=g).to(device).requires_grad_()
    conv = torch.nn.Conv2d(3, 8, 3, padding=1)
    norm = torch.nn.BatchNorm2d(8)
    with torch.no_grad():
        conv.weight.copy_(torch.randn(conv.weight.shape, generator=g))
        conv.bias.copy_(torch.randn(conv.bias.shape, generator=g))
    conv, norm = conv.to(device), norm.to(device)
    grad = torch.randn(4, 8, 12, 12, generator=g).to(device)

    def step():
        y = norm(conv(x))
        y.backward(grad)
        return y

    return step, (x, conv.weight, conv.bias, norm.weight, norm.bias)


def test_convolution_and_batch_norm_results_are_device_memory():
    """Convolution and batch normalization, forward and backward, run with their allocations in device memory,
    oneDNN's buffers included (taken with raw_allocate, which needs the DataPtr's context to be its address, and
    given back with raw_deallocate by address alone): the CPU's values, and every byte back to the device once the
    tensors are gone."""
    cpu_step, cpu_tensors = _conv_and_batch_norm("cpu")
    expected = cpu_step()
    step, tensors = _conv_and_batch_norm(DEVICE)
    step()  # warm-up: first-call copies of the module's buffers
    for t in tensors:
        t.grad = None
    torch.openreg.empty_cache()
    reserved = torch.openreg.memory_reserved()
    results = [step()]
    assert_same(results[0], expected)
    for t, c in zip(tensors, cpu_tensors):
        assert_same(t.grad, c.grad)
    for t in tensors:
        t.grad = None
    del results
    torch.openreg.empty_cache()
    assert torch.openreg.memory_reserved() == reserved


# Activations whose backward reaches the fallback; a CPU kernel may take scratch memory with raw_allocate() (gelu's
# backward does for a strided gradient), which must be served inside the scope that puts results in device memory.
ACTIVATIONS = {
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
    "silu": torch.nn.functional.silu,
    "mish": torch.nn.functional.mish,
    "hardswish": torch.nn.functional.hardswish,
    "hardsigmoid": torch.nn.functional.hardsigmoid,
    "elu": torch.nn.functional.elu,
    "selu": torch.nn.functional.selu,
    "celu": torch.nn.functional.celu,
    "softplus": torch.nn.functional.softplus,
    "leaky_relu": torch.nn.functional.leaky_relu,
    "logsigmoid": torch.nn.functional.logsigmoid,
    "hardtanh": torch.nn.functional.hardtanh,
    "softshrink": torch.nn.functional.softshrink,
    "hardshrink": torch.nn.functional.hardshrink,
    "tanhshrink": torch.nn.functional.tanhshrink,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("gradient", ["transposed", "strided", "expanded"])
def test_activation_backward_with_a_non_contiguous_gradient_equals_cpu(name, gradient):
    fn = ACTIVATIONS[name]
    g = torch.Generator().manual_seed(5)
    x_cpu = torch.randn(10, 10, generator=g)
    # The view is taken on each device, so that the gradients' strides match.
    base_shape, view = {
        "transposed": ((10, 10), lambda t: t.t()),
        "strided": ((10, 20), lambda t: t[:, ::2]),
        "expanded": ((10, 1), lambda t: t.expand(10, 10)),
    }[gradient]
    grad_base = torch.randn(base_shape, generator=g)
    grads = []
    for x, base in ((x_cpu, grad_base), (dev(x_cpu), dev(grad_base))):
        x = x.clone().requires_grad_()
        fn(x).backward(view(base))
        grads.append(x.grad)
    assert_same(grads[1], grads[0])


def test_gelu_backward_called_directly_with_a_transposed_gradient():
    x = make_cpu((10, 10), torch.float32)
    grad = make_cpu((10, 10), torch.float32).t()
    expected = torch.ops.aten.gelu_backward(grad, x)
    assert_same(torch.ops.aten.gelu_backward(dev(grad), dev(x)), expected)
