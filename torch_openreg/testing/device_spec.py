"""The device spec of transformers' and diffusers' test suites, for openreg.

Both suites take their device from ``TRANSFORMERS_TEST_DEVICE`` /
``DIFFUSERS_TEST_DEVICE`` and, for a device they do not know by name, the
device's seeding, cache, count and memory functions from a Python file named by
``TRANSFORMERS_TEST_DEVICE_SPEC`` / ``DIFFUSERS_TEST_DEVICE_SPEC``. Their loaders
import the file by its path less ``.py`` (``path[:path.index(".py")]``), so it
must be named relative to the working directory, with no directory part:
``python -m torch_openreg.testing libraries env transformers`` writes a
one-line file importing this module into the working directory, and the pytest
plugin (``-p torch_openreg.testing.library_plugin --openreg-library
transformers``) does so for the run. transformers 5.2 reads ``MANUAL_SEED_FN``,
``EMPTY_CACHE_FN`` and ``DEVICE_COUNT_FN``; diffusers 0.42 also the memory
functions and ``SUPPORTS_TRAINING``. Each is ``torch.openreg``'s function, as
the suites map ``cuda`` to ``torch.cuda``'s.
"""

import torch

DEVICE_NAME = torch._C._get_privateuse1_backend_name()
_device_module = getattr(torch, DEVICE_NAME)

MANUAL_SEED_FN = _device_module.manual_seed
EMPTY_CACHE_FN = _device_module.empty_cache
DEVICE_COUNT_FN = _device_module.device_count
SUPPORTS_TRAINING = True
RESET_PEAK_MEMORY_STATS_FN = _device_module.reset_peak_memory_stats
RESET_MAX_MEMORY_ALLOCATED_FN = _device_module.reset_max_memory_allocated
MAX_MEMORY_ALLOCATED_FN = _device_module.max_memory_allocated
MEMORY_ALLOCATED_FN = _device_module.memory_allocated
SYNCHRONIZE_FN = _device_module.synchronize
