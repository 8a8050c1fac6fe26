"""torch.openreg.memory.OpenRegPluggableAllocator / change_current_allocator.

The swap is process-wide and only allowed before the caching allocator has
served anything, so every scenario runs in a fresh interpreter. The allocator
under test is a tiny shared library built here: it takes runtime memory with
orMalloc/orFree (so memory protection still applies) and counts its calls.
"""

import os
import shutil
import signal
import subprocess

import pytest
import torch_openreg

from conftest import check_ok, run_python

_SOURCE = r"""
#include <sys/types.h>
#include <cstddef>
extern "C" {
int orMalloc(void** ptr, size_t size);
int orFree(void* ptr);
int orSetDevice(int device);

long alloc_calls = 0, free_calls = 0, freed_bytes = 0, live_bytes = 0;

void* counting_alloc(ssize_t size, int device, void* /*stream*/) {
  void* ptr = nullptr;
  if (orSetDevice(device) != 0 || orMalloc(&ptr, static_cast<size_t>(size)) != 0) return nullptr;
  ++alloc_calls;
  live_bytes += size;
  return ptr;
}

void counting_free(void* ptr, ssize_t size, int device, void* /*stream*/) {
  orSetDevice(device);
  orFree(ptr);
  ++free_calls;
  freed_bytes += size;
  live_bytes -= size;
}
}
"""


@pytest.fixture(scope="module")
def allocator_so(tmp_path_factory):
    compiler = shutil.which("c++")
    if compiler is None:
        pytest.skip("no system C++ compiler")
    directory = tmp_path_factory.mktemp("pluggable")
    source = directory / "alloc.cpp"
    source.write_text(_SOURCE)
    library = directory / "liballoc.so"
    package = os.path.dirname(torch_openreg.__file__)
    subprocess.run(
        [
            compiler,
            "-shared",
            "-fPIC",
            "-O1",
            str(source),
            "-o",
            str(library),
            f"-L{package}",
            "-lopenreg",
            f"-Wl,-rpath,{package}",
        ],
        check=True,
        timeout=120,
    )
    return str(library)


_PRELUDE = """
import ctypes, torch
so = {so!r}
lib = ctypes.CDLL(so)
def count(name):
    return ctypes.c_long.in_dll(lib, name).value
allocator = torch.openreg.memory.OpenRegPluggableAllocator(so, "counting_alloc", "counting_free")
torch.openreg.memory.change_current_allocator(allocator)
"""


def _run(so, body):
    return check_ok(run_python(_PRELUDE.format(so=so) + body, timeout=60))


@pytest.mark.slow
def test_tensors_allocate_and_free_through_it(allocator_so):
    out = _run(
        allocator_so,
        """
a_cpu = torch.arange(12, dtype=torch.float32).reshape(3, 4)
b_cpu = torch.linspace(-1, 1, 12).reshape(4, 3)
a = a_cpu.to("openreg")
assert count("alloc_calls") >= 1
b = b_cpu.to("openreg")
torch.testing.assert_close((a @ b).cpu(), a_cpu @ b_cpu)
torch.testing.assert_close((a.sin() + 1).sum(0).cpu(), (a_cpu.sin() + 1).sum(0))
s = torch.empty(5, device="openreg").fill_(2.5)
s.resize_(1000)
s[:5].copy_(a.flatten()[:5])
torch.testing.assert_close(s[:5].cpu(), a_cpu.flatten()[:5])
u = torch.UntypedStorage(64, device="openreg")
del a, b, s, u
import gc; gc.collect()
print("allocs", count("alloc_calls"), "frees", count("free_calls"), "live", count("live_bytes"))
""",
    )
    allocs, frees, live = (int(w) for w in out.split()[1::2])
    assert allocs >= 5 and frees == allocs and live == 0, out


@pytest.mark.slow
def test_free_gets_the_allocation_size(allocator_so):
    out = _run(
        allocator_so,
        """
x = torch.empty(1000, dtype=torch.float64, device="openreg")
assert count("live_bytes") == 8000
del x
print(count("free_calls"), count("freed_bytes"))
""",
    )
    assert out.split() == ["1", "8000"], out


@pytest.mark.slow
def test_memory_is_protected_runtime_memory(allocator_so):
    proc = run_python(
        _PRELUDE.format(so=allocator_so)
        + """
x = torch.tensor([1.5, 2.0], device="openreg")
print("ready", flush=True)
ctypes.string_at(x.data_ptr(), 8)
print("host_read_worked", flush=True)
""",
        timeout=60,
        OPENREG_MEMORY_PROTECTION=None,
    )
    assert "ready" in proc.stdout and "host_read_worked" not in proc.stdout, (proc.stdout, proc.stderr)
    assert proc.returncode == -signal.SIGSEGV, (proc.returncode, proc.stderr)


@pytest.mark.slow
def test_caching_allocator_features_refuse(allocator_so):
    out = _run(
        allocator_so,
        """
import torch_openreg._multiprocessing_reductions
x = torch.ones(4, device="openreg")
for name, call in [
    ("memory_allocated", lambda: torch.openreg.memory_allocated()),
    ("memory_stats", lambda: torch.openreg.memory_stats()),
    ("reset_peak_memory_stats", lambda: torch.openreg.reset_peak_memory_stats()),
    ("_snapshot", lambda: torch.openreg.memory._snapshot()),
    ("_record_memory_history", lambda: torch.openreg.memory._record_memory_history()),
    ("MemPool", lambda: torch.openreg.MemPool()),
    ("set_per_process_memory_fraction", lambda: torch.openreg.set_per_process_memory_fraction(0.5)),
    ("caching_allocator_enable", lambda: torch.openreg.caching_allocator_enable(False)),
    ("IPC", lambda: torch_openreg._multiprocessing_reductions._reduce_storage(x.untyped_storage())),
]:
    try:
        call()
    except RuntimeError as e:
        assert "Pluggable" in str(e), (name, e)
    else:
        raise AssertionError(name + " did not raise")
torch.openreg.empty_cache()  # nothing cached: a no-op, as CUDA's
ptr = torch.openreg.caching_allocator_alloc(256)
assert count("live_bytes") == 256 + 16
torch.openreg.caching_allocator_delete(ptr)
assert count("live_bytes") == 16
print("ok")
""",
    )
    assert out.strip() == "ok"


@pytest.mark.slow
def test_swapping_after_an_allocation_raises(allocator_so):
    proc = run_python(
        f"""
import torch
x = torch.ones(3, device="openreg")
a = torch.openreg.memory.OpenRegPluggableAllocator({allocator_so!r}, "counting_alloc", "counting_free")
try:
    torch.openreg.memory.change_current_allocator(a)
except RuntimeError as e:
    print(e)
""",
        timeout=60,
    )
    assert "Can't swap an already initialized allocator" in check_ok(proc)
    # Nor twice: an installed pluggable allocator is initialized too.
    out = _run(
        allocator_so,
        """
try:
    torch.openreg.memory.change_current_allocator(allocator)
except RuntimeError as e:
    print(e)
""",
    )
    assert "Can't swap an already initialized allocator" in out


@pytest.mark.slow
def test_bad_library_or_symbol(allocator_so, tmp_path):
    out = check_ok(
        run_python(
            f"""
import torch
from torch.openreg.memory import OpenRegPluggableAllocator as P
try:
    P({str(tmp_path / "missing.so")!r}, "a", "f")
except OSError as e:
    print("oserror", "missing.so" in str(e))
try:
    P({allocator_so!r}, "no_such_alloc", "counting_free")
except AttributeError as e:
    print("attr", "no_such_alloc" in str(e))
""",
            timeout=60,
        )
    )
    assert out.split() == ["oserror", "True", "attr", "True"], out
