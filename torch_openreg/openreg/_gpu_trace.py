"""Where PyTorch delivers openreg's GPU trace (``c10::impl::GPUTrace``), as ``torch.cuda._gpu_trace`` receives CUDA's.

PyTorch's Python interpreter hands each trace call made for a device type to
``torch.<device type name>._gpu_trace.<Kind>Callbacks.fire_callbacks``: for PrivateUse1 renamed ``openreg``, to the
registries below. openreg's C++ makes those calls only while the sanitizer is on (``csrc/sanitizer``); the sanitizer's
checker is the one listener (``_stream_order.py``). A callback's exception is logged, never raised into the caller.
"""

from torch._utils import CallbackRegistry

EventCreationCallbacks: "CallbackRegistry[int]" = CallbackRegistry("openreg event creation")
EventDeletionCallbacks: "CallbackRegistry[int]" = CallbackRegistry("openreg event deletion")
EventRecordCallbacks: "CallbackRegistry[int, int]" = CallbackRegistry("openreg event record")
EventWaitCallbacks: "CallbackRegistry[int, int]" = CallbackRegistry("openreg event wait")
MemoryAllocationCallbacks: "CallbackRegistry[int]" = CallbackRegistry("openreg memory allocation")
MemoryDeallocationCallbacks: "CallbackRegistry[int]" = CallbackRegistry("openreg memory deallocation")
StreamCreationCallbacks: "CallbackRegistry[int]" = CallbackRegistry("openreg stream creation")
DeviceSynchronizationCallbacks: "CallbackRegistry[[]]" = CallbackRegistry("openreg device synchronization")
StreamSynchronizationCallbacks: "CallbackRegistry[int]" = CallbackRegistry("openreg stream synchronization")
EventSynchronizationCallbacks: "CallbackRegistry[int]" = CallbackRegistry("openreg event synchronization")
