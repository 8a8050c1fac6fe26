"""openreg's backward passes run on the thread that calls ``backward()``, as the CPU's do.

PyTorch's autograd engine gives every device type but the CPU, Meta and Lazy a worker thread per device and runs
that device's backward nodes there: a GPU's host thread only launches kernels, and launching from a thread of its
own lets the caller's CPU work overlap. openreg's kernels execute on the host, so on that thread they open an
OpenMP team of their own, the process's second; with more OpenMP threads than cores libgomp shortens every idle
worker's spin, and from then on every parallel region of the process pays a futex wake-up. A training script ran
its step 1.6x-1.8x slower than the same script on the CPU for that reason alone (docs/performance.md, "Backward
passes on the calling thread").

The engine has one switch that keeps device nodes on the calling thread: the thread-local
``torch.autograd.set_multithreading_enabled(False)``, read once when a backward call builds its graph task. openreg
sets it for the duration of a backward call whose roots are all openreg tensors on the current device, and only
when the caller left it on. The current-device condition keeps what backward code observes as on a GPU: a worker
thread runs its nodes with its device current, and the caller's current device is the roots' device here. Inside
such a call ``torch.autograd.is_multithreading_enabled()`` reads False (the switch in use); before and after, and
in every other backward call, nothing changes.
"""

import torch
from torch.autograd.variable import Variable

from . import _C


def _on_current_openreg_device(roots) -> bool:
    if isinstance(roots, torch.Tensor):
        roots = (roots,)
    current = _C._current_device()
    for root in roots:
        if not isinstance(root, torch.Tensor):  # a GradientEdge: its device is not known here
            return False
        device = root.device
        if device.type != "openreg" or device.index != current:
            return False
    return True


class _CallingThreadEngine(torch._C._ImperativeEngine):
    """The engine torch.autograd calls (``Variable._execution_engine``), running openreg's graphs on the caller."""

    def run_backward(self, tensors, *args, **kwargs):
        if not (torch._C._is_multithreading_enabled() and _on_current_openreg_device(tensors)):
            return super().run_backward(tensors, *args, **kwargs)
        torch._C._set_multithreading_enabled(False)
        try:
            return super().run_backward(tensors, *args, **kwargs)
        finally:
            torch._C._set_multithreading_enabled(True)


def install() -> None:
    # torch.autograd.graph._engine_run_backward looks the engine up on every call; every other use of it
    # (queue_callback, is_checkpoint_valid) acts on the engine's current graph task, whichever instance is asked.
    if not isinstance(Variable._execution_engine, _CallingThreadEngine):
        Variable._execution_engine = _CallingThreadEngine()
