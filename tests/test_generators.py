"""Random number generation on openreg: torch.Generator(device="openreg"),
the torch.openreg seeding / state functions, torch.manual_seed, and every
random operator, each producing exactly the CPU's numbers for the same seed
(the device generators use the CPU's algorithm, docs/design.md section 5)."""

import pytest
import torch
import torch.nn.functional as F

from conftest import DEVICE, assert_same, check_ok, run_python


@pytest.fixture(autouse=True)
def restore_rng():
    """Leaves the CPU and device generators as they were."""
    cpu_state = torch.get_rng_state()
    device_states = torch.openreg.get_rng_state_all()
    yield
    torch.set_rng_state(cpu_state)
    torch.openreg.set_rng_state_all(device_states)
    torch.openreg.set_device(0)


def _cpu_and_device(fn, seed=1234):
    """fn(device) after torch.manual_seed(seed), on openreg and on the CPU."""
    torch.manual_seed(seed)
    on_device = fn(DEVICE)
    torch.manual_seed(seed)
    on_cpu = fn("cpu")
    return on_device, on_cpu


# name -> fn(device) drawing from the default generator of `device`
RANDOM_OPS = {
    "rand": lambda d: torch.rand(5, 7, device=d),
    "rand_float64": lambda d: torch.rand(100, dtype=torch.float64, device=d),
    "rand_float16": lambda d: torch.rand(100, dtype=torch.float16, device=d),
    "rand_bfloat16": lambda d: torch.rand(100, dtype=torch.bfloat16, device=d),
    "randn": lambda d: torch.randn(3, 11, device=d),
    "randn_float64": lambda d: torch.randn(64, dtype=torch.float64, device=d),
    "randn_complex64": lambda d: torch.randn(64, dtype=torch.complex64, device=d),
    "randn_large": lambda d: torch.randn(1 << 16, device=d),
    "randint": lambda d: torch.randint(0, 100, (50,), device=d),
    "randint_low_high_int32": lambda d: torch.randint(-50, 50, (8, 8), dtype=torch.int32, device=d),
    "randint_uint8": lambda d: torch.randint(0, 256, (200,), dtype=torch.uint8, device=d),
    "normal_": lambda d: torch.empty(40, device=d).normal_(),
    "normal_mean_std": lambda d: torch.empty(40, dtype=torch.float64, device=d).normal_(3.0, 0.5),
    "normal_tensors": lambda d: torch.normal(torch.arange(10.0, device=d), torch.linspace(0.1, 2, 10, device=d)),
    "uniform_": lambda d: torch.empty(40, device=d).uniform_(),
    "uniform_range": lambda d: torch.empty(40, dtype=torch.float64, device=d).uniform_(-2.0, 5.0),
    "bernoulli_tensor": lambda d: torch.bernoulli(torch.linspace(0, 1, 64, device=d)),
    "bernoulli_p": lambda d: torch.empty(64, device=d).bernoulli_(0.3),
    "exponential_": lambda d: torch.empty(40, device=d).exponential_(),
    "exponential_lambd": lambda d: torch.empty(40, dtype=torch.float64, device=d).exponential_(2.5),
    "geometric_": lambda d: torch.empty(40, device=d).geometric_(0.3),
    "cauchy_": lambda d: torch.empty(40, device=d).cauchy_(),
    "log_normal_": lambda d: torch.empty(40, device=d).log_normal_(),
    "random_": lambda d: torch.empty(40, dtype=torch.int64, device=d).random_(),
    "random_range": lambda d: torch.empty(40, dtype=torch.int32, device=d).random_(0, 10),
    "random_to": lambda d: torch.empty(40, device=d).random_(100),
    "randperm": lambda d: torch.randperm(10, device=d),
    "randperm_large": lambda d: torch.randperm(100_000, device=d),
    "multinomial_replacement": lambda d: torch.multinomial(torch.linspace(0.1, 1, 20, device=d), 50, replacement=True),
    "multinomial_no_replacement": lambda d: torch.multinomial(torch.linspace(0.1, 1, 20, device=d), 7),
    "multinomial_2d": lambda d: torch.multinomial(torch.ones(4, 9, device=d), 3),
    "dropout": lambda d: F.dropout(torch.ones(1000, device=d), p=0.4, training=True),
    "dropout_module": lambda d: torch.nn.Dropout(0.25)(torch.arange(500.0, device=d)),
    "rand_like": lambda d: torch.rand_like(torch.empty(6, 6, device=d)),
    "randn_like": lambda d: torch.randn_like(torch.empty(6, 6, dtype=torch.float64, device=d)),
    "randint_like": lambda d: torch.randint_like(torch.empty(20, device=d), 0, 9),
}


@pytest.mark.parametrize("name", list(RANDOM_OPS))
def test_random_op_matches_cpu(name):
    on_device, on_cpu = _cpu_and_device(RANDOM_OPS[name])
    assert_same(on_device, on_cpu)


def test_random_ops_with_explicit_generator_match_cpu():
    for seed in (0, 1, 2**40 + 3):
        g = torch.Generator(device=DEVICE).manual_seed(seed)
        c = torch.Generator().manual_seed(seed)
        assert_same(torch.rand(50, device=DEVICE, generator=g), torch.rand(50, generator=c))
        assert_same(torch.randn(50, device=DEVICE, generator=g), torch.randn(50, generator=c))
        assert_same(torch.randint(0, 7, (30,), device=DEVICE, generator=g), torch.randint(0, 7, (30,), generator=c))
        assert_same(torch.randperm(20, device=DEVICE, generator=g), torch.randperm(20, generator=c))
        assert_same(torch.empty(30, device=DEVICE).normal_(generator=g), torch.empty(30).normal_(generator=c))
        assert_same(torch.empty(30, device=DEVICE).uniform_(generator=g), torch.empty(30).uniform_(generator=c))
        assert_same(torch.empty(30, device=DEVICE).exponential_(generator=g), torch.empty(30).exponential_(generator=c))
        assert_same(
            torch.bernoulli(torch.full((30,), 0.5, device=DEVICE), generator=g),
            torch.bernoulli(torch.full((30,), 0.5), generator=c),
        )
        assert_same(
            torch.multinomial(torch.ones(10, device=DEVICE), 4, generator=g),
            torch.multinomial(torch.ones(10), 4, generator=c),
        )


def test_explicit_generator_does_not_touch_default():
    torch.openreg.manual_seed(5)
    g = torch.Generator(device=DEVICE).manual_seed(99)
    torch.rand(100, device=DEVICE, generator=g)
    torch.manual_seed(5)
    assert_same(torch.rand(10, device=DEVICE), torch.rand(10))


def test_consecutive_draws_continue_the_cpu_sequence():
    torch.manual_seed(77)
    device_draws = [torch.rand(13, device=DEVICE), torch.randn(7, device=DEVICE), torch.rand(3, device=DEVICE)]
    torch.manual_seed(77)
    cpu_draws = [torch.rand(13), torch.randn(7), torch.rand(3)]
    for d, c in zip(device_draws, cpu_draws):
        assert_same(d, c)


# --------------------------------------------------------------------------
# torch.Generator(device="openreg")
# --------------------------------------------------------------------------


def test_generator_device_and_seeds():
    g = torch.Generator(device=DEVICE)
    assert g.device == torch.device("openreg:0")
    assert torch.Generator(device="openreg:1").device == torch.device("openreg:1")
    assert torch.Generator(device=torch.device("openreg", 1)).device == torch.device("openreg:1")
    assert g.manual_seed(123) is g
    assert g.initial_seed() == 123
    new_seed = g.seed()
    assert g.initial_seed() == new_seed
    g.manual_seed(2**63 + 5)  # unsigned 64-bit seeds are accepted as on the CPU
    assert g.initial_seed() == 2**63 + 5


def test_generator_on_current_device(restore_device):
    torch.openreg.set_device(1)
    assert torch.Generator(device=DEVICE).device == torch.device("openreg:1")


def test_generator_state_round_trip():
    g = torch.Generator(device=DEVICE).manual_seed(42)
    torch.rand(17, device=DEVICE, generator=g)
    state = g.get_state()
    assert state.device == torch.device("cpu")
    assert state.dtype == torch.uint8
    first = torch.randn(64, device=DEVICE, generator=g)
    g.set_state(state)
    assert_same(torch.randn(64, device=DEVICE, generator=g), first.cpu())
    # the state is the CPU generator's, byte for byte
    c = torch.Generator().manual_seed(42)
    torch.rand(17, generator=c)
    assert torch.equal(state, c.get_state())
    # and a CPU state can be loaded into a device generator
    g2 = torch.Generator(device=DEVICE)
    g2.set_state(c.get_state())
    assert_same(torch.rand(9, device=DEVICE, generator=g2), torch.rand(9, generator=c))


def test_generator_clone_state():
    g = torch.Generator(device="openreg:1").manual_seed(8)
    torch.rand(5, device="openreg:1", generator=g)
    clone = g.clone_state()
    assert clone.device == torch.device("openreg:1")
    assert clone.initial_seed() == 8
    a = torch.rand(20, device="openreg:1", generator=g)
    b = torch.rand(20, device="openreg:1", generator=clone)
    assert torch.equal(a.cpu(), b.cpu())
    # independent afterwards
    torch.rand(3, device="openreg:1", generator=g)
    assert_same(torch.rand(4, device="openreg:1", generator=clone), _cpu_draws(8, [5, 20, 4])[-1])


def _cpu_draws(seed, sizes):
    c = torch.Generator().manual_seed(seed)
    return [torch.rand(n, generator=c) for n in sizes]


def test_cpu_generator_rejected_for_openreg_op():
    with pytest.raises(RuntimeError, match="Expected a 'openreg' device type for generator but found 'cpu'"):
        torch.rand(3, device=DEVICE, generator=torch.Generator())
    with pytest.raises(RuntimeError, match="Expected a 'openreg' device type for generator"):
        torch.empty(3, device=DEVICE).normal_(generator=torch.Generator())
    with pytest.raises(RuntimeError, match="Expected a 'openreg' device type for generator"):
        torch.randperm(5, device=DEVICE, generator=torch.Generator())


def test_openreg_generator_rejected_for_cpu_op():
    g = torch.Generator(device=DEVICE)
    with pytest.raises(RuntimeError, match="cpu|CPU"):
        torch.rand(3, generator=g)
    with pytest.raises(RuntimeError, match="cpu|CPU"):
        torch.empty(3).uniform_(generator=g)


# --------------------------------------------------------------------------
# torch.openreg seeding and state
# --------------------------------------------------------------------------


def test_manual_seed_and_initial_seed():
    torch.openreg.manual_seed(31)
    assert torch.openreg.initial_seed() == 31
    assert_same(torch.rand(8, device=DEVICE), torch.rand(8, generator=torch.Generator().manual_seed(31)))


def test_manual_seed_seeds_only_current_device(restore_device):
    torch.openreg.manual_seed_all(1)
    torch.openreg.set_device(1)
    torch.openreg.manual_seed(2)
    assert torch.openreg.initial_seed() == 2
    torch.openreg.set_device(0)
    assert torch.openreg.initial_seed() == 1


def test_manual_seed_all_seeds_every_device():
    torch.openreg.manual_seed_all(11)
    expected = torch.rand(6, generator=torch.Generator().manual_seed(11))
    assert_same(torch.rand(6, device="openreg:0"), expected)
    assert_same(torch.rand(6, device="openreg:1"), expected)


def test_torch_manual_seed_seeds_openreg():
    torch.manual_seed(2024)
    for index in range(torch.openreg.device_count()):
        with torch.openreg.device(index):
            assert torch.openreg.initial_seed() == 2024
    assert torch.initial_seed() == 2024


def test_seed_and_seed_all(restore_device):
    torch.openreg.manual_seed_all(3)
    torch.openreg.seed()
    new0 = torch.openreg.initial_seed()
    assert new0 != 3
    torch.openreg.set_device(1)
    assert torch.openreg.initial_seed() == 3  # seed() touches the current device only
    torch.openreg.seed_all()
    seed1 = torch.openreg.initial_seed()
    torch.openreg.set_device(0)
    assert torch.openreg.initial_seed() == seed1  # one seed for every device
    assert seed1 != new0
    a = torch.rand(5, device="openreg:0")
    b = torch.rand(5, device="openreg:1")
    assert torch.equal(a.cpu(), b.cpu())
    assert_same(a, torch.rand(5, generator=torch.Generator().manual_seed(seed1)))


def test_get_set_rng_state_replays():
    torch.openreg.manual_seed(5)
    torch.rand(3, device=DEVICE)
    state = torch.openreg.get_rng_state()
    assert state.dtype == torch.uint8 and state.device == torch.device("cpu")
    first = [torch.randn(10, device=DEVICE), torch.randint(0, 9, (10,), device=DEVICE)]
    torch.openreg.set_rng_state(state)
    again = [torch.randn(10, device=DEVICE), torch.randint(0, 9, (10,), device=DEVICE)]
    for a, b in zip(again, first):
        assert_same(a, b.cpu())
    # device arguments
    assert torch.equal(torch.openreg.get_rng_state(0), torch.openreg.get_rng_state("openreg:0"))
    assert torch.equal(torch.openreg.get_rng_state(1), torch.openreg.get_rng_state(torch.device("openreg:1")))
    torch.openreg.set_rng_state(state, "openreg:1")
    assert torch.equal(torch.openreg.get_rng_state(1), state)
    # set_rng_state copies: changing the tensor afterwards has no effect
    mine = state.clone()
    torch.openreg.set_rng_state(mine, 0)
    mine.zero_()
    assert torch.equal(torch.openreg.get_rng_state(0), state)


def test_get_set_rng_state_all():
    torch.openreg.manual_seed_all(9)
    torch.rand(4, device="openreg:1")  # device 1 ahead of device 0
    states = torch.openreg.get_rng_state_all()
    assert len(states) == torch.openreg.device_count() == 2
    assert not torch.equal(states[0], states[1])
    draws = [torch.rand(6, device="openreg:0"), torch.rand(6, device="openreg:1")]
    torch.openreg.set_rng_state_all(states)
    assert_same(torch.rand(6, device="openreg:0"), draws[0].cpu())
    assert_same(torch.rand(6, device="openreg:1"), draws[1].cpu())


def test_devices_have_independent_generators():
    torch.openreg.manual_seed_all(100)
    expected = _cpu_draws(100, [16, 16])
    # draw a lot on device 0: device 1 does not advance
    for _ in range(5):
        torch.rand(1000, device="openreg:0")
    assert_same(torch.rand(16, device="openreg:1"), expected[0])
    assert_same(torch.rand(16, device="openreg:1"), expected[1])
    # and the CPU's default generator is separate from both
    torch.manual_seed(100)
    torch.rand(1000, device="openreg:0")
    assert torch.equal(torch.rand(16), expected[0])


def test_cpu_default_generator_is_separate():
    torch.manual_seed(6)
    torch.rand(500)  # advances the CPU only
    assert_same(torch.rand(10, device=DEVICE), torch.rand(10, generator=torch.Generator().manual_seed(6)))


# --------------------------------------------------------------------------
# seeding before initialization (fresh interpreter)
# --------------------------------------------------------------------------


@pytest.mark.slow
def test_seeding_before_initialization_is_deferred():
    out = check_ok(
        run_python("""
        import torch
        import torch_openreg._C as C
        torch.manual_seed(5)
        torch.openreg.manual_seed_all(5)
        print("initialized_after_seed", torch.openreg.is_initialized())
        print("device0_started", C._is_device_initialized(0))
        x = torch.rand(6, device="openreg")
        y = torch.rand(6, device="openreg:1")
        print("initialized_after_tensor", torch.openreg.is_initialized())
        torch.manual_seed(5)
        print("match0", torch.equal(x.cpu(), torch.rand(6)))
        torch.manual_seed(5)
        print("match1", torch.equal(y.cpu(), torch.rand(6)))
        print("seed", torch.openreg.initial_seed())
    """)
    )
    lines = dict(line.split() for line in out.strip().splitlines())
    assert lines == {
        "initialized_after_seed": "False",
        "device0_started": "False",
        "initialized_after_tensor": "True",
        "match0": "True",
        "match1": "True",
        "seed": "5",
    }


@pytest.mark.slow
def test_set_rng_state_before_initialization_is_deferred():
    out = check_ok(
        run_python("""
        import torch
        state = torch.Generator().manual_seed(17).get_state()
        torch.openreg.set_rng_state(state, 1)
        print("initialized", torch.openreg.is_initialized())
        x = torch.rand(5, device="openreg:1")
        print("match", torch.equal(x.cpu(), torch.rand(5, generator=torch.Generator().manual_seed(17))))
    """)
    )
    assert out.split() == ["initialized", "False", "match", "True"]
