"""Random number generator state of openreg devices, shaped like ``torch.cuda.random``.

Each device has a default generator whose algorithm is the CPU's, so a seed
gives the numbers the CPU gives for it. Seeding before openreg is initialized
is deferred to initialization (``torch.manual_seed`` at import time must not
start the device).
"""

from collections.abc import Iterable

import torch

from .. import _C

__all__ = [
    "get_rng_state",
    "get_rng_state_all",
    "initial_seed",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "seed_all",
    "set_rng_state",
    "set_rng_state_all",
]


def _generator(device=None) -> torch.Generator:
    from . import _lazy_init
    from ._utils import _get_device_index

    _lazy_init()
    return _C._default_generator(_get_device_index(device, optional=True))


def _when_initialized(fn) -> None:
    from . import _run_when_initialized

    _run_when_initialized(fn)


def get_rng_state(device="openreg") -> torch.Tensor:
    """The state of ``device``'s default generator, as a CPU ByteTensor."""
    return _generator(device).get_state()


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(torch.openreg.device_count())]


def set_rng_state(new_state: torch.Tensor, device="openreg") -> None:
    state = new_state.clone(memory_format=torch.contiguous_format)
    _when_initialized(lambda: _generator(device).set_state(state))


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    for index, state in enumerate(new_states):
        set_rng_state(state, index)


def manual_seed(seed: int) -> None:
    """Seeds the current device's generator."""
    seed = int(seed)
    _when_initialized(lambda: _generator().manual_seed(seed))


def manual_seed_all(seed: int) -> None:
    """Seeds every device's generator (``torch.manual_seed`` calls this)."""
    seed = int(seed)

    def seed_all_devices():
        for index in range(torch.openreg.device_count()):
            _generator(index).manual_seed(seed)

    _when_initialized(seed_all_devices)


def seed() -> None:
    """Seeds the current device's generator with a non-deterministic number."""
    _when_initialized(lambda: _generator().seed())


def seed_all() -> None:
    """Seeds every device's generator with one non-deterministic number."""

    def seed_all_devices():
        random_seed = _generator(0).seed()
        for index in range(1, torch.openreg.device_count()):
            _generator(index).manual_seed(random_seed)

    _when_initialized(seed_all_devices)


def initial_seed() -> int:
    return _generator().initial_seed()
