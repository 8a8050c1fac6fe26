"""A device-generic test file written the way PyTorch writes its own (for the external runner's demo).

It names no device: ``instantiate_device_type_tests`` makes one class per
available device type, and the runner picks openreg through
``PYTORCH_TESTING_DEVICE_ONLY_FOR``. Expected on openreg: 4 passed, 2 skipped
(5 passed, 1 skipped with ``--bypass-device-restrictions``).
"""

import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests, onlyOn, skipIf
from torch.testing._internal.common_utils import TestCase, run_tests


class TestDemoDeviceGeneric(TestCase):
    @dtypes(torch.float32, torch.int64, torch.bool)
    def test_where_matches_cpu(self, device, dtype):
        values = torch.arange(12).reshape(3, 4).to(dtype)
        condition = torch.arange(12).reshape(3, 4) % 3 == 0
        expected = torch.where(condition, values, torch.zeros((), dtype=dtype))
        actual = torch.where(condition.to(device), values.to(device), torch.zeros((), dtype=dtype, device=device))
        self.assertEqual(actual.device.type, torch.device(device).type)
        self.assertEqual(actual.cpu(), expected)

    def test_device_is_the_accelerator(self, device):
        self.assertEqual(torch.device(device).type, torch.accelerator.current_accelerator().type)

    @onlyOn("cuda")
    def test_mixed_devices_raise(self, device):
        with self.assertRaisesRegex(RuntimeError, "Expected all tensors to be on the same device"):
            torch.ones(2, device=device) + torch.ones(2)

    @skipIf(True, "demonstrates skipIf: always skipped on openreg", device_type="openreg")
    def test_skipped_on_openreg(self, device):
        self.fail("skipIf did not skip")


instantiate_device_type_tests(TestDemoDeviceGeneric, globals())

if __name__ == "__main__":
    run_tests()
