"""Foreach operators (torch._foreach_*) on openreg: multi-tensor kernels, as CUDA registers them, that check the
lists once and run each index's per-tensor operator on the stub operators' direct path. Every overload equals ATen's
composite loop on the CPU bit for bit (values, dtypes, strides, writes through aliases), raises what the CPU raises
for bad lists, and the optimizers' foreach steps equal the CPU's."""

import pytest
import torch
import torch_openreg  # noqa: F401

from conftest import DEVICE, assert_same, make_cpu


def cpu_lists(dtypes, shape=(4, 5), seed=0, positive=False):
    """One list per entry of ``dtypes``: tensors of those dtypes (one list may mix dtypes)."""
    lists = []
    for k, list_dtypes in enumerate(dtypes):
        tensors = [make_cpu(shape, dtype, seed=seed + 10 * k + i) for i, dtype in enumerate(list_dtypes)]
        if positive:
            tensors = [t.abs() + 1 if t.dtype != torch.bool else t for t in tensors]
        lists.append(tensors)
    return lists


def to_device(value):
    if isinstance(value, list):
        return [to_device(v) for v in value]
    if isinstance(value, torch.Tensor) and value.dim() > 0:
        return value.to(DEVICE)
    return value  # scalars and 0-dim CPU tensors stay


def outcome(fn, args):
    try:
        return fn(*args)
    except (RuntimeError, TypeError, ValueError) as error:
        return type(error)


def assert_lists_same(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        if a.device.type == "cpu":  # an index the composite loop ran on the CPU
            assert torch.equal(a, e) and a.dtype == e.dtype
        else:
            assert_same(a, e)


def check(fn, cpu_args, in_place):
    """Runs ``fn`` on the CPU lists and on their device copies; results, the written list and the exception type
    must agree."""
    device_args = to_device(cpu_args)
    expected = outcome(fn, cpu_args)
    actual = outcome(fn, device_args)
    if isinstance(expected, type):
        assert actual is expected, (actual, expected)
        return
    assert not isinstance(actual, type), actual
    if in_place:
        assert_lists_same(device_args[0], cpu_args[0])
    else:
        assert_lists_same(actual, expected)
        assert_lists_same(device_args[0], cpu_args[0])  # self untouched


F32 = [torch.float32] * 3
MIXED = [torch.float32, torch.float64, torch.float16]
UNARY = ["neg", "exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid"]


@pytest.mark.parametrize("in_place", [False, True], ids=["functional", "in_place"])
@pytest.mark.parametrize("name", UNARY)
def test_unary(name, in_place):
    fn = getattr(torch, f"_foreach_{name}{'_' if in_place else ''}")
    for dtypes in (F32, MIXED, [torch.complex64, torch.float64]):
        check(fn, cpu_lists([dtypes], positive=True), in_place)


BINARY_CASES = {
    # name: (call, lists) with lists the number of tensor lists it takes
    "add.List": (lambda f, s, o: f(s, o, alpha=0.375), 2),
    "sub.List": (lambda f, s, o: f(s, o, alpha=-2.5), 2),
    "mul.List": (lambda f, s, o: f(s, o), 2),
    "div.List": (lambda f, s, o: f(s, o), 2),
    "lerp.List": (lambda f, s, e, w: f(s, e, w), 3),
    "add.Scalar": (lambda f, s: f(s, 0.3), 1),
    "sub.Scalar": (lambda f, s: f(s, 7), 1),
    "mul.Scalar": (lambda f, s: f(s, 0.9), 1),
    "div.Scalar": (lambda f, s: f(s, 3.0), 1),
    "add.ScalarList": (lambda f, s: f(s, [0.25, -1, 3.5][: len(s)]), 1),
    "sub.ScalarList": (lambda f, s: f(s, [0.5, 2, -0.1][: len(s)]), 1),
    "mul.ScalarList": (lambda f, s: f(s, [1.5, -3, 0.7][: len(s)]), 1),
    "div.ScalarList": (lambda f, s: f(s, [0.3, 7, 2.5][: len(s)]), 1),
    "addcmul.Scalar": (lambda f, s, a, b: f(s, a, b, value=0.1), 3),
    "addcdiv.Scalar": (lambda f, s, a, b: f(s, a, b, value=-0.7), 3),
    "addcmul.ScalarList": (lambda f, s, a, b: f(s, a, b, [0.1, 2.0, -3.0][: len(s)]), 3),
    "addcdiv.ScalarList": (lambda f, s, a, b: f(s, a, b, [0.3, -1.0, 0.9][: len(s)]), 3),
    "lerp.Scalar": (lambda f, s, e: f(s, e, 0.3), 2),
    "lerp.ScalarList": (lambda f, s, e: f(s, e, [0.1, 0.5, 0.9][: len(s)]), 2),
}


def binary(name, in_place):
    call, n_lists = BINARY_CASES[name]
    fn = getattr(torch, f"_foreach_{name.split('.')[0]}{'_' if in_place else ''}")
    return (lambda *lists: call(fn, *lists)), n_lists


@pytest.mark.parametrize("in_place", [False, True], ids=["functional", "in_place"])
@pytest.mark.parametrize("name", list(BINARY_CASES))
def test_binary_and_pointwise(name, in_place):
    fn, n_lists = binary(name, in_place)
    # One dtype; mixed dtypes across indices (float16 takes the host path for scalars); integers, whose Scalar
    # overloads promote (functional) or raise (in-place) as on the CPU; complex.
    for dtypes in (F32, MIXED, [torch.int64, torch.int32, torch.int8], [torch.complex64, torch.complex128]):
        check(fn, cpu_lists([dtypes] * n_lists, positive=True), in_place)


@pytest.mark.parametrize("name", ["add.List", "mul.List", "addcmul.Scalar", "lerp.List"])
def test_lists_mixing_dtypes_promote_per_index(name):
    fn, n_lists = binary(name, in_place=False)
    lists = cpu_lists([[torch.float32, torch.float64]] + [[torch.float64, torch.float32]] * (n_lists - 1))
    check(fn, lists, in_place=False)
    fn, _ = binary(name, in_place=True)
    check(fn, lists, in_place=True)


def check_views(fn, cpu_lists, view, in_place):
    """``check`` with ``view`` (e.g. a transpose) applied to every tensor on each side after the move."""
    device_lists = [[view(t.to(DEVICE)) for t in tensors] for tensors in cpu_lists]
    cpu_lists = [[view(t) for t in tensors] for tensors in cpu_lists]
    expected = fn(*cpu_lists)
    actual = fn(*device_lists)
    assert_lists_same(device_lists[0] if in_place else actual, cpu_lists[0] if in_place else expected)


def test_non_contiguous_and_broadcast_operands():
    base = [make_cpu((6, 5), seed=i) for i in range(3)]
    other = [make_cpu((6, 5), seed=10 + i) for i in range(3)]
    for in_place in (False, True):
        for view in (lambda t: t[::2], lambda t: t.t(), lambda t: t[:, 1:4]):
            fn, _ = binary("add.List", in_place)
            check_views(fn, [[t.clone() for t in base], other], view, in_place)
            fn, _ = binary("mul.Scalar", in_place)
            check_views(fn, [[t.clone() for t in base]], view, in_place)
            fn, _ = binary("addcdiv.Scalar", in_place)
            check_views(fn, [[t.clone() for t in base], other, [t.abs() + 1 for t in other]], view, in_place)
    # A row broadcast against each tensor (functional only: in place it could not hold the result's shape).
    fn, _ = binary("mul.List", in_place=False)
    check(fn, [base, [make_cpu((5,), seed=20 + i) for i in range(3)]], in_place=False)


def test_cpu_scalar_tensors_in_a_list():
    selfs = [make_cpu((4,), seed=i) for i in range(3)]
    others = [torch.tensor(2.5), torch.tensor(-1.0, dtype=torch.float64), torch.tensor(3)]
    for in_place in (False, True):
        fn, _ = binary("add.List", in_place)
        check(fn, [[t.clone() for t in selfs], others], in_place)
    # A functional call whose index holds only 0-dim CPU tensors runs that index on the CPU, as the loop does.
    fn, _ = binary("mul.List", in_place=False)
    check(lambda s, o: fn(s, o), [[torch.tensor(2.0)] + selfs[1:], [torch.tensor(3.0)] + selfs[1:]], in_place=False)


def test_scalar_values_convert_as_the_cpu_casts():
    # int8 wraps 300 as the CPU's cast does; bool stays bool; a float scalar on float64 keeps its double value.
    cases = [
        ("add.Scalar", [make_cpu((5,), torch.int8, seed=1)], 300),
        ("mul.Scalar", [make_cpu((5,), torch.bool, seed=2)], True),
        ("add.Scalar", [make_cpu((5,), torch.float64, seed=3)], 0.1),
        ("mul.Scalar", [make_cpu((5,), torch.float32, seed=4)], 1e300),
        ("mul.Scalar", [make_cpu((5,), torch.bfloat16, seed=5)], 0.1),
        ("sub.Scalar", [make_cpu((5,), torch.complex64, seed=6)], 2 + 1j),
        ("div.Scalar", [make_cpu((5,), torch.int64, seed=7)], 4),
    ]
    for name, selfs, value in cases:
        op = getattr(torch, f"_foreach_{name.split('.')[0]}")
        check(lambda s: op(s, value), [selfs], in_place=False)
        op_ = getattr(torch, f"_foreach_{name.split('.')[0]}_")
        check(lambda s: op_(s, value), [[t.clone() for t in selfs]], in_place=True)


def test_aliases_see_earlier_indices_writes():
    for make in (
        lambda: [make_cpu((8,), seed=i) for i in range(3)],
        lambda: list(make_cpu((24,), seed=9).view(3, 8)),  # three views of one storage
    ):
        cpu = make()
        dev = [t.to(DEVICE) for t in cpu] if cpu[0]._base is None else list(cpu[0]._base.to(DEVICE).view(3, 8))
        # The same list on both sides, and self[0] as other[1]: index 1 reads what index 0 wrote.
        torch._foreach_add_(cpu, [cpu[2], cpu[0], cpu[1]], alpha=0.5)
        torch._foreach_add_(dev, [dev[2], dev[0], dev[1]], alpha=0.5)
        assert_lists_same(dev, cpu)
        torch._foreach_mul_(cpu, cpu)
        torch._foreach_mul_(dev, dev)
        assert_lists_same(dev, cpu)
        torch._foreach_addcmul_(cpu, cpu, cpu[::-1], value=0.25)
        torch._foreach_addcmul_(dev, dev, dev[::-1], value=0.25)
        assert_lists_same(dev, cpu)


def test_a_call_is_one_kernel_not_a_loop_of_operators():
    params = [make_cpu((16,), seed=i).to(DEVICE) for i in range(4)]
    grads = [make_cpu((16,), seed=10 + i).to(DEVICE) for i in range(4)]
    with torch.profiler.profile() as prof:
        torch._foreach_add_(params, grads, alpha=-0.1)
        torch._foreach_mul_(params, 0.5)
    names = [event.name for event in prof.events()]
    assert "aten::_foreach_add_" in names and "aten::_foreach_mul_" in names
    # ATen's composite would call the per-tensor operator once per tensor through the dispatcher.
    assert not {"aten::add_", "aten::mul_"} & set(names), names


def test_empty_tensors_and_zero_size():
    for in_place in (False, True):
        fn, _ = binary("add.List", in_place)
        check(fn, [[torch.empty(0), make_cpu((3,))], [torch.empty(0), make_cpu((3,), seed=1)]], in_place)
        fn, _ = binary("mul.Scalar", in_place)
        check(fn, [[torch.empty(0, 4)]], in_place)


def test_bad_lists_raise_what_the_cpu_raises():
    a = cpu_lists([F32, F32[:2]])
    for name in ("add.List", "mul.List", "lerp.List", "addcmul.Scalar"):
        for in_place in (False, True):
            fn, n_lists = binary(name, in_place)
            lists = [a[0]] + [a[1]] * (n_lists - 1)
            check(fn, lists, in_place)  # lengths 3 and 2
            check(fn, [[]] * n_lists, in_place)  # empty lists
    for in_place in (False, True):
        fn, _ = binary("div.ScalarList", in_place)
        check(lambda s: fn(s[:2]), [a[0]], in_place)  # 2 tensors, 3 scalars
        fn, _ = binary("addcdiv.ScalarList", in_place)
        check(lambda s, x, y: fn(s, x, y[:2]), [a[0], a[0], a[0]], in_place)
    # In place, an integer list cannot take a float result: the CPU's RuntimeError.
    check(lambda s: torch._foreach_add_(s, 0.5), [[make_cpu((3,), torch.int64)]], in_place=True)
    check(
        lambda s, o: torch._foreach_sub_(s, o),
        [[make_cpu((3,), torch.bool)], [make_cpu((3,), torch.bool)]],
        in_place=True,
    )


def test_tensors_on_two_devices_raise_before_writing():
    params = [make_cpu((4,), seed=i).to(DEVICE) for i in range(3)]
    before = [p.cpu() for p in params]
    others = [make_cpu((4,), seed=10 + i).to(DEVICE) for i in range(3)]
    others[2] = others[2].cpu()
    with pytest.raises(RuntimeError, match=r"same device.*openreg:0 and cpu.*_foreach_add_\.List"):
        torch._foreach_add_(params, others)
    with pytest.raises(RuntimeError, match=r"same device.*openreg:0 and cpu.*_foreach_mul\.List"):
        torch._foreach_mul(params, others)
    with pytest.raises(RuntimeError, match="same device"):
        torch._foreach_mul_([params[0], params[1].cpu()], 2.0)
    for p, b in zip(params, before):
        assert torch.equal(p.cpu(), b)
    if torch.openreg.device_count() > 1:
        with pytest.raises(RuntimeError, match="openreg:0 and openreg:1"):
            torch._foreach_add_(params[:2], [others[0], others[1].to(f"{DEVICE}:1")])


OPTIMIZERS = {
    "sgd_momentum": lambda p, f: torch.optim.SGD(p, lr=0.1, momentum=0.9, foreach=f),
    "sgd_nesterov_wd": lambda p, f: torch.optim.SGD(
        p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01, foreach=f
    ),
    "sgd_dampening_maximize": lambda p, f: torch.optim.SGD(
        p, lr=0.05, momentum=0.5, dampening=0.3, maximize=True, foreach=f
    ),
    "sgd_plain": lambda p, f: torch.optim.SGD(p, lr=0.1, foreach=f),
    "adam": lambda p, f: torch.optim.Adam(p, lr=0.01, foreach=f),
    "adam_amsgrad_wd_maximize": lambda p, f: torch.optim.Adam(
        p, lr=0.01, amsgrad=True, weight_decay=0.1, maximize=True, foreach=f
    ),
    "adamw": lambda p, f: torch.optim.AdamW(p, lr=0.01, weight_decay=0.05, foreach=f),
    "adamw_amsgrad": lambda p, f: torch.optim.AdamW(p, lr=0.01, amsgrad=True, foreach=f),
}


@pytest.mark.parametrize("foreach", [False, True], ids=["for_loop", "foreach"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_steps_equal_cpu(name, foreach):
    """Three steps over parameters of two dtypes and shapes (two foreach groups), new gradients each step."""
    shapes = [((16,), torch.float32), ((3, 4), torch.float32), ((5,), torch.float64)]
    params = {
        device: [
            torch.nn.Parameter(make_cpu(shape, dtype, seed=i).to(device)) for i, (shape, dtype) in enumerate(shapes)
        ]
        for device in ("cpu", DEVICE)
    }
    optimizers = {device: OPTIMIZERS[name](group, foreach) for device, group in params.items()}
    for step in range(3):
        for device, group in params.items():
            for i, param in enumerate(group):
                param.grad = make_cpu(param.shape, param.dtype, seed=100 * step + i).to(device)
            optimizers[device].step()
        for param, expected in zip(params[DEVICE], params["cpu"]):
            assert_same(param.detach(), expected.detach())
