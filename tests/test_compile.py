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
import os
import signal

import pytest
import torch
from torch._inductor.utils import run_and_get_code

from conftest import DEVICE, assert_same, check_ok, make_cpu, run_python


@pytest.fixture(scope="module", autouse=True)
def inductor_cache(tmp_path_factory):
    directory = tmp_path_factory.mktemp("inductor_cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TORCHINDUCTOR_CACHE_DIR", str(directory))
        yield directory
    torch._dynamo.reset()


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


def assert_all_same(actual, expected):
    if isinstance(expected, torch.Tensor):
        assert_same(actual, expected)
        return
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert_all_same(a, e)


def test_pointwise_kernel_runs_on_host_views():
    def fn(x, y):
        return (x * y + 1).relu()

    x, y = make_cpu((8, 33), seed=1), make_cpu((8, 33), seed=2)
    actual, expected, code = compile_on_both(fn, x, y)
    assert_same(actual, expected)
    # The generated wrapper calls its C++ kernel through the host-access call.
    assert any("call_on_host(cpp_fused" in line for line in "\n".join(code).splitlines())


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
