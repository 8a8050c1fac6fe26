"""The fallback's host views are reused from call to call (csrc/aten/CpuAliasPool.h).

Each thread keeps the CPU tensors the fallback wraps device memory in, and hands them out again on later calls, so
nothing one call left on a view may show in the next: not its sizes, strides, offset, dtype, version or
requires_grad, and not its memory. A view that a kernel kept (escaped) must stay as it was, over the memory it was
made for, while later calls run.
"""

import threading

import pytest
import torch

from conftest import DEVICE, assert_same, make_cpu

_stash = []


@torch.library.custom_op("cpu_alias_pool_test::stash", mutates_args=(), device_types="cpu")
def stash(x: torch.Tensor) -> torch.Tensor:
    """Keeps the CPU tensor its kernel was given (the fallback's host view on openreg)."""
    _stash.append(x)
    return x.clone()


@torch.library.custom_op("cpu_alias_pool_test::describe", mutates_args=(), device_types="cpu")
def describe(x: torch.Tensor) -> torch.Tensor:
    """What the kernel sees of its argument, as a tensor of the argument's device."""
    facts = [int(x.requires_grad), int(x.is_conj()), int(x.is_neg()), x.storage_offset(), x.dim()]
    facts += list(x.shape) + list(x.stride())
    return torch.tensor(facts, dtype=torch.int64)


@torch.library.custom_op("cpu_alias_pool_test::version", mutates_args=(), device_types="cpu")
def version(x: torch.Tensor) -> torch.Tensor:
    """The version of the tensor the kernel got: 0 for a host view, which counts only the call's own writes."""
    return torch.tensor(x._version)


@torch.library.custom_op("cpu_alias_pool_test::bump", mutates_args=("x",), device_types="cpu")
def bump(x: torch.Tensor) -> None:
    """Writes its argument in place, which bumps the version of the tensor the kernel got."""
    x.add_(1)


def fallback_calls(n=6):
    """Fallback operators over assorted dtypes, shapes, strides and offsets, checked against the CPU."""
    for i in range(n):
        a = make_cpu((3 + i, 5), torch.float32, seed=i)
        b = make_cpu((3 + i, 5), torch.float32, seed=i + 50)
        assert_same(torch.atan2(a.to(DEVICE), b.to(DEVICE)), torch.atan2(a, b))
        d = make_cpu((7, 4), torch.float64, seed=i)
        dd = d.to(DEVICE)
        assert_same(torch.atan2(dd.t()[1:, 2:], dd.t()[:-1, :-2]), torch.atan2(d.t()[1:, 2:], d.t()[:-1, :-2]))
        s = make_cpu((), torch.float32, seed=i)
        assert_same(torch.atan2(s.to(DEVICE), s.to(DEVICE)), torch.atan2(s, s))


def test_escaped_view_keeps_its_memory_and_values_across_later_calls():
    _stash.clear()
    cpu = make_cpu((4, 6), torch.float32, seed=3)
    x = cpu.to(DEVICE)
    assert_same(stash(x[1:, 2:]), cpu[1:, 2:].clone())
    kept = _stash[-1]
    assert kept.device.type == "cpu" and kept.shape == (3, 4) and kept.storage_offset() == 8
    fallback_calls()
    # the kept view still reads the device tensor's memory, with its own metadata
    assert kept.shape == (3, 4) and kept.stride() == (6, 1) and kept.storage_offset() == 8
    assert torch.equal(kept, cpu[1:, 2:])
    # and still aliases it: a write on the device shows in the kept view
    x.fill_(2.5)
    assert torch.equal(kept, torch.full((3, 4), 2.5))
    # the device memory outlives the device tensor while the view holds it
    del x
    torch.openreg.empty_cache()
    fallback_calls(2)
    assert torch.equal(kept, torch.full((3, 4), 2.5))
    _stash.clear()
    del kept
    torch.openreg.empty_cache()  # its access is closed: the memory can go back


def test_view_returned_by_the_kernel_maps_back_and_survives_later_calls():
    cpu = make_cpu((10,), torch.float32, seed=1)
    x = cpu.to(DEVICE)
    u = x.unfold(0, 4, 3)  # the CPU kernel returns a view of its argument's host view
    assert u.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    fallback_calls()
    assert_same(u, cpu.unfold(0, 4, 3))
    x[4] = -9.0
    cpu[4] = -9.0
    assert_same(u, cpu.unfold(0, 4, 3))
    # an in-place operator returns its argument: the openreg tensor itself
    y = make_cpu((5, 5), torch.float32, seed=2)
    yd = y.to(DEVICE)
    assert yd.atan2_(x[:5]) is yd
    assert_same(yd, y.atan2_(cpu[:5]))


def test_views_carry_nothing_over_from_earlier_calls():
    # Earlier calls leave views with other sizes, strides, offsets, dtypes, requires_grad and versions.
    fallback_calls(3)
    plain_cpu = make_cpu((6, 4), torch.float64, seed=4)
    plain = plain_cpu.to(DEVICE)
    g = make_cpu((6, 4), torch.float64, seed=5).to(DEVICE).requires_grad_()
    torch.atan2(g, g)  # the host view of g requires grad during the call
    assert_same(describe(plain), describe(plain_cpu))
    torch.atan2(g, g).sum().backward()
    b = make_cpu((4,), torch.float32, seed=6).to(DEVICE)
    bump(b)
    bump(b)
    for shape, dtype in [((2, 3), torch.float32), ((5,), torch.int64), ((), torch.float16), ((3, 2), torch.complex64)]:
        cpu = make_cpu(shape, dtype, seed=7)
        assert_same(describe(cpu.to(DEVICE)), describe(cpu))
        assert_same(version(cpu.to(DEVICE)), torch.tensor(0))
        assert_same(torch.atan2(cpu.to(DEVICE).real, cpu.to(DEVICE).real), torch.atan2(cpu.real, cpu.real))
    cpu = make_cpu((5, 8), torch.float32, seed=8)
    assert_same(describe(cpu.to(DEVICE).t()[2:, 1:]), describe(cpu.t()[2:, 1:]))
    z = make_cpu((3,), torch.complex64, seed=9)
    assert_same(describe(z.to(DEVICE).conj()), describe(z.conj()))
    assert_same(describe(z.to(DEVICE).conj().imag), describe(z.conj().imag))


def test_a_reused_view_takes_each_calls_offset_and_strides():
    # A reused view sets its sizes, strides and offset only where they differ from the previous call's: consecutive
    # calls that differ in the offset alone, in the strides alone, or in both take their own.
    cpu = make_cpu((4, 4), torch.float32, seed=10)
    x = cpu.to(DEVICE)
    views = [
        lambda t: t[0],
        lambda t: t[1],
        lambda t: t[:, 1],
        lambda t: t,
        lambda t: t.t(),
        lambda t: t.t()[1:3],
        lambda t: t[1:3],
        lambda t: t[1:3],
    ]
    for view in views:
        assert_same(describe(view(x)), describe(view(cpu)))
        assert_same(torch.relu(view(x)), torch.relu(view(cpu)))


def test_views_inside_inference_mode():
    cpu = make_cpu((4, 4), torch.float32, seed=4)
    x = cpu.to(DEVICE)
    with torch.inference_mode():
        assert_same(torch.atan2(x, x), torch.atan2(cpu, cpu))
        assert_same(describe(x), describe(cpu))
    assert_same(torch.atan2(x, x), torch.atan2(cpu, cpu))


def test_fallback_from_many_threads_is_bit_exact():
    errors = []

    def work(seed):
        try:
            for i in range(60):
                a = make_cpu((seed + 1, 3 + i % 4), torch.float32, seed=seed * 100 + i)
                b = make_cpu((seed + 1, 3 + i % 4), torch.float32, seed=seed * 100 + i + 1)
                ad, bd = a.to(DEVICE), b.to(DEVICE)
                assert_same(torch.atan2(ad, bd), torch.atan2(a, b))
                out = torch.empty_like(ad)
                torch.atan2(bd, ad, out=out)
                assert_same(out, torch.atan2(b, a))
                assert_same(ad.unfold(1, 2, 1), a.unfold(1, 2, 1))
        except Exception as e:  # reported below, with the thread's seed
            errors.append((seed, e))

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_a_failing_kernel_leaves_later_calls_intact():
    x = make_cpu((3,), torch.float32).to(DEVICE)
    with pytest.raises(RuntimeError, match="size"):
        torch.atan2(x, make_cpu((4,), torch.float32).to(DEVICE))
    fallback_calls(2)


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
def test_a_call_with_views_on_two_devices_closes_all_their_accesses():
    # A quantized copy between devices runs one CPU kernel over host views of both devices' memory.
    if torch.openreg.device_count() < 2:
        pytest.skip("needs two openreg devices")
    x = make_cpu((3, 4), torch.float32, seed=9)
    scales, zero_points = torch.tensor([0.1, 0.2, 0.3]), torch.tensor([0, 1, 2])
    cpu = torch.quantize_per_channel(x, scales, zero_points, 0, torch.quint8)
    on_1 = torch.quantize_per_channel(
        x.to(f"{DEVICE}:1"), scales.to(f"{DEVICE}:1"), zero_points.to(f"{DEVICE}:1"), 0, torch.quint8
    )
    moved = on_1.to(f"{DEVICE}:0")
    assert moved.device == torch.device(DEVICE, 0)
    assert torch.equal(moved.cpu(), cpu)
    del on_1, moved
    torch.openreg.empty_cache()  # orFree refuses memory with an open access


def test_fresh_results_are_device_tensors_like_any_other():
    # A result the CPU kernel allocated in device memory becomes the device tensor itself (CpuAliases.h).
    a, b = make_cpu((4, 5), torch.float32, seed=1), make_cpu((4, 5), torch.float32, seed=2)
    ad, bd = a.to(DEVICE), b.to(DEVICE)
    before = torch.openreg.memory_allocated()
    r = torch.atan2(ad, bd)
    assert_same(r, torch.atan2(a, b))
    assert r.untyped_storage().device == r.device == torch.device(DEVICE, 0)
    assert torch._C._dispatch_keys(r) == torch._C._dispatch_keys(torch.empty(1, device=DEVICE))
    assert torch.openreg.memory_allocated() > before
    assert_same(r.mul(2), torch.atan2(a, b).mul(2))
    with torch.inference_mode():
        ri = torch.atan2(ad, bd)
        assert ri.is_inference() and ri.device.type == DEVICE
        assert torch._C._dispatch_keys(ri) == torch._C._dispatch_keys(torch.empty(1, device=DEVICE))
    del r, ri
    assert torch.openreg.memory_allocated() == before
    g = ad.clone().requires_grad_()
    torch.atan2(g, bd).sum().backward()
    cg = a.clone().requires_grad_()
    torch.atan2(cg, b).sum().backward()
    assert_same(g.grad, cg.grad)
