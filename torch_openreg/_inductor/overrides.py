"""The places where Inductor decides "not the CPU, so a GPU", and what openreg
overrides there.

openreg's kernels come from Inductor's C++ CPU code generator, so the
decisions that pick or feed that generator must come out as for the CPU.
Inductor makes them with inline ``device.type == "cpu"`` checks (and, for the
device guard, a list of GPU types) that no registration reaches; each override below wraps one Inductor function, answers
as for the CPU when the device is openreg, and otherwise calls Inductor's own
function: compiling for any other device is unchanged (tests/test_compile.py
compares the generated CPU code with and without torch_openreg).

Installed once, with the Inductor backend (registration.py).
"""

import functools
import types

import torch
from torch._inductor import config, graph, ir, lowering, scheduler, utils
from torch._inductor.codegen import common
from torch._inductor.kernel import conv, mm_common

_DEVICE = "openreg"


def _on_openreg(device) -> bool:
    return device is not None and torch.device(device).type == _DEVICE


def _cpu_backend_for_openreg(get_current_backend):
    # utils.get_current_backend names the code generator of the current
    # device: config.cpu_backend ("cpp") for "cpu", config.cuda_backend
    # ("triton") for any device it does not know. The C++ generator and
    # codegen/common.py's CSE (the dtype of a `masked` value, asserts) ask it
    # which generator runs; "triton" there breaks C++ kernels with masked
    # loads, random numbers and indirect indexing.
    @functools.wraps(get_current_backend)
    def get_current_backend_openreg(device_type=None):
        if device_type is None:
            from torch._inductor.virtualized import V

            device_type = V.graph.get_current_device_or_throw().type
        if device_type == _DEVICE:
            return config.cpu_backend
        return get_current_backend(device_type)

    return get_current_backend_openreg


def _cpu_scheduler_nodes_include_openreg(is_cpu):
    # BaseSchedulerNode.is_cpu() guards exactly three scheduler steps that
    # rewrite loops for GPU-style (SIMD) kernels and are skipped for the C++
    # generator: loop reordering (shared_data_after_reordering_loop), loop
    # index inversion (shared_data_after_inverting_indexing) and the
    # re-indexing of a pointwise node to a reduction's domain
    # (_try_reindex_pointwise_for_reduction), which crashes on C++ kernels'
    # reduction groups ("can't multiply sequence by non-int of type 'tuple'").
    @functools.wraps(is_cpu)
    def is_cpu_or_openreg(self):
        return is_cpu(self) or _on_openreg(self.get_device())

    return is_cpu_or_openreg


def _cpu_layout_optimization_for_openreg_convolutions(decide_layout_opt):
    # GraphLowering.decide_layout_opt turns convolution inputs and weights
    # channels-last. For convolutions on the CPU (mkldnn enabled) it always
    # does; for another device it uses heuristics measured on GPUs, which
    # keep small-channel networks contiguous. openreg's convolution is the
    # CPU's oneDNN kernel, so it gets the CPU's answer: the same channels-last
    # convolutions and fused kernels as the CPU's code (contiguous inputs cost
    # the oneDNN kernels layout conversions). The compiled graph's stride checks
    # hold because fake tensors predict the CPU's output layout for openreg
    # convolutions (fake_convolution.py).
    @functools.wraps(decide_layout_opt)
    def decide_layout_opt_openreg(gm, *, is_inference):
        convolutions = [node for node in gm.graph.nodes if node.target is torch.ops.aten.convolution.default]
        if (
            config.layout_optimization
            and convolutions
            and all(_on_openreg(node.args[i].meta["val"].device) for node in convolutions for i in (0, 1))
            and torch.backends.mkldnn.enabled
            and torch.backends.mkldnn.is_available()
        ):
            return True
        return decide_layout_opt(gm, is_inference=is_inference)

    return staticmethod(decide_layout_opt_openreg)


def _cpu_variance_algorithm_for_openreg(use_two_step_variance):
    # lowering.use_two_step_variance picks var_mean's algorithm (two passes,
    # or Welford) from a threshold per device: config.cpp's for the CPU,
    # config.unroll_reductions_threshold (8) for a device it does not know.
    # Everything else in its CPU branch is what an unknown device gets, so
    # openreg takes the CPU's threshold: layer and batch norms compute as on
    # the CPU.
    @functools.wraps(use_two_step_variance)
    def use_two_step_variance_openreg(x, axis, keepdim, input_dtype):
        if _on_openreg(x.get_device()):
            with config.patch(unroll_reductions_threshold=config.cpp.use_two_step_variance_threshold):
                return use_two_step_variance(x, axis, keepdim, input_dtype)
        return use_two_step_variance(x, axis, keepdim, input_dtype)

    return use_two_step_variance_openreg


def _exact_constant_divisions_for_openreg(get_constant_value):
    # lowering.div_prim rewrites `x / c` as `x * (1 / c)`, which rounds
    # differently, on every device but the CPU (pytorch#157959); it asks
    # get_constant_value for `c`. Answering "not a constant" for openreg
    # keeps the CPU's exact division.
    @functools.wraps(get_constant_value)
    def get_constant_value_openreg(x):
        # x may also be a Python number (the divisor of avg_pool's mean).
        if isinstance(x, ir.IRNode) and _on_openreg(x.get_device()):
            return None
        return get_constant_value(x)

    return get_constant_value_openreg


def _cpu_realize_heuristics_for_openreg(is_cpu):
    # ir.is_cpu picks the heuristics that decide which intermediate values are
    # stored to a buffer rather than recomputed where they are used: the CPU's
    # opcount and read-count thresholds, and on the CPU a value reused by
    # several consumers is stored when it holds exp, log, tanh or sigmoid.
    # With another device's answer, a cross-entropy backward recomputes the
    # forward's log-sum-exp inside a vectorized loop instead of reading it
    # back, and rounds differently from the CPU's kernels.
    @functools.wraps(is_cpu)
    def is_cpu_or_openreg(x):
        return is_cpu(x) or ir.get_device_type(x) == _DEVICE

    return is_cpu_or_openreg


def _cpu_convolution_bias_for_openreg(ir_module):
    # kernel/conv.py's convolution lowering reads the input's device type
    # (ir.get_device_type) for two decisions: XPU's conv1d-as-conv2d, and
    # "peel off the bias" on every device but the CPU (a bias-less extern
    # convolution plus an add kernel, because cuDNN is slower with a bias).
    # openreg's convolution is the CPU's oneDNN kernel, which adds the bias
    # itself; the module's view of `ir` answers "cpu" for openreg so that the
    # bias stays in the convolution, as in the CPU's graph.
    class IrWithOpenRegAsCpu(types.ModuleType):
        def __getattr__(self, name):
            return getattr(ir_module, name)

        @staticmethod
        def get_device_type(x):
            device_type = ir_module.get_device_type(x)
            return "cpu" if device_type == _DEVICE else device_type

    return IrWithOpenRegAsCpu(ir_module.__name__)


def _device_guard_for_openreg(device_need_guard):
    # scheduler.device_need_guard decides whether the wrapper enters the
    # kernels' device around them (`with torch.openreg.device(i):`, from
    # device_op_overrides.py), as CUDA's does; it answers yes for GPU types
    # only. Without the guard, a graph whose tensors are on openreg:1 would
    # allocate its buffers, and run its extern kernels' outputs, on the
    # current device instead.
    @functools.wraps(device_need_guard)
    def device_need_guard_openreg(device_type):
        return device_type == _DEVICE or device_need_guard(device_type)

    return device_need_guard_openreg


@functools.cache
def install() -> None:
    backend = _cpu_backend_for_openreg(utils.get_current_backend)
    # Also rebound where it was imported by name.
    for module in (utils, common, scheduler, mm_common):
        module.get_current_backend = backend
    scheduler.BaseSchedulerNode.is_cpu = _cpu_scheduler_nodes_include_openreg(scheduler.BaseSchedulerNode.is_cpu)
    scheduler.device_need_guard = _device_guard_for_openreg(scheduler.device_need_guard)
    ir.is_cpu = _cpu_realize_heuristics_for_openreg(ir.is_cpu)
    conv.ir = _cpu_convolution_bias_for_openreg(ir)
    lowering.use_two_step_variance = _cpu_variance_algorithm_for_openreg(lowering.use_two_step_variance)
    lowering.get_constant_value = _exact_constant_divisions_for_openreg(lowering.get_constant_value)
    graph.GraphLowering.decide_layout_opt = _cpu_layout_optimization_for_openreg_convolutions(
        graph.GraphLowering.decide_layout_opt
    )
