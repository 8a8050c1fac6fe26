"""openreg graphs, shaped like ``torch.cuda.graphs``.

``OpenRegGraph`` is ``torch.accelerator.Graph`` (csrc/graph/: capture records
the operator calls issued to the capture stream, replay calls them again on the
same tensors) with ``CUDAGraph``'s methods; ``graph`` and
``make_graphed_callables`` are torch.cuda's helpers over it.
"""

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from .. import _C
from .streams import Stream, current_stream, stream

__all__ = ["OpenRegGraph", "graph", "graph_pool_handle", "is_current_stream_capturing", "make_graphed_callables"]


def is_current_stream_capturing() -> bool:
    """True while the current stream of the current device is being captured into a graph."""
    return _C._is_current_stream_capturing()


def graph_pool_handle() -> tuple[int, int]:
    """A new graph memory pool id, to pass as ``pool`` to several captures."""
    return _C._mempool_new_id(True)


class OpenRegGraph(torch.accelerator.Graph):
    """``torch.cuda.CUDAGraph`` for openreg: ``capture_begin(pool=None,
    capture_error_mode="global")``, ``capture_end``, ``instantiate``, ``replay``,
    ``reset``, ``pool``, ``enable_debug_mode``, ``debug_dump``. Capture must run
    on a non-default stream (``graph`` provides one). Replay reruns the captured
    operators on the captured tensors: refresh inputs in place, read outputs
    from the tensors capture returned."""

    def capture_begin(self, pool=None, capture_error_mode: str = "global") -> None:
        torch._C._acceleratorGraph.capture_begin(self, pool=pool, capture_error_mode=capture_error_mode)


class graph:
    """Captures the work of the ``with`` block into ``openreg_graph``, as
    ``torch.cuda.graph``: synchronizes, empties the cache, makes ``stream`` (or a
    side stream shared by all captures) current, and captures on it."""

    default_capture_stream: Stream | None = None

    def __init__(
        self, openreg_graph: OpenRegGraph, pool=None, stream: Stream | None = None, capture_error_mode: str = "global"
    ):
        if stream is None and graph.default_capture_stream is None:
            graph.default_capture_stream = Stream()
        self.openreg_graph = openreg_graph
        self.pool = pool
        self.capture_stream = stream if stream is not None else graph.default_capture_stream
        self.capture_error_mode = capture_error_mode
        self._stream_context = None

    def __enter__(self) -> None:
        torch.openreg.synchronize()
        torch.openreg.empty_cache()
        self._stream_context = stream(self.capture_stream)
        self._stream_context.__enter__()
        self.openreg_graph.capture_begin(self.pool, capture_error_mode=self.capture_error_mode)

    def __exit__(self, *exc_info) -> None:
        try:
            self.openreg_graph.capture_end()
        finally:
            self._stream_context.__exit__(*exc_info)


def make_graphed_callables(
    callables, sample_args, num_warmup_iters: int = 3, allow_unused_input: bool = False, pool=None
):
    """Graphed versions of callables (functions or ``nn.Module``\\ s), as
    ``torch.cuda.make_graphed_callables``: each callable's forward and backward
    are captured once with ``sample_args`` (after ``num_warmup_iters`` warm-up
    runs on a side stream) and replayed on every call. Calls must pass tensors
    shaped like the samples; a module is graphed in the training mode it had at
    capture and runs eagerly in the other."""
    just_one = not isinstance(callables, tuple)
    if just_one:
        callables, sample_args = (callables,), (sample_args,)
    if len(callables) != len(sample_args):
        raise ValueError("make_graphed_callables: callables and sample_args must have the same length")
    if torch.is_autocast_enabled("openreg") and torch.is_autocast_cache_enabled():
        raise RuntimeError(
            "make_graphed_callables does not support the autocast caching. Please set `cache_enabled=False`."
        )
    graphed = tuple(
        _graph_callable(func, tuple(args), num_warmup_iters, allow_unused_input, pool)
        for func, args in zip(callables, sample_args)
    )
    return graphed[0] if just_one else graphed


def _graph_callable(func, args, num_warmup_iters, allow_unused_input, pool):
    if not all(isinstance(arg, torch.Tensor) for arg in args):
        raise TypeError("make_graphed_callables: sample_args may contain only tensors")
    if isinstance(func, torch.nn.Module):
        if func._backward_hooks or func._forward_hooks or func._forward_pre_hooks:
            raise RuntimeError("make_graphed_callables: modules must not have hooks registered at graphing time")
        params = tuple(func.parameters())
    else:
        params = ()
    static_inputs = args + params
    differentiable = [t for t in static_inputs if t.requires_grad]

    def gradients(outputs, grad_outputs):
        pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
        if not pairs or not differentiable:
            return ()
        return torch.autograd.grad(
            [o for o, _ in pairs], differentiable, [g for _, g in pairs], allow_unused=allow_unused_input
        )

    side = Stream()
    side.wait_stream(current_stream())
    with stream(side):
        for _ in range(num_warmup_iters):
            outputs, _ = tree_flatten(func(*args))
            # (torch.cuda's warm-up passes empty_like gradients; zeros keep the sanitizer's initcheck quiet.)
            gradients(outputs, [torch.zeros_like(o) for o in outputs])
    current_stream().wait_stream(side)

    forward_graph = OpenRegGraph()
    with graph(forward_graph, pool=pool, stream=side):
        static_outputs, output_spec = tree_flatten(func(*args))
    static_grad_outputs = [torch.empty_like(o) if o.requires_grad else None for o in static_outputs]
    backward_graph = OpenRegGraph()
    with graph(backward_graph, pool=forward_graph.pool(), stream=side):
        grads = iter(gradients(static_outputs, static_grad_outputs))
    static_grad_inputs = [next(grads) if t.requires_grad else None for t in static_inputs]

    class Graphed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            for static, given in zip(static_inputs, inputs):
                if static.data_ptr() != given.data_ptr():
                    static.copy_(given)
            forward_graph.replay()
            return tuple(o.detach() for o in static_outputs)

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, *grad_outputs):
            for static, given in zip(static_grad_outputs, grad_outputs):
                if static is not None:
                    static.copy_(given if given is not None else torch.zeros_like(static))
            backward_graph.replay()
            return tuple(g.detach() if g is not None else None for g in static_grad_inputs)

    def run(*inputs):
        if len(inputs) != len(args):
            raise TypeError(f"graphed callable expects {len(args)} tensor arguments, got {len(inputs)}")
        return tree_unflatten(list(Graphed.apply(*inputs, *params)), output_spec)

    if isinstance(func, torch.nn.Module):
        eager_forward = func.forward
        graphed_training = func.training

        def forward(*inputs):
            return run(*inputs) if func.training == graphed_training else eager_forward(*inputs)

        func.forward = forward
        return func
    return run
