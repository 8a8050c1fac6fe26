"""The Python wrapper Inductor generates for an openreg graph.

Inductor's wrapper allocates buffers (``empty_strided(..., device='openreg')``:
the caching allocator), runs extern kernels (``extern_kernels.mm`` and friends:
eager openreg operators) and calls the generated C++ kernels. Only the last
differs from the CPU's wrapper: a C++ kernel dereferences the pointers it gets,
and an openreg tensor's pointer is a device address, so every call goes through
``call_on_host(kernel, *args)`` (``csrc/inductor/CompiledKernelCall.cpp``), which
hands the kernel host views of the memory for exactly the call's duration, in
the current stream's order. ``TORCH_LOGS=output_code`` shows these calls.
"""

import warnings

from torch._inductor import config
from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen

_DEVICE = "openreg"
_CALL_ON_HOST = "call_on_host"


class _CompiledKernelCalls:
    """What the openreg wrappers (graph and subgraph) change in Inductor's."""

    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True, **kwargs):
        # Inductor's helper writes `kernel(args)` for CPU devices only and
        # raises "device openreg nyi" for others (wrapper.py,
        # PythonWrapperCodegen._generate_kernel_call_helper).
        if not triton and device is not None and device.type == _DEVICE:
            self.writeline(f"{_CALL_ON_HOST}({', '.join([kernel_name, *map(str, call_args)])})")
            return
        super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)


class OpenRegPythonWrapperCodegen(_CompiledKernelCalls, PythonWrapperCodegen):
    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if config.triton.cudagraphs:
            # mode="reduce-overhead" and "max-autotune" ask for CUDA graphs;
            # Inductor captures them for CUDA only and otherwise just logs a
            # perf hint ("skipping cudagraphs due to multiple devices:
            # device(type='openreg', ...)").
            warnings.warn(
                "torch.compile on openreg: mode='reduce-overhead' / 'max-autotune' capture no device graph "
                "(Inductor captures CUDA graphs only); the compiled code runs without one"
            )
        if is_subgraph:
            return OpenRegSubgraphPythonWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
        return OpenRegPythonWrapperCodegen()

    def write_header(self) -> None:
        super().write_header()
        self.imports.writeline(f"from torch_openreg._C import _call_on_host as {_CALL_ON_HOST}")


class OpenRegSubgraphPythonWrapperCodegen(_CompiledKernelCalls, SubgraphPythonWrapperCodegen):
    """Subgraphs (torch.cond, while_loop bodies, graph partitions) are written
    into their parent's module, whose header has the import."""
