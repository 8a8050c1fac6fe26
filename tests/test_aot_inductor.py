"""Inductor's C++ wrapper (``torch._inductor.config.cpp_wrapper = True``) and
AOTInductor (``aoti_compile_and_package`` / ``aoti_load_package``) on openreg.

The C++ wrapper's results are compared with the Python wrapper's on openreg
and with the C++ wrapper's on the CPU; a package compiled for openreg with the
same package compiled for the CPU (or, for custom operators, which the CPU's
C++ wrapper cannot compile, with the eager CPU model): bit for bit, strides
included. Memory protection stays on: a generated kernel reading a device
address would crash the process (the negative control shows it does).

Every test compiles C++ (a wrapper or a package takes seconds), so all are
marked long, except the bad-input tests, which share one pair of packages.
"""

import copy
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from conftest import DEVICE, assert_all_same, assert_same, check_ok, make_cpu, run_python
from torch import nn
from torch._inductor.utils import run_and_get_code

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_export import models

F = nn.functional
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "export_and_aoti.py"


pytestmark = pytest.mark.usefixtures("inductor_cache")


def compiled(fn, *args, cpp_wrapper):
    torch._dynamo.reset()
    with torch._inductor.config.patch(cpp_wrapper=cpp_wrapper):
        return run_and_get_code(torch.compile(fn), *args)


def pointwise_and_matmul(x, w, b):
    return (F.gelu(x @ w + b) * x.sin()).sum(-1), torch.cat([x.relu(), x[:, :3] * 2], 1)


def reductions_and_norms(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b), torch.softmax(x, -1), torch.var_mean(x, 0), x.cumsum(1)


def convolution(image, weight, bias):
    return F.max_pool2d(F.relu(F.conv2d(image, weight, bias, padding=1)), 2)


CPP_WRAPPER_CASES = {
    "pointwise_and_matmul": (
        pointwise_and_matmul,
        lambda: (make_cpu((6, 12)), make_cpu((12, 12), seed=1), make_cpu((12,), seed=2)),
    ),
    "reductions_and_norms": (
        reductions_and_norms,
        lambda: (make_cpu((7, 40)), make_cpu((40,), seed=1), make_cpu((40,), seed=2)),
    ),
    "convolution": (
        convolution,
        lambda: (make_cpu((2, 3, 9, 9)), make_cpu((4, 3, 3, 3), seed=1), make_cpu((4,), seed=2)),
    ),
}


@pytest.mark.long
@pytest.mark.parametrize("name", sorted(CPP_WRAPPER_CASES))
def test_cpp_wrapper_equals_python_wrapper_and_cpu(name):
    fn, make_args = CPP_WRAPPER_CASES[name]
    device_args = [a.to(DEVICE) for a in make_args()]
    expected_cpu, _ = compiled(fn, *make_args(), cpp_wrapper=True)
    python_wrapper, _ = compiled(fn, *device_args, cpp_wrapper=False)
    cpp_wrapper, code = compiled(fn, *device_args, cpp_wrapper=True)
    assert_all_same(cpp_wrapper, expected_cpu)
    assert_all_same(python_wrapper, expected_cpu)
    # The C++ wrapper allocates on openreg and calls each kernel inside a host-access scope.
    source = "\n".join(code)
    assert "cached_torch_device_type_privateuse1" in source
    assert "torch_openreg::aoti::HostAccess<" in source


@pytest.mark.long
def test_cpp_wrapper_training_step_gives_the_python_wrappers_gradients():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 3))
    x, target = make_cpu((8, 10)), torch.arange(8) % 3

    def gradients(cpp_wrapper):
        device_model = copy.deepcopy(model).to(DEVICE)
        torch._dynamo.reset()
        with torch._inductor.config.patch(cpp_wrapper=cpp_wrapper):
            loss = F.cross_entropy(torch.compile(device_model)(x.to(DEVICE)), target.to(DEVICE))
            loss.backward()
        return [loss] + [p.grad for p in device_model.parameters()]

    expected = [t.cpu() for t in gradients(cpp_wrapper=False)]
    for actual, wanted in zip(gradients(cpp_wrapper=True), expected):
        assert_same(actual, wanted)


@pytest.mark.long
def test_cpp_wrapper_kernel_called_without_host_access_faults():
    """The negative control: the C++ wrapper with the host-access scope
    replaced by the CPU wrapper's direct call hands the kernel device
    addresses, and its first read faults."""
    proc = run_python(
        """
        import torch
        import torch._inductor.config
        from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
        from torch_openreg._inductor.cpp_wrapper import OpenRegCppWrapperCodegen
        OpenRegCppWrapperCodegen._generate_kernel_call_helper = CppWrapperCpu._generate_kernel_call_helper
        torch._inductor.config.cpp_wrapper = True
        x = torch.ones(64, device="openreg")
        print(torch.compile(lambda t: t * 2 + 1)(x).cpu().sum().item())
        """,
        timeout=600,
    )
    assert proc.returncode == -signal.SIGSEGV, (proc.returncode, proc.stdout, proc.stderr[-2000:])


def compile_package(model, args, path):
    with torch.no_grad():
        program = torch.export.export(model, tuple(args))
        return torch._inductor.aoti_compile_and_package(program, package_path=str(path))


def run_package(path, args, **load_kwargs):
    with torch.no_grad():
        return torch._inductor.aoti_load_package(str(path), **load_kwargs)(*args)


@pytest.mark.long
@pytest.mark.parametrize("name", ["cnn", "mlp", "transformer"])
def test_package_equals_the_same_package_compiled_for_the_cpu(name, tmp_path):
    model, make_args = models()[name]
    cpu_package = compile_package(model, make_args(), tmp_path / "cpu.pt2")
    device_args = [a.to(DEVICE) for a in make_args()]
    device_package = compile_package(copy.deepcopy(model).to(DEVICE), device_args, tmp_path / "openreg.pt2")
    assert torch._inductor.aoti_load_package(device_package).get_metadata()["AOTI_DEVICE_KEY"] == DEVICE
    assert_same(run_package(device_package, device_args), run_package(cpu_package, make_args()))


@pytest.mark.long
def test_custom_operators_run_in_a_package(tmp_path):
    """Every operator of the openreg and openreg_py namespaces (functional, out=, mutating, C++ and Python
    kernels) in one package, against the eager CPU model (the CPU's C++ wrapper cannot compile a custom operator
    with an out= overload: it calls a C shim named after the operator, which does not exist)."""
    model, make_args = models()["custom_ops"]
    device_args = [a.to(DEVICE) for a in make_args()]
    package = compile_package(copy.deepcopy(model).to(DEVICE), device_args, tmp_path / "custom.pt2")
    with torch.no_grad():
        assert_same(run_package(package, device_args), model(*make_args()))


@pytest.mark.long
def test_loadable_library_operators_run_in_a_package_and_are_named_when_missing(tmp_path):
    package = tmp_path / "extra.pt2"
    tests = str(Path(__file__).resolve().parent)
    compile_and_run = f"""
        import copy, sys
        sys.path.insert(0, {tests!r})
        import torch, torch_openreg
        torch.ops.load_library(torch_openreg.extra_ops_path())
        from conftest import assert_same
        from test_aot_inductor import compile_package, run_package
        from test_export import models
        model, make_args = models()["extra_ops"]
        device_args = [a.to("openreg") for a in make_args()]
        compile_package(copy.deepcopy(model).to("openreg"), device_args, {str(package)!r})
        with torch.no_grad():
            assert_same(run_package({str(package)!r}, device_args), model(*make_args()))
        print("equal")
    """
    assert check_ok(run_python(compile_and_run, timeout=600)).splitlines()[-1] == "equal"
    # Without the library, loading fails naming the operator and how to load it.
    proc = run_python(f"import torch; torch._inductor.aoti_load_package({str(package)!r})", timeout=300)
    assert proc.returncode == 1
    assert "openreg_extra::rms_norm" in proc.stderr
    assert "torch.ops.load_library(torch_openreg.extra_ops_path())" in proc.stderr


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 4)

    def forward(self, x):
        return self.linear(x).sin()


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    """A small model compiled for the CPU and for openreg, with its CPU input."""
    directory = tmp_path_factory.mktemp("packages")
    torch.manual_seed(0)
    model, x = Small(), make_cpu((3, 8))
    return {
        "cpu": compile_package(model, [x], directory / "cpu.pt2"),
        DEVICE: compile_package(copy.deepcopy(model).to(DEVICE), [x.to(DEVICE)], directory / "openreg.pt2"),
        "input": x,
        "expected": run_package(compile_package(model, [x], directory / "cpu_again.pt2"), [x]),
    }


@pytest.mark.slow
def test_package_runs_on_the_device_it_is_loaded_for(packages):
    x = packages["input"]
    assert_same(run_package(packages[DEVICE], [x.to(DEVICE)]), packages["expected"])
    on_second = run_package(packages[DEVICE], [x.to("openreg:1")], device_index=1)
    assert on_second.device == torch.device("openreg:1")
    assert torch.equal(on_second.cpu(), packages["expected"])


@pytest.mark.slow
def test_inputs_on_the_wrong_device_are_refused(packages):
    x = packages["input"]
    with pytest.raises(ValueError, match=r"loaded for openreg:0 got input 0 on cpu \(move the inputs to openreg:0"):
        run_package(packages[DEVICE], [x])
    with pytest.raises(
        ValueError, match="loaded for openreg:0 got input 0 on openreg:1 .load the package with device_index=1"
    ):
        run_package(packages[DEVICE], [x.to("openreg:1")])
    with pytest.raises(ValueError, match="compiled for cpu and got an input on openreg:0: move the inputs to cpu"):
        run_package(packages["cpu"], [x.to(DEVICE)])
    with pytest.raises(RuntimeError, match="Invalid openreg device index 7"):
        torch._inductor.aoti_load_package(packages[DEVICE], device_index=7)


@pytest.mark.slow
def test_new_constants_from_openreg_or_cpu_tensors(packages):
    """load_constants on an openreg package takes openreg tensors (as a CUDA package takes CUDA ones) and CPU
    tensors; the next run uses them, as the CPU package does with the same weights."""
    x = packages["input"]
    weight = {"linear.weight": make_cpu((4, 8), seed=5)}  # the bias is folded into a kernel: not a constant
    cpu_model = torch._inductor.aoti_load_package(packages["cpu"])
    cpu_model.load_constants(weight, check_full_update=False)
    with torch.no_grad():
        expected = cpu_model(x)
    for device in (DEVICE, "cpu"):
        model = torch._inductor.aoti_load_package(packages[DEVICE])
        model.load_constants({name: value.to(device) for name, value in weight.items()}, check_full_update=False)
        with torch.no_grad():
            assert_same(model(x.to(DEVICE)), expected)
    with pytest.raises(ValueError, match="with user_managed=True, pass CPU tensors"):
        model.load_constants(
            {"linear.weight": weight["linear.weight"].to(DEVICE)}, check_full_update=False, user_managed=True
        )


@pytest.mark.slow
def test_unloading_a_package_frees_its_device_memory(packages):
    """The package's weights are copied to the device at the first run and freed with the loaded model."""
    code = f"""
        import gc, torch
        x = torch.ones(3, 8, device="openreg")
        model = torch._inductor.aoti_load_package({str(packages[DEVICE])!r})
        with torch.no_grad():
            y = model(x)
        print("RESERVED_WHILE_LOADED", torch.openreg.memory_reserved() > 0)
        del model, x, y
        gc.collect()
        torch.openreg.empty_cache()
        print("RESERVED_AFTER", torch.openreg.memory_reserved())
    """
    output = check_ok(run_python(code, timeout=300))
    assert "RESERVED_WHILE_LOADED True" in output and "RESERVED_AFTER 0" in output, output


@pytest.mark.long
def test_example_runs_the_package_in_a_fresh_process():
    """examples/export_and_aoti.py: the transformer with a custom operator, exported and compiled for openreg,
    loaded in a second process, equals the CPU package bit for bit and the eager CPU model within tolerance."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tempfile.gettempdir(),
        check=False,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-3000:]}"
    assert "openreg package vs CPU package:     largest difference 0\n" in proc.stdout
    assert proc.stdout.splitlines()[-1] == "match"
