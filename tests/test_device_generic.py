"""Device-generic tests through PyTorch's own harness (``instantiate_device_type_tests``), for openreg.

``import torch`` has registered openreg before ``common_device_type`` is
imported; ``PrivateUse1TestBase.setUpClass()`` before instantiation makes every
generated class ``...OPENREG`` (and applies ``@dtypesIfPRIVATEUSE1``-style
device keys under the name ``openreg``).
"""

import itertools

import torch
from torch.testing._internal.common_device_type import (
    OpDTypes,
    PrivateUse1TestBase,
    deviceCountAtLeast,
    dtypes,
    dtypesIfPRIVATEUSE1,
    instantiate_device_type_tests,
    onlyAccelerator,
    onlyPRIVATEUSE1,
    ops,
    skipIf,
)
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase

PrivateUse1TestBase.setUpClass()

OPS = [op for op in op_db if op.full_name in {"abs", "add", "mul", "where", "sum", "cat", "matmul", "softmax"}]
SAMPLES_PER_OP = 3


class TestHarness(TestCase):
    @onlyPRIVATEUSE1
    def test_device_is_openreg(self, device):
        self.assertEqual(torch.device(device).type, "openreg")
        self.assertEqual(self.device_type, "openreg")

    @dtypes(torch.float32, torch.int64, torch.bool)
    def test_roundtrip(self, device, dtype):
        host = torch.arange(10).to(dtype)
        self.assertEqual(host.to(device).cpu(), host)

    @onlyAccelerator
    def test_mixed_devices_raise(self, device):
        with self.assertRaisesRegex(RuntimeError, "Expected all tensors to be on the same device"):
            torch.ones(3, device=device) + torch.ones(3)

    @skipIf(torch.openreg.device_count() < 2, "needs two openreg devices")
    def test_copy_between_devices(self, device):
        source = torch.arange(6.0, device=f"{self.device_type}:0")
        self.assertEqual(source.to(f"{self.device_type}:1").cpu(), torch.arange(6.0))

    @deviceCountAtLeast(2)
    def test_all_devices_listed(self, devices):
        self.assertEqual(devices, [f"openreg:{index}" for index in range(torch.openreg.device_count())])

    @dtypes(torch.float32)
    @dtypesIfPRIVATEUSE1(torch.float64)
    def test_device_specific_dtypes(self, device, dtype):
        self.assertEqual(dtype, torch.float64)

    @ops(OPS, dtypes=OpDTypes.supported, allowed_dtypes=(torch.float32, torch.int64))
    def test_op_matches_cpu(self, device, dtype, op):
        for sample in itertools.islice(op.sample_inputs("cpu", dtype), SAMPLES_PER_OP):
            expected = op(sample.input, *sample.args, **sample.kwargs)
            moved = sample.transform(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t)
            actual = op(moved.input, *moved.args, **moved.kwargs)
            self.assertEqual(actual.device.type, self.device_type)
            self.assertEqual(actual.cpu(), expected, atol=0, rtol=0)


instantiate_device_type_tests(TestHarness, globals(), only_for="openreg")


def test_harness_instantiated_openreg_classes():
    generated = sorted(name for name in globals() if name.startswith("TestHarness"))
    assert generated == ["TestHarnessOPENREG"], generated
    generated_class = globals()["TestHarnessOPENREG"]
    tests = [
        name for name in dir(generated_class) if name.startswith("test_") and callable(getattr(generated_class, name))
    ]
    assert len(tests) > len(OPS), tests
    assert all("openreg" in name for name in tests), tests
