"""torch.compile with the default backend (Inductor) on openreg.

Every test compiles the same function for the CPU and for openreg and
compares: bit for bit where Inductor emits the same kernels for both devices
(it does unless docs/compile.md says otherwise). Memory protection stays on:
a generated kernel that read a device address would crash the process.

Compiling costs one C++ compiler run per kernel, so the quick subset is small
and the rest is marked slow. The session compiles into its own Inductor cache
directory (the ``inductor_cache`` fixture), so no test depends on what other
processes cached.
"""

import copy
import re
import signal

import pytest
import torch
from torch._inductor.utils import run_and_get_code

from conftest import DEVICE, assert_all_same, assert_same, check_ok, make_cpu, parse_key_values, run_python


pytestmark = pytest.mark.usefixtures("inductor_cache")


def to_device(value):
    if isinstance(value, torch.Tensor):
        return value.to(DEVICE)
    return value


def compile_on_both(fn, *cpu_args, **compile_kwargs):
    """(openreg result, CPU result, openreg output code) of ``fn`` compiled
    separately for each device."""
    expected = torch.compile(fn, **compile_kwargs)(*cpu_args)
    actual, code = run_and_get_code(torch.compile(fn, **compile_kwargs), *map(to_device, cpu_args))
    return actual, expected, code


@pytest.mark.long
def test_registration_waits_for_dynamo_and_inductor_imports():
    """import torch imports neither Dynamo nor Inductor (they cost seconds);
    openreg registers when they are imported, and at once if torch_openreg is
    imported after them."""
    check = """
        import sys, torch
        {before}
        assert not any(name.startswith(("torch._dynamo", "torch._inductor")) for name in sys.modules) or {after_them}
        import torch_openreg
        from torch._dynamo.device_interface import get_interface_for_device
        from torch._inductor.codegen.common import get_device_op_overrides, get_scheduling_for_device
        import torch._inductor.compile_fx
        print(get_interface_for_device("openreg").__name__, get_scheduling_for_device("openreg").__name__,
              type(get_device_op_overrides("openreg")).__name__)
        """
    expected = "OpenRegInterface OpenRegScheduling OpenRegDeviceOpOverrides\n"
    assert check_ok(run_python(check.format(before="", after_them=False))) == expected
    after = "import torch._dynamo.device_interface, torch._inductor.compile_fx"
    assert (
        check_ok(run_python(check.format(before=after, after_them=True), TORCH_DEVICE_BACKEND_AUTOLOAD=0)) == expected
    )


def test_device_interface_answers_for_openreg(default_streams):
    from torch._dynamo.device_interface import get_interface_for_device

    interface = get_interface_for_device(DEVICE)
    assert interface.get_device_properties(0).multi_processor_count >= 1
    assert interface.Worker.get_device_properties(f"{DEVICE}:0").total_memory > 0
    assert interface.current_device() == torch.openreg.current_device()
    assert interface.get_raw_stream(0) == 0  # the default stream
    stream = torch.openreg.Stream()
    interface._set_stream_by_id(stream.stream_id, stream.device_index, stream.device_type)
    assert interface.current_stream() == stream
    assert interface.get_raw_stream(0) == stream.openreg_stream != 0
    assert interface.is_dtype_supported(torch.bfloat16)


def test_call_on_host_hands_the_kernel_host_views():
    """What the generated wrapper's call_on_host gives a kernel: a CPU tensor
    over the same bytes, offset, sizes and strides for each openreg tensor;
    other arguments unchanged."""
    from torch_openreg._C import _call_on_host

    x = make_cpu((4, 6))
    device_view = x.to(DEVICE).t()[1:]
    seen = _call_on_host(lambda t, n, c: (t.device.type, t.clone(), t.stride(), n, c is x), device_view, 7, x)
    assert seen[0] == "cpu" and torch.equal(seen[1], x.t()[1:]) and seen[2] == x.t()[1:].stride()
    assert seen[3:] == (7, True)
    out = torch.empty(3, device=DEVICE)
    _call_on_host(lambda t: t.fill_(2.5), out)  # kernels write in place
    assert_same(out, torch.full((3,), 2.5))


def test_call_on_host_bad_arguments():
    from torch_openreg._C import _call_on_host

    with pytest.raises(ValueError, match="needs the kernel"):
        _call_on_host()
    if torch.openreg.device_count() > 1:
        with pytest.raises(RuntimeError, match="tensors on two devices, openreg:0 and openreg:1"):
            _call_on_host(lambda *args: None, torch.ones(1, device="openreg:0"), torch.ones(1, device="openreg:1"))


@pytest.mark.slow
def test_pointwise_kernel_runs_on_host_views():
    def fn(x, y):
        return (x * y + 1).relu()

    x, y = make_cpu((8, 33), seed=1), make_cpu((8, 33), seed=2)
    actual, expected, code = compile_on_both(fn, x, y)
    assert_same(actual, expected)
    # The generated wrapper calls its C++ kernel through the host-access call.
    assert any("call_on_host(cpp_fused" in line for line in "\n".join(code).splitlines())


@pytest.mark.slow
def test_kernel_called_without_host_access_faults():
    """The negative control: the same compiled function, with the host-access
    call replaced by a direct call, hands the kernel device addresses, and the
    first read faults. So a passing compiled test proves the kernels read
    only host views."""
    proc = run_python(
        """
        import torch, torch_openreg._C as C
        C._call_on_host = lambda kernel, *args: kernel(*args)
        x = torch.ones(64, device="openreg")
        print(torch.compile(lambda t: t * 2 + 1)(x).cpu().sum().item())
        """,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGSEGV, (proc.returncode, proc.stdout, proc.stderr[-2000:])


@pytest.mark.slow
def test_reduction_fused_with_pointwise():
    """softmax: reductions and pointwise nodes fused into one C++ kernel (the
    scheduler's GPU-only loop re-indexing crashed here)."""
    actual, expected, _ = compile_on_both(lambda x: torch.softmax(x, -1) * 2, make_cpu((6, 70), seed=3))
    assert_same(actual, expected)


F = torch.nn.functional


def reductions_and_norms(x, w, b, rows):
    return (
        x.sum(-1),
        F.log_softmax(x, 0),
        x - x.mean((0,), keepdim=True),
        torch.var_mean(x, -1),
        F.layer_norm(x, (40,)),
        F.batch_norm(rows, None, None, w, b, training=True),
        (rows.reshape(40, 20) * torch.rsqrt(rows.reshape(40, 20).pow(2).mean(-1, keepdim=True) + 1e-6)).reshape(
            rows.shape
        ),
    )


def matmul_and_convolution(x, w, b, image, kernel):
    return (
        F.relu(F.linear(x, w, b)),
        (x @ w.t()).sigmoid() * 2,
        torch.bmm(x.view(2, 4, 16), w.view(2, 4, 16).transpose(1, 2)) + 1,
        F.conv2d(image, kernel, b[:4]).relu(),
    )


def indexing_and_views(x, index, weight, target):
    return (
        x.t().reshape(3, -1)[1:, ::2].contiguous() + x.view(-1)[:1],
        x.index_put((index,), torch.tensor(3.0)),
        F.embedding(index, weight).sum(0),
        F.cross_entropy(x, target),
        x.cumsum(1),
        x.sort(-1).values,
        x.argmax(-1),
        F.max_pool2d(x.view(1, 2, 4, 3), 2),
        F.avg_pool2d(x.view(1, 2, 4, 3), 2),
    )


def dtypes(x, integers, scalar):
    return (
        (x.half() * 3).sum(-1),
        torch.softmax(x.bfloat16(), -1),
        (integers * 3 // 2) % 5,
        x * scalar,
    )


# Functions whose openreg kernels are the CPU's, so results are bit for bit.
SAME_CODE_CASES = {
    "reductions_and_norms": (
        reductions_and_norms,
        lambda: (make_cpu((8, 40)), make_cpu(4, seed=1), make_cpu(4, seed=2), make_cpu((8, 4, 5, 5), seed=3)),
    ),
    "matmul_and_convolution": (
        matmul_and_convolution,
        lambda: (
            make_cpu((8, 16)),
            make_cpu((8, 16), seed=1),
            make_cpu(8, seed=2),
            make_cpu((2, 3, 8, 8), seed=3),
            make_cpu((4, 3, 3, 3), seed=4),
        ),
    ),
    "indexing_and_views": (
        indexing_and_views,
        lambda: (
            make_cpu((8, 3)),
            make_cpu(4, torch.int64, low=0, high=7),
            make_cpu((8, 5), seed=1),
            make_cpu(8, torch.int64, low=0, high=2, seed=2),
        ),
    ),
    "dtypes": (dtypes, lambda: (make_cpu((8, 60)), make_cpu((8, 6), torch.int64), torch.tensor(2.5))),
}


@pytest.mark.long
@pytest.mark.parametrize("name", sorted(SAME_CODE_CASES))
def test_same_kernels_as_cpu(name):
    fn, make_args = SAME_CODE_CASES[name]
    actual, expected, _ = compile_on_both(fn, *make_args())
    assert_all_same(actual, expected)


@pytest.mark.long
def test_pointwise_cat_agrees_within_tolerance():
    """Inductor writes `cat` of computed inputs as one pointwise kernel on
    openreg and as one kernel per input on the CPU (docs/compile.md): the
    results agree within the tolerances of Inductor's own OpInfo tests."""
    fn = lambda x, y: torch.cat([x.sin(), y.cos()], 1)  # noqa: E731
    actual, expected, _ = compile_on_both(fn, make_cpu((8, 6)), make_cpu((8, 3), seed=1))
    assert actual.device.type == DEVICE and actual.dtype == expected.dtype and actual.stride() == expected.stride()
    torch.testing.assert_close(actual.cpu(), expected)


@pytest.mark.long
def test_mutated_inputs_and_in_place_ops():
    def fn(x, y):
        x.add_(1).mul_(2)
        y[1:3] = x[0]
        return x.sum()

    x, y = make_cpu((4, 6)), make_cpu((4, 6), seed=1)
    xd, yd = x.to(DEVICE), y.to(DEVICE)
    expected = torch.compile(fn)(x, y)
    actual = torch.compile(fn)(xd, yd)
    assert_same(actual, expected)
    assert_same(xd, x)
    assert_same(yd, y)


@pytest.mark.long
def test_random_ops_match_compiled_cpu_and_with_fallback_random_eager():
    """Inductor's C++ kernels draw random numbers with their own generator
    seeded from the device's generator; openreg's generator is the CPU's
    algorithm, so the compiled results equal the compiled CPU's for the same
    seed. With config.fallback_random, random ops run eagerly and equal eager
    results."""

    def fn(x):
        return x + torch.rand_like(x), F.dropout(x, 0.5, True)

    x = make_cpu((8, 6))
    torch.manual_seed(7)
    expected = torch.compile(fn)(x)
    torch.manual_seed(7)
    actual = torch.compile(fn)(x.to(DEVICE))
    assert_all_same(actual, expected)

    with torch._inductor.config.patch(fallback_random=True):
        torch.manual_seed(7)
        eager = fn(x.to(DEVICE))
        torch.manual_seed(7)
        compiled = torch.compile(lambda t: fn(t))(x.to(DEVICE))
    assert_all_same(compiled, tuple(t.cpu() for t in eager))


# (input shape, weight shape, input format, weight format, dtype, transposed)
CONVOLUTION_LAYOUT_CASES = [
    ((4, 3, 8, 8), (6, 3, 3, 3), torch.contiguous_format, torch.contiguous_format, torch.float32, False),
    ((4, 3, 8, 8), (6, 3, 3, 3), torch.channels_last, torch.contiguous_format, torch.float32, False),
    ((4, 3, 8, 8), (6, 3, 3, 3), torch.contiguous_format, torch.channels_last, torch.float32, False),
    ((4, 3, 8, 8), (6, 3, 3, 3), torch.channels_last, torch.channels_last, torch.float64, False),
    ((4, 3, 8, 8), (3, 6, 3, 3), torch.channels_last, torch.contiguous_format, torch.float32, True),
    ((2, 3, 4, 6, 6), (4, 3, 3, 3, 3), torch.channels_last_3d, torch.contiguous_format, torch.float32, False),
    ((2, 3, 10), (4, 3, 3), torch.contiguous_format, torch.contiguous_format, torch.float32, False),
]


@pytest.mark.parametrize("case", CONVOLUTION_LAYOUT_CASES, ids=lambda case: f"{case[0]}-{case[2]}-{case[3]}-{case[4]}")
def test_fake_tensors_predict_the_eager_convolution_layout(case):
    """openreg's convolution runs the CPU's kernel and returns its layout
    (channels-last for channels-last inputs or weights); fake tensors, from
    which Dynamo and Inductor compile, predict that layout for the output and
    the three gradients (FakeTensor's own rule predicts contiguous for a
    PrivateUse1 device)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    input_shape, weight_shape, input_format, weight_format, dtype, transposed = case
    x = make_cpu(input_shape, dtype).contiguous(memory_format=input_format)
    w = make_cpu(weight_shape, dtype, seed=1).contiguous(memory_format=weight_format)
    b = make_cpu(weight_shape[1] if transposed else weight_shape[0], dtype, seed=2)
    spatial = len(weight_shape) - 2
    options = dict(
        stride=[1] * spatial,
        padding=[1] * spatial,
        dilation=[1] * spatial,
        transposed=transposed,
        output_padding=[0] * spatial,
        groups=1,
    )

    def forward_and_gradients(x, w, b):
        out = torch.ops.aten.convolution(x, w, b, **options)
        grads = torch.ops.aten.convolution_backward(
            torch.ones_like(out), x, w, [b.numel()], **options, output_mask=[True, True, True]
        )
        return out, *grads

    on_cpu = forward_and_gradients(x, w, b)
    on_device = forward_and_gradients(x.to(DEVICE), w.to(DEVICE), b.to(DEVICE))
    fake_mode = FakeTensorMode()
    fakes = [fake_mode.from_tensor(t.to(DEVICE)) for t in (x, w, b)]
    with fake_mode:
        predicted = forward_and_gradients(*fakes)
    for actual, expected, fake in zip(on_device, on_cpu, predicted):
        assert_same(actual, expected)
        assert (fake.device.type, fake.shape, fake.stride()) == (DEVICE, expected.shape, expected.stride())


def checked_layouts(code):
    """The sizes and strides the generated wrapper asserts, sorted: per buffer in torch 2.13
    (``assert_size_stride(buf3, (4, 8, 10, 10), (800, 1, 80, 8), ...)``), grouped per kernel's inputs from 2.14
    (``assert_size_stride_grouped((relu, w), ((4, 8, 10, 10), ...), ((800, 1, 80, 8), ...), 'input')``)."""
    lines = [line for line in "\n".join(code).splitlines() if "assert_size_stride" in line]
    return sorted(shape for line in lines for shape in re.findall(r"\((?:\d+, )+\d*\)", line))


@pytest.mark.long
def test_convolutions_run_channels_last_as_on_cpu():
    """Inductor's layout optimization runs a network's convolutions
    channels-last on the CPU (oneDNN); openreg's convolutions are the CPU's
    kernels and get the same layouts and results, forward and backward."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 3, padding=1, bias=False)
    )
    x = make_cpu((4, 3, 10, 10))

    def forward_backward(model, x):
        out = model(x)
        out.sum().backward()
        return out, *(p.grad for p in model.parameters())

    expected, cpu_code = run_and_get_code(torch.compile(forward_backward), model, x)
    actual, code = run_and_get_code(torch.compile(forward_backward), copy.deepcopy(model).to(DEVICE), x.to(DEVICE))
    assert_all_same(actual, expected)
    assert checked_layouts(code) == checked_layouts(cpu_code)
    assert "(800, 1, 80, 8)" in checked_layouts(code)  # the first convolution's output, channels-last


def make_mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.LayerNorm(16), torch.nn.GELU(), torch.nn.Linear(16, 4))


@pytest.mark.long
def test_module_forward_backward_and_compiled_optimizer_step():
    """Two training steps of a compiled module with a compiled Adam step:
    losses, gradients and parameters are the compiled CPU's bit for bit. Adam
    is told its implementation: by default it takes the multi-tensor (foreach)
    one on openreg, as on CUDA, and the single-tensor one on the CPU, which
    round differently."""

    def train(model, x, target, steps=2):
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01, foreach=False)
        compiled_model = torch.compile(model)

        @torch.compile
        def step():
            optimizer.step()

        results = []
        for _ in range(steps):
            optimizer.zero_grad()
            loss = F.mse_loss(compiled_model(x), target)
            loss.backward()
            results += [loss.detach(), *(p.grad.clone() for p in model.parameters())]
            step()
        return results + [p.detach() for p in model.parameters()]

    x, target = make_cpu((8, 12)), make_cpu((8, 4), seed=1)
    expected = train(make_mlp(), x, target)
    actual = train(make_mlp().to(DEVICE), x.to(DEVICE), target.to(DEVICE))
    assert_all_same(actual, expected)


def cross_entropy_head(h, w, b, y):
    return F.cross_entropy(F.linear(torch.tanh(h), w, b), y)


def bert_classifier_head(hidden, pooler_w, pooler_b, classifier_w, classifier_b, labels):
    # BERT's pooler (dense + tanh of the first token) and sequence
    # classification head (dropout + linear), with its loss.
    pooled = torch.tanh(F.linear(hidden[:, 0], pooler_w, pooler_b))
    logits = F.linear(F.dropout(pooled, 0.1, training=True), classifier_w, classifier_b)
    return F.cross_entropy(logits, labels)


def convolutions_with_bias(image, kernel1, bias1, kernel2, bias2):
    hidden = F.relu(F.conv2d(image, kernel1, bias1, padding=1))
    return F.conv2d(hidden, kernel2, bias2, stride=2).square().mean()


TRAINING_CASES = {
    "cross_entropy_head": (
        cross_entropy_head,
        lambda: (
            make_cpu((8, 16)),
            make_cpu((3, 16), seed=1),
            make_cpu(3, seed=2),
            make_cpu(8, torch.int64, low=0, high=2),
        ),
    ),
    "bert_classifier_head": (
        bert_classifier_head,
        lambda: (
            make_cpu((4, 6, 32)),
            make_cpu((32, 32), seed=1),
            make_cpu(32, seed=2),
            make_cpu((2, 32), seed=3),
            make_cpu(2, seed=4),
            make_cpu(4, torch.int64, low=0, high=1),
        ),
    ),
    "convolutions_with_bias": (
        convolutions_with_bias,
        lambda: (
            make_cpu((2, 3, 12, 12)),
            make_cpu((8, 3, 3, 3), seed=1),
            make_cpu(8, seed=2),
            make_cpu((4, 8, 3, 3), seed=3),
            make_cpu(4, seed=4),
        ),
    ),
}


def generated_kernels(codes):
    return [kernel for code in codes for kernel in re.findall(r"r\'\'\'(.*?)\'\'\'", code, re.DOTALL)]


@pytest.mark.long
@pytest.mark.parametrize("name", sorted(TRAINING_CASES))
def test_training_step_generates_the_cpus_kernels(name):
    """Forward and backward compiled for openreg are the CPU's C++ kernels,
    so the loss and every gradient are the compiled CPU's bit for bit. Where
    Inductor decides by device (what to store rather than recompute, whether a
    convolution adds its own bias), openreg gets the CPU's answer
    (docs/compile.md)."""
    fn, make_args = TRAINING_CASES[name]

    def step(*args):
        torch.manual_seed(0)
        leaves = [a.detach().requires_grad_() if a.is_floating_point() else a for a in args]
        compiled = torch.compile(fn)
        _, codes = run_and_get_code(lambda: compiled(*leaves).backward())
        return [a.grad for a in leaves if a.is_floating_point()], codes

    torch._dynamo.reset()
    expected, cpu_codes = step(*make_args())
    torch._dynamo.reset()
    actual, openreg_codes = step(*map(to_device, make_args()))
    assert_all_same(actual, expected)
    assert generated_kernels(openreg_codes) == generated_kernels(cpu_codes)
    assert all(len(generated_kernels([code])) > 0 for code in openreg_codes)


@pytest.mark.long
def test_dynamic_shapes_marked_and_automatic():
    def fn(x):
        return torch.softmax(x, -1) + x.shape[0]

    counter = torch._dynamo.testing.CompileCounterWithBackend("inductor")
    compiled = torch.compile(fn, backend=counter)
    first = make_cpu((4, 10))
    torch._dynamo.mark_dynamic(first_device := first.to(DEVICE), 0)
    assert_same(compiled(first_device), torch.compile(fn)(first))
    for rows in (5, 7):
        x = make_cpu((rows, 10), seed=rows)
        assert_same(compiled(x.to(DEVICE)), fn(x))
    assert counter.frame_count == 1  # one dynamic graph served every size

    automatic = torch._dynamo.testing.CompileCounterWithBackend("inductor")
    compiled = torch.compile(lambda x: x.cos() * 2, backend=automatic)
    for columns in (3, 4, 6):
        x = make_cpu((2, columns), seed=columns)
        assert_same(compiled(x.to(DEVICE)), torch.compile(lambda x: x.cos() * 2)(x))
    assert automatic.frame_count == 2  # static first, then one dynamic graph


@pytest.mark.long
def test_graph_break():
    def fn(x):
        y = x.sin()
        torch._dynamo.graph_break()
        return y.exp() + 1

    counter = torch._dynamo.testing.CompileCounterWithBackend("inductor")
    x = make_cpu((5, 5))
    assert_same(torch.compile(fn, backend=counter)(x.to(DEVICE)), torch.compile(fn)(x))
    assert counter.frame_count == 2


@pytest.mark.long
def test_autocast_inside_compile():
    """Under autocast, the compiled result has eager autocast's dtypes on
    openreg (CUDA's lists) and its values within float16 tolerance."""

    def fn(x, w):
        with torch.autocast(DEVICE, dtype=torch.float16):
            y = x @ w
            return y, y.float().softmax(-1)

    x, w = make_cpu((8, 16)).to(DEVICE), make_cpu((16, 8), seed=1).to(DEVICE)
    eager = fn(x, w)
    compiled = torch.compile(fn)(x, w)
    for a, e in zip(compiled, eager):
        assert a.device.type == DEVICE and a.dtype == e.dtype
        torch.testing.assert_close(a.cpu(), e.cpu(), atol=1e-3, rtol=1e-3)
    assert compiled[0].dtype == torch.float16


@pytest.mark.long
def test_mode_max_autotune():
    fn = lambda x, w: (x @ w).relu() + 1  # noqa: E731
    x, w = make_cpu((16, 32)), make_cpu((32, 8), seed=1)
    actual, expected, _ = compile_on_both(fn, x, w, mode="max-autotune")
    torch.testing.assert_close(actual.cpu(), expected)


@pytest.mark.long
def test_mode_reduce_overhead_runs_and_says_no_device_graph():
    fn = lambda x: x.sin() * 3  # noqa: E731
    x = make_cpu((4, 4))
    with pytest.warns(UserWarning, match="capture no device graph"):
        actual = torch.compile(fn, mode="reduce-overhead")(x.to(DEVICE))
    assert_same(actual, torch.compile(fn)(x))


# Bad input.


@pytest.mark.slow
def test_compiled_code_runs_on_the_inputs_device_whatever_the_current_device(restore_device):
    # As CUDA's wrapper does: the graph runs under its tensors' device guard.
    fn = lambda x, y: (x * y).sin() + x.sum()  # noqa: E731
    a_cpu, b_cpu = make_cpu((16,), seed=1), make_cpu((16,), seed=2)
    expected = torch.compile(fn)(a_cpu, b_cpu)
    compiled = torch.compile(fn)
    torch.openreg.set_device(0)
    on_1 = compiled(a_cpu.to("openreg:1"), b_cpu.to("openreg:1"))
    assert on_1.device == torch.device("openreg:1")
    assert_same(on_1, expected)
    # The same code after a call on openreg:0, and with openreg:1 current and the inputs on openreg:0.
    assert_same(compiled(a_cpu.to("openreg:0"), b_cpu.to("openreg:0")), expected)
    torch.openreg.set_device(1)
    on_0 = compiled(a_cpu.to("openreg:0"), b_cpu.to("openreg:0"))
    assert on_0.device == torch.device("openreg:0")
    assert_same(on_0, expected)
    assert torch.openreg.current_device() == 1


@pytest.mark.slow
def test_compiled_module_moved_to_another_device(restore_device):
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    x = make_cpu((5, 8), seed=3)
    expected = torch.compile(copy.deepcopy(module))(x)
    torch.openreg.set_device(0)
    actual = torch.compile(module.to("openreg:1"))(x.to("openreg:1"))
    assert actual.device == torch.device("openreg:1")
    assert_same(actual, expected)


def test_mixing_cpu_and_openreg_tensors_raises_the_eager_error():
    x, y = torch.ones(3, device=DEVICE), torch.ones(3)
    with pytest.raises(Exception, match="Expected all tensors to be on the same device"):
        x + y
    with pytest.raises(Exception, match="Expected all tensors to be on the same device"):
        torch.compile(lambda a, b: a + b)(x, y)


def test_fullgraph_reports_the_graph_break_reason_as_on_cpu():
    def fn(x):
        y = x * 2
        print("break")
        return y + 1

    def reason(device):
        with pytest.raises(torch._dynamo.exc.Unsupported) as info:
            torch.compile(fn, fullgraph=True)(torch.ones(2, device=device))
        # The message names the source line, which is the same for both.
        return str(info.value)

    assert reason(DEVICE) == reason("cpu")
    assert "print" in reason(DEVICE)


def test_backend_named_after_the_device_is_listed_and_refuses_graphs_of_other_devices():
    """torch.compile(fn, backend="openreg") is found through Dynamo's backend
    entry points; a graph whose inputs are on another device (a model left on
    the CPU) raises, naming the device."""
    assert "openreg" in torch._dynamo.list_backends()
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed, match="this graph has inputs on cpu"):
        torch.compile(lambda x: x + 1, backend="openreg")(make_cpu(4))


@pytest.mark.long
def test_backend_named_after_the_device_is_inductor():
    """backend="openreg" compiles as the default backend does (the same
    results bit for bit), and takes mode= or options= as backend="inductor"
    does, checking the options' names."""
    fn = lambda x, w: torch.softmax(x @ w, -1).sum(0)  # noqa: E731
    x, w = make_cpu((8, 6)), make_cpu((6, 5), seed=1)
    torch._dynamo.reset()
    expected = torch.compile(fn)(x, w)
    for kwargs in ({}, {"mode": "max-autotune-no-cudagraphs"}, {"options": {"epilogue_fusion": False}}):
        torch._dynamo.reset()
        assert_same(torch.compile(fn, backend="openreg", **kwargs)(x.to(DEVICE), w.to(DEVICE)), expected)
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed, match="Unexpected optimization option no_such"):
        torch.compile(fn, backend="openreg", options={"no_such": 1})(x.to(DEVICE), w.to(DEVICE))


@pytest.mark.slow
def test_fx_wrapper_fails_naming_the_device_as_it_fails_on_the_cpu():
    """openreg refuses the FX wrapper because Inductor's FX wrapper converts Triton kernels only, and openreg's are
    the CPU's C++ kernels: the CPU fails the same setting."""
    setting = "fx_wrapper"
    with torch._inductor.config.patch({setting: True}):
        with pytest.raises(Exception) as info:
            torch.compile(lambda x: x + 1)(torch.ones(2, device=DEVICE))
        assert "openreg" in str(info.value) and setting in str(info.value)
        assert not isinstance(info.value, KeyError)
        torch._dynamo.reset()
        with pytest.raises(Exception, match="FX conversion only supports Triton kernels"):
            torch.compile(lambda x: x + 1)(torch.ones(2))
    torch._dynamo.reset()


CACHED_FUNCTION = """
import torch
from torch._dynamo.utils import counters

x = torch.arange(24, dtype=torch.float32).reshape(4, 6)
for device in ("openreg", "cpu"):
    result = torch.compile(lambda t: (t * 3 - 20).relu())(x.to(device))
    assert result.device.type == device and torch.equal(result.cpu(), (x * 3 - 20).relu())
    print(device, "HIT=", counters["inductor"]["fxgraph_cache_hit"])
    print(device, "MISS=", counters["inductor"]["fxgraph_cache_miss"])
    torch._dynamo.reset()
"""


@pytest.mark.long
def test_fx_graph_cache_hits_in_a_second_process_and_stays_per_device(tmp_path):
    """A second process compiling the same function on openreg takes the
    compiled graph from the FX graph cache (and its kernels from the code
    cache); a CPU compilation of the same function never gets the openreg
    entry (the key holds the inputs' device)."""

    def run():
        return parse_key_values(check_ok(run_python(CACHED_FUNCTION, timeout=600, TORCHINDUCTOR_CACHE_DIR=tmp_path)))

    # First process: openreg misses; then the CPU misses too, although the
    # openreg entry of the same graph is in the cache.
    assert run() == {"openreg HIT": "0", "openreg MISS": "1", "cpu HIT": "0", "cpu MISS": "2"}
    # Second process: both hit, each its own entry.
    assert run() == {"openreg HIT": "1", "openreg MISS": "0", "cpu HIT": "2", "cpu MISS": "0"}


@pytest.mark.long
def test_compiling_for_the_cpu_is_unchanged_by_torch_openreg(tmp_path):
    code = """
        import torch
        from torch._inductor.utils import run_and_get_code

        def fn(x, y):
            return torch.softmax(x @ y, -1) / 3 + torch.nn.functional.layer_norm(x, (8,))

        _, code = run_and_get_code(torch.compile(fn), torch.randn(8, 8), torch.randn(8, 8))
        print("\\n".join(line for line in "\\n".join(code).splitlines() if not line.startswith("# AOT ID")))

        # torch testing's freeze_rng_state saves the accelerator's RNG state
        # under no_dispatch(): Dynamo must not trace into torch.openreg there.
        from torch.testing._utils import freeze_rng_state

        def dropout_with_frozen_rng(x):
            with freeze_rng_state():
                return torch.nn.functional.dropout(x, 0.5)

        torch.manual_seed(0)
        print(torch.compile(dropout_with_frozen_rng, backend="eager")(torch.ones(16)))
        """
    # No FX graph cache (each process writes its code), but a shared code
    # cache: the second process loads the kernels the first compiled.
    env = {"TORCHINDUCTOR_FX_GRAPH_CACHE": 0, "TORCHINDUCTOR_CACHE_DIR": tmp_path}
    without = check_ok(run_python(code, timeout=600, TORCH_DEVICE_BACKEND_AUTOLOAD=0, **env))
    with_openreg = check_ok(run_python(code, timeout=600, **env))
    assert "cpp_fused" in without
    assert with_openreg == without
