"""Shared helpers for the torch_openreg test suite.

Nothing here changes the environment of the pytest process: the OPENREG_*
settings are read once per process, so tests that need other values run a
child interpreter through ``run_python``.
"""

import os
import signal
import subprocess
import sys
import tempfile
import textwrap

import pytest
import torch

DEVICE = "openreg"

ALL_DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
]

FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]

# A representative subset for all-pairs dtype conversion.
CONVERSION_DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
]


def dtype_id(dtype):
    return str(dtype).replace("torch.", "")


def make_cpu(shape, dtype=torch.float32, seed=0, low=None, high=None):
    """Deterministic random CPU tensor of any dtype (same seed -> same values).

    Uses a private generator, so it does not disturb the global RNG state.
    """
    if isinstance(shape, int):
        shape = (shape,)
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_complex:
        real_dtype = torch.float32 if dtype == torch.complex64 else torch.float64
        re = torch.randn(shape, generator=g, dtype=real_dtype)
        im = torch.randn(shape, generator=g, dtype=real_dtype)
        return torch.complex(re, im).to(dtype)
    if dtype.is_floating_point:
        if low is None and high is None:
            t = torch.randn(shape, generator=g, dtype=torch.float32)
        else:
            lo = -3.0 if low is None else low
            hi = 3.0 if high is None else high
            t = torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo
        return t.to(dtype)
    info = torch.iinfo(dtype)
    lo = max(info.min, -100) if low is None else low
    hi = min(info.max, 100) if high is None else high
    return torch.randint(lo, hi + 1, shape, generator=g, dtype=torch.int64).to(dtype)


def assert_same(actual, expected, check_stride=True, device_type=DEVICE):
    """``actual`` lives on ``device_type`` and equals the CPU ``expected`` bit for bit."""
    assert isinstance(actual, torch.Tensor), type(actual)
    assert actual.device.type == device_type, actual.device
    assert expected.device.type == "cpu", expected.device
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if check_stride:
        assert actual.stride() == expected.stride(), (actual.stride(), expected.stride())
    host = actual.cpu()
    assert torch.equal(host, expected), f"\nactual:\n{host}\nexpected:\n{expected}"


def assert_all_same(actual, expected):
    """``assert_same`` through (nested) tuples and lists of results."""
    if isinstance(expected, torch.Tensor):
        assert_same(actual, expected)
        return
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert_all_same(a, e)


def assert_close(actual, expected, **kwargs):
    """Like ``assert_same`` but within torch.testing tolerances."""
    assert actual.device.type == DEVICE, actual.device
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    torch.testing.assert_close(actual.cpu(), expected, **kwargs)


def run_python(code, timeout=120, **env):
    """Runs ``code`` in a fresh interpreter; ``env`` adds/overrides variables.

    A value of None removes the variable from the child's environment. The
    child starts in the temp directory: ``python -c`` puts its working
    directory on sys.path, and the repository root would shadow the installed
    package with the unbuilt source tree.
    """
    child_env = dict(os.environ)
    for key, value in env.items():
        if value is None:
            child_env.pop(key, None)
        else:
            child_env[key] = str(value)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tempfile.gettempdir(),
    )


def run_in_own_session(args, timeout, **popen_kwargs):
    """Runs ``args`` in a session of its own; returns the CompletedProcess (output as text).

    On a timeout the whole process group is killed, the program's children
    too (spawned workers, a forkserver, the ranks a launcher started), so none
    keeps the output pipes open, and the test fails with what was printed.
    """
    with subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **popen_kwargs
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            pytest.fail(f"timed out after {timeout} s: {args}\nstdout:\n{stdout}\nstderr:\n{stderr}")
    return subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)


def parse_key_values(stdout):
    """{KEY: VALUE} from the KEY=VALUE lines a child process printed."""
    result = {}
    for line in stdout.splitlines():
        if "=" in line:
            key, _, value = line.partition("=")
            result[key.strip()] = value.strip()
    return result


def check_ok(proc):
    """Asserts the child exited 0 and returns its stdout."""
    assert proc.returncode == 0, f"rc={proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def inductor_cache(tmp_path_factory):
    """The module's compilations go to an Inductor cache directory of their own (``TORCHINDUCTOR_CACHE_DIR``), so no
    test depends on what other processes cached; Dynamo is reset after the module."""
    directory = tmp_path_factory.mktemp("inductor_cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TORCHINDUCTOR_CACHE_DIR", str(directory))
        yield directory
    torch._dynamo.reset()


@pytest.fixture
def restore_device():
    """Restores the current openreg device of this thread after the test."""
    previous = torch.openreg.current_device()
    yield
    torch.openreg.set_device(previous)


@pytest.fixture
def default_streams():
    """The test starts and ends with the default streams current, on device 0."""

    def reset():
        for index in range(torch.openreg.device_count()):
            torch.openreg.set_stream(torch.openreg.default_stream(index))
        torch.openreg.set_device(0)

    reset()
    yield
    for index in range(torch.openreg.device_count()):
        torch.openreg.synchronize(index)
    reset()


@pytest.fixture(autouse=True)
def keep_intra_op_threads():
    """Restores the intra-op thread count after each test.

    DataLoader's pin-memory thread calls torch.set_num_threads(1), which
    changes the process-wide count: threads created afterwards (such as the
    autograd device thread of an openreg device) would then reduce with one
    thread while the main thread's CPU reference uses more, and float sums
    would differ in their last bits.
    """
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def pytest_collection_modifyitems(items):
    """Every long test is also slow: -m "not slow" leaves out both."""
    for item in items:
        if item.get_closest_marker("long") is not None:
            item.add_marker(pytest.mark.slow)
