"""The sanitizer's initcheck (docs/sanitizer.md): a read of memory that nothing wrote since its allocation is
reported every time, with the operator and the allocation's stack, as compute-sanitizer's initcheck reports it on a
GPU; correct code (written before it is read) runs clean; every block handed out under the sanitizer holds poison."""

import math

import pytest
import torch

from torch.openreg import sanitizer
from torch.openreg.sanitizer import SanitizerErrors, SynchronizationErrors, UninitializedReads

DEVICE = "openreg"
N = 64
RUNS = 100


@pytest.fixture(autouse=True)
def starts_off():
    """As in test_sanitizer.py: these tests switch the sanitizer themselves, also in a suite run under it."""
    was_on = sanitizer.is_enabled()
    sanitizer.disable()
    yield
    if was_on:
        sanitizer.enable()


x = torch.arange(N, dtype=torch.float32)

# (case id, a program that reads what nothing wrote, the operator that reads, the one that allocated)
BUGS = [
    ("empty_summed", lambda: torch.empty(N, device=DEVICE).sum(), "aten::sum", "aten::empty"),
    ("accumulated_into", lambda: torch.empty(N, device=DEVICE).add_(x.to(DEVICE)), "aten::add_", "aten::empty"),
    ("empty_like_copied_out", lambda: torch.empty_like(x.to(DEVICE)).cpu(), "aten::_to_copy", "aten::empty_like"),
    ("new_empty_multiplied", lambda: x.to(DEVICE).new_empty(N) * 2, "aten::mul", "aten::new_empty"),
    (
        "empty_strided_as_matmul_operand",
        lambda: torch.empty_strided((8, 8), (1, 8), device=DEVICE) @ torch.ones(8, 8, device=DEVICE),
        "aten::mm",
        "aten::empty_strided",
    ),
]


@pytest.mark.parametrize("name, program, reader, allocator", BUGS, ids=[c[0] for c in BUGS])
def test_a_read_of_uninitialized_memory_is_reported_every_time(name, program, reader, allocator):
    program()  # runs without the sanitizer (on a GPU it would read garbage)
    with sanitizer.enabled():
        for _ in range(RUNS):
            with pytest.raises(UninitializedReads) as raised:
                program()
            (error,) = raised.value.errors
            report = str(raised.value)
            assert reader in report and f"since {allocator} allocated it" in report
            assert "test_sanitizer_initcheck.py" in "".join(error.allocation[1].format())  # the allocation's stack
            assert not isinstance(raised.value, SynchronizationErrors) and isinstance(raised.value, SanitizerErrors)


# Programs that write what they read: each returns (openreg result, the CPU's)
WRITTEN_FIRST = [
    ("filled", lambda d: torch.empty(N, device=d).fill_(2.0).sum()),
    ("zeroed_then_accumulated", lambda d: torch.empty(N, device=d).zero_().add_(x.to(d))),
    ("copied_into", lambda d: torch.empty(N, device=d).copy_(x.to(d)) * 2),
    ("assigned_by_slice", lambda d: _assigned(torch.empty(N, device=d), x.to(d))),
    ("out_argument", lambda d: torch.add(x.to(d), 1, out=torch.empty(N, device=d)).cpu()),
    ("random_fill", lambda d: torch.empty(N, device=d).uniform_(generator=torch.Generator(d).manual_seed(1)).sum()),
    ("index_put", lambda d: torch.empty(4, device=d).index_put_((torch.arange(4, device=d),), torch.ones(4, device=d))),
    ("a_result", lambda d: (x.to(d) + 1).cpu()),
    ("empty_like_then_written", lambda d: torch.empty_like(x.to(d)).copy_(x.to(d)).mean()),
]


def _assigned(buffer, values):
    buffer[:] = values
    return buffer.cos()


@pytest.mark.parametrize("name, program", WRITTEN_FIRST, ids=[c[0] for c in WRITTEN_FIRST])
def test_memory_written_before_it_is_read_runs_clean(name, program):
    with sanitizer.enabled():
        result = program(DEVICE)
    torch.testing.assert_close(result.cpu(), program("cpu"))


def test_deterministic_fill_initializes_empty():
    torch.use_deterministic_algorithms(True)
    try:
        with sanitizer.enabled():
            assert torch.isnan(torch.empty(N, device=DEVICE).sum().cpu())  # the fill wrote NaN: no report
    finally:
        torch.use_deterministic_algorithms(False)


@pytest.mark.parametrize("dtype, poison", [(torch.float32, math.nan), (torch.bfloat16, math.nan), (torch.int32, -1)])
def test_blocks_handed_out_under_the_sanitizer_hold_poison(dtype, poison):
    with sanitizer.enabled():
        fresh = torch.empty(N, dtype=dtype, device=DEVICE)
        ones = torch.ones(N, dtype=dtype, device=DEVICE)
        address = ones.data_ptr()
        del ones
        reused = torch.empty(N, dtype=dtype, device=DEVICE)  # the freed block again
        assert reused.data_ptr() == address
    # Read after the sanitizer is off (reading them under it is the error above).
    for t in (fresh, reused):
        expected = torch.full((N,), poison, dtype=dtype)
        torch.testing.assert_close(t.cpu(), expected, equal_nan=True, rtol=0, atol=0)


def test_without_the_sanitizer_nothing_is_reported_or_poisoned():
    ones = torch.ones(N, device=DEVICE)
    address = ones.data_ptr()
    del ones
    reused = torch.empty(N, device=DEVICE)
    assert reused.data_ptr() == address
    assert torch.equal(reused.cpu(), torch.ones(N))  # the cached block as it was left, as on a GPU


@pytest.mark.slow
def test_compiled_kernels_write_their_buffers():
    # Inductor's wrapper allocates its buffers with empty_strided through the dispatcher, and its C++ kernels write
    # them where the dispatcher does not see it: no false alarm when eager code reads the compiled result.
    torch._dynamo.reset()
    compiled = torch.compile(lambda a: (a.sin() + 1) * 2, fullgraph=True)
    a = torch.randn(N, device=DEVICE)
    with sanitizer.enabled():
        result = compiled(a).cpu()
    torch.testing.assert_close(result, (a.cpu().sin() + 1) * 2)
