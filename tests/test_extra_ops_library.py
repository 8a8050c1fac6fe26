"""The loadable operator library (csrc/extra_ops/, namespace openreg_extra).

torch_openreg builds it and says where it is, but never loads it: a user does,
with torch.ops.load_library(torch_openreg.extra_ops_path()). Each test runs in
a fresh process, so loading it here does not register its operators in the
pytest process.
"""

import json
import os

import pytest
import torch

import torch_openreg
from conftest import check_ok, run_python


def test_extra_ops_path_is_inside_the_installed_package():
    path = torch_openreg.extra_ops_path()
    assert os.path.isabs(path) and os.path.isfile(path)
    assert os.path.dirname(path).startswith(os.path.dirname(torch_openreg.__file__))
    assert os.path.basename(path) == "libopenreg_extra_ops.so"


@pytest.mark.slow
def test_importing_torch_openreg_does_not_load_the_library():
    out = check_ok(
        run_python(
            """
            import torch, torch_openreg
            print(any(name.startswith("openreg_extra::") for name in torch._C._dispatch_get_all_op_names()))
            """
        )
    )
    assert out.strip() == "False"


# Runs in the child: load, then every operator on openreg against the CPU, on
# meta, under FakeTensorMode and torch.compile, opcheck on both devices, and
# the documented errors. Prints the opcheck results as JSON.
_CHILD = """
import json
import torch, torch_openreg
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.library import opcheck

torch.ops.load_library(torch_openreg.extra_ops_path())
ops = torch.ops.openreg_extra
g = torch.Generator().manual_seed(0)

def rand(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=g, dtype=dtype)

def on(device, *tensors):
    return tuple(t.to(device) for t in tensors)

# Values: openreg's equal the CPU's bit for bit, in both dtypes.
x, a, b = rand(4, 5, 6), rand(7, 3, dtype=torch.float64), rand(2, 3, dtype=torch.float64)
x64, a32, b32 = x.double(), a.float(), b.float()
for op, args in [
    (ops.rms_norm, (x, 1e-5)),
    (ops.rms_norm, (x64, 1e-5)),
    (ops.pairwise_distance_sq, (a, b)),
    (ops.pairwise_distance_sq, (a32, b32)),
]:
    expected = op(*args)
    actual = op(*[t.to("openreg") if isinstance(t, torch.Tensor) else t for t in args])
    assert actual.device.type == "openreg" and actual.is_contiguous()
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)
torch.testing.assert_close(ops.rms_norm(x, 1e-5), x * torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-5))
torch.testing.assert_close(ops.pairwise_distance_sq(a, b), torch.cdist(a, b).square())

# Meta and fake tensors: the C++ Meta kernels give the shapes.
meta = ops.pairwise_distance_sq(torch.empty(7, 3, device="meta"), torch.empty(2, 3, device="meta"))
assert meta.device.type == "meta" and meta.shape == (7, 2), meta
assert ops.rms_norm(torch.empty(4, 5, device="meta"), 0.1).shape == (4, 5)
x_dev = x.to("openreg")
with FakeTensorMode() as mode:
    fake = ops.rms_norm(mode.from_tensor(x_dev), 1e-5)
    assert fake.shape == x.shape and fake.device == torch.device("openreg", 0), fake

# torch.compile traces them through the Meta kernels.
def f(x, a, b):
    return ops.rms_norm(x, 1e-6).sum() + ops.pairwise_distance_sq(a, b).sum()
dev = on("openreg", x, a.float(), b.float())
torch.testing.assert_close(torch.compile(f, backend="aot_eager", fullgraph=True)(*dev), f(*dev))

# No derivatives: backward raises, naming the operator.
y = ops.rms_norm(x.to("openreg").requires_grad_(), 1e-5)
try:
    y.sum().backward()
    raise AssertionError("backward did not raise")
except RuntimeError as e:
    assert "derivative for openreg_extra::rms_norm is not implemented" in str(e), e

# Errors name the operator and the offending values.
for call, message in [
    (lambda: ops.rms_norm(torch.ones(3, dtype=torch.int64, device="openreg"), 0.1), "expected float32 or float64, but got Long on openreg:0"),
    (lambda: ops.rms_norm(torch.ones(3, device="openreg"), -1.0), "expected eps >= 0, but got -1"),
    (lambda: ops.pairwise_distance_sq(torch.ones(2, 3, device="openreg"), torch.ones(2, 4, device="openreg")), "same number of columns"),
    (lambda: ops.pairwise_distance_sq(torch.ones(2, 3, device="openreg"), torch.ones(2, 3)), "openreg:0 and cpu"),
]:
    try:
        call()
        raise AssertionError(f"no error, expected {message!r}")
    except RuntimeError as e:
        assert message in str(e), e

results = {}
for device in ["cpu", "openreg"]:
    samples = {
        "rms_norm": [
            ("contiguous", (rand(3, 4), 1e-6)),
            ("transposed", (rand(4, 3).t(), 0.1)),
            ("empty", (rand(0, 4), 1e-6)),
            ("float64_1d", (rand(5, dtype=torch.float64), 0.0)),
        ],
        "pairwise_distance_sq": [
            ("contiguous", (rand(4, 3), rand(5, 3))),
            ("transposed", (rand(3, 4).t(), rand(3, 2).t())),
            ("empty", (rand(0, 3), rand(2, 3))),
            ("no_columns", (rand(2, 0), rand(3, 0))),
        ],
    }
    for name, cases in samples.items():
        for sample_id, args in cases:
            args = tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in args)
            result = opcheck(getattr(ops, name).default, args, raise_exception=False)
            results[f"{name}/{device}/{sample_id}"] = {k: str(v) for k, v in result.items()}
print(json.dumps(results))
"""


@pytest.mark.slow
def test_loaded_library_runs_on_openreg_meta_and_cpu():
    results = json.loads(check_ok(run_python(_CHILD)).splitlines()[-1])
    assert len(results) == 16
    failures = {sample: r for sample, r in results.items() if set(r.values()) != {"SUCCESS"}}
    assert not failures, failures
