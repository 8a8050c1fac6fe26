"""Strict mode (OPENREG_FALLBACK=0) exists to show which compute operators lack an openreg kernel, so tensor creation
and random fills have kernels of their own (csrc/aten/FillAndRandomKernels.cpp): they work in strict mode, give the
CPU's results (random ones: the CPU's numbers for the same seed, bit for bit), and never reach the fallback."""

import pytest
import torch

from conftest import DEVICE, check_ok, run_python

# name -> function of the device; each is run with the same seed on the CPU and on openreg.
CREATION = {
    "zeros": "lambda d: torch.zeros(3, 4, device=d)",
    "ones": "lambda d: torch.ones(5, dtype=torch.int32, device=d)",
    "full": "lambda d: torch.full((2, 3), 2.5, device=d)",
    "full_bool": "lambda d: torch.full((4,), True, device=d)",
    "zeros_like": "lambda d: torch.zeros_like(torch.empty(3, 2, device=d).t())",
    "ones_like": "lambda d: torch.ones_like(torch.empty(3, device=d, dtype=torch.float16))",
    "full_like": "lambda d: torch.full_like(torch.empty(4, device=d), 7)",
    "empty_like_fill": "lambda d: torch.empty_like(torch.empty(2, 3, device=d)).fill_(-1.5)",
    "fill_tensor": "lambda d: torch.empty(4, device=d).fill_(torch.tensor(3.25, device=d))",
    "fill_cpu_scalar_tensor": "lambda d: torch.empty(4, device=d).fill_(torch.tensor(3))",
    "zero_noncontiguous": "lambda d: torch.ones(4, 6, device=d)[:, ::2].zero_()",
    "arange": "lambda d: torch.arange(10, device=d)",
    "arange_float": "lambda d: torch.arange(0.5, 3.0, 0.25, device=d)",
    "arange_out_resized": "lambda d: torch.arange(2, 9, 3, out=torch.empty(0, device=d, dtype=torch.int64))",
    "linspace": "lambda d: torch.linspace(-1, 1, 7, device=d)",
    "logspace": "lambda d: torch.logspace(0, 2, 5, base=2.0, device=d)",
    "eye": "lambda d: torch.eye(4, device=d)",
    "eye_rect": "lambda d: torch.eye(3, 5, dtype=torch.int64, device=d)",
    "randn": "lambda d: torch.randn(40, device=d)",
    "randn_float64": "lambda d: torch.randn(3, 7, dtype=torch.float64, device=d)",
    "rand": "lambda d: torch.rand(33, device=d)",
    "rand_bfloat16": "lambda d: torch.rand(20, dtype=torch.bfloat16, device=d)",
    "randint": "lambda d: torch.randint(0, 10, (25,), device=d)",
    "randint_high": "lambda d: torch.randint(7, (4, 4), dtype=torch.int16, device=d)",
    "randint_like": "lambda d: torch.randint_like(torch.empty(6, device=d), 3, 9)",
    "rand_like": "lambda d: torch.rand_like(torch.empty(5, 3, device=d))",
    "randn_like": "lambda d: torch.randn_like(torch.empty(2, 9, device=d, dtype=torch.float64))",
    "randperm": "lambda d: torch.randperm(30, device=d)",
    "normal_": "lambda d: torch.empty(10, device=d).normal_(2.0, 0.5)",
    "normal_noncontiguous": "lambda d: torch.empty(8, 6, device=d).t().normal_()",
    "normal_tensor_float": "lambda d: torch.normal(torch.arange(6.0, device=d), 0.5)",
    "normal_float_tensor": "lambda d: torch.normal(1.0, torch.full((2, 3), 2.0, device=d))",
    "normal_tensor_tensor": "lambda d: torch.normal(torch.zeros(3, 1, device=d), torch.ones(1, 4, device=d))",
    "normal_size": "lambda d: torch.normal(0.0, 1.0, (17,), device=d)",
    "uniform_": "lambda d: torch.empty(2, 8, device=d).uniform_(-1, 1)",
    "random_": "lambda d: torch.empty(9, dtype=torch.int64, device=d).random_()",
    "random_to": "lambda d: torch.empty(9, device=d).random_(5)",
    "random_from_to": "lambda d: torch.empty(9, dtype=torch.int8, device=d).random_(-3, 3)",
    "random_bool": "lambda d: torch.empty(12, dtype=torch.bool, device=d).random_()",
    "bernoulli_float": "lambda d: torch.empty(12, device=d).bernoulli_(0.3)",
    "bernoulli_tensor": "lambda d: torch.empty(12, device=d).bernoulli_(torch.full((12,), 0.6, device=d))",
    "bernoulli": "lambda d: torch.bernoulli(torch.linspace(0, 1, 12, device=d))",
    "bernoulli_p": "lambda d: torch.bernoulli(torch.empty(12, device=d), 0.4)",
    "bernoulli_out": "lambda d: torch.bernoulli(torch.full((5,), 0.5, device=d), out=torch.empty(5, device=d))",
    "exponential_": "lambda d: torch.empty(11, device=d).exponential_(2.0)",
    "cauchy_": "lambda d: torch.empty(11, device=d).cauchy_()",
    "log_normal_": "lambda d: torch.empty(11, device=d).log_normal_()",
    "geometric_": "lambda d: torch.empty(11, device=d).geometric_(0.25)",
    "generator": "lambda d: torch.randn(6, device=d, generator=torch.Generator(d).manual_seed(7))",
}


COMPARE_EACH = """
for name, make in cases.items():
    torch.manual_seed(1234)
    want = make("cpu")
    torch.manual_seed(1234)
    try:
        got = make("openreg")
    except Exception as error:
        print("BAD", name, type(error).__name__, str(error).splitlines()[0])
        continue
    same = (got.device.type == "openreg" and got.dtype == want.dtype and got.shape == want.shape
            and got.stride() == want.stride() and torch.equal(got.cpu(), want))
    print("OK" if same else "BAD", name, "" if same else f"{got.cpu()} {got.stride()} vs {want} {want.stride()}")
print("fallback calls:", torch.openreg.fallback_stats())
"""


@pytest.mark.slow
def test_creation_and_random_functions_work_in_strict_mode_and_equal_the_cpu():
    cases = "".join(f"    {name!r}: {fn},\n" for name, fn in CREATION.items())
    out = check_ok(run_python("import torch\ncases = {\n" + cases + "}\n" + COMPARE_EACH, OPENREG_FALLBACK="0"))
    bad = [line for line in out.splitlines() if line.startswith("BAD")]
    assert not bad, "\n".join(bad)
    assert sum(line.startswith("OK") for line in out.splitlines()) == len(CREATION)
    assert "fallback calls: {}" in out


@pytest.mark.slow
def test_a_compute_operator_still_raises_naming_it():
    out = check_ok(
        run_python(
            """
        import torch
        x = torch.randn(3, device="openreg")
        try:
            torch.atan2(x, x)
        except NotImplementedError as error:
            print("refused", "'aten::atan2'" in str(error), "OPENREG_FALLBACK=0" in str(error))
        """,
            OPENREG_FALLBACK="0",
        )
    )
    assert "refused True True" in out


def test_creation_never_reaches_the_fallback():
    torch.openreg.reset_fallback_stats()
    torch.zeros(3, device=DEVICE), torch.ones(3, device=DEVICE), torch.randn(3, device=DEVICE)
    torch.arange(4, device=DEVICE), torch.eye(3, device=DEVICE), torch.randperm(5, device=DEVICE)
    torch.empty(4, device=DEVICE).bernoulli_(0.5).exponential_()
    assert torch.openreg.fallback_stats() == {}


def test_the_device_generator_is_used_and_advances():
    torch.manual_seed(5)
    cpu = torch.randn(8), torch.randn(8)
    torch.manual_seed(5)
    device = torch.randn(8, device=DEVICE), torch.randn(8, device=DEVICE)
    assert torch.equal(device[0].cpu(), cpu[0]) and torch.equal(device[1].cpu(), cpu[1])
    assert not torch.equal(device[0], device[1])


def test_a_cpu_generator_for_an_openreg_fill_is_refused():
    with pytest.raises(RuntimeError, match="Expected a 'openreg' device type for generator but found 'cpu'"):
        torch.empty(3, device=DEVICE).normal_(generator=torch.Generator())


@pytest.mark.parametrize(
    "call",
    [
        lambda d: torch.empty(3, device=d).random_(5, 2),
        lambda d: torch.empty(3, device=d).uniform_(2, 1),
        lambda d: torch.empty(3, device=d).normal_(0, -1),
        lambda d: torch.empty(3, device=d).bernoulli_(1.5),
        lambda d: torch.empty(3, device=d).geometric_(0),
        lambda d: torch.empty(3, device=d).fill_(torch.ones(2, device=d)),
        lambda d: torch.arange(0, 5, 0, device=d),
        lambda d: torch.eye(-1, device=d),
        lambda d: torch.empty(3, dtype=torch.int64, device=d).normal_(),
    ],
    ids=[
        "random_from_ge_to",
        "uniform_from_gt_to",
        "normal_negative_std",
        "bernoulli_p_above_1",
        "geometric_p_0",
        "fill_non_scalar_value",
        "arange_step_0",
        "eye_negative",
        "normal_integer",
    ],
)
def test_bad_arguments_raise_as_on_the_cpu(call):
    with pytest.raises(Exception) as cpu_error:
        call("cpu")
    with pytest.raises(type(cpu_error.value)) as device_error:
        call(DEVICE)
    assert str(device_error.value).splitlines()[0] == str(cpu_error.value).splitlines()[0]


def test_a_cpu_tensor_argument_is_a_device_mismatch():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.empty(3, device=DEVICE).bernoulli_(torch.full((3,), 0.5))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.normal(torch.zeros(3, device=DEVICE), torch.ones(3))
