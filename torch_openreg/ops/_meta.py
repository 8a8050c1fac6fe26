"""Fake kernels of the C++ operators in the ``openreg`` namespace.

A fake kernel computes what a call returns without computing any value: the
sizes, strides, dtype and device of the results, and the checks that reject a
call. It serves the meta device, FakeTensorMode and torch.compile tracing, so
each one mirrors its real kernel in csrc/custom/CustomKernels.cpp: the same
checks, and results laid out as ATen's elementwise kernels lay them out
(``empty_like``: a dense input's strides are kept). An out= kernel resizes
``out`` as the real one does and returns it.

``openreg::flat_view`` has no fake kernel: it is CompositeImplicitAutograd
(csrc/custom/FlatView.cpp), traced through the ATen view it calls.

csrc/custom/CustomOps.cpp names this module (``set_python_module``), so these
registrations must stay here.
"""
import torch

from ._device_check import check_same_device


def _check_out(op, self, out, dtype):
    check_same_device(op, self, out)
    torch._check(
        out.dtype == dtype,
        lambda: f"{op}: expected out to have dtype {dtype} for self of dtype {self.dtype}, but got {out.dtype}",
    )


def _check_floating(op, self):
    torch._check(
        self.dtype.is_floating_point,
        lambda: f"{op}: expected a floating-point tensor, but got {self.dtype} on {self.device}",
    )


def _resized(out, like):
    if out.shape != like.shape:
        out.resize_(like.shape)
    return out


@torch.library.register_fake("openreg::custom_abs")
def _custom_abs(self):
    return torch.empty_like(self, dtype=self.dtype.to_real())


@torch.library.register_fake("openreg::custom_abs.out")
def _custom_abs_out(self, *, out):
    _check_out("openreg::custom_abs.out", self, out, self.dtype.to_real())
    return _resized(out, self)


@torch.library.register_fake("openreg::scaled_tanh")
def _scaled_tanh(self, scale):
    _check_floating("openreg::scaled_tanh", self)
    return torch.empty_like(self)


@torch.library.register_fake("openreg::scaled_tanh.out")
def _scaled_tanh_out(self, scale, *, out):
    _check_floating("openreg::scaled_tanh.out", self)
    _check_out("openreg::scaled_tanh.out", self, out, self.dtype)
    return _resized(out, self)
