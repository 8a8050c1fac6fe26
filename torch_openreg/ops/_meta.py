"""Fake kernels of the C++ operators in the ``openreg`` namespace, named by
operators.yaml and registered at import by ``_registration``.

A fake kernel computes what a call returns without computing any value: the
sizes, strides, dtype and device of the results, and the checks that reject a
call. It serves the meta device, FakeTensorMode and torch.compile tracing, so
each one mirrors its real kernel in csrc/custom/CustomKernels.cpp: the same
checks, and results laid out as ATen's elementwise kernels lay them out
(``empty_like``: a dense input's strides are kept). An out= kernel resizes
``out`` as the real one does and returns it.

``openreg::flat_view`` has no fake kernel: it is CompositeImplicitAutograd
(csrc/custom/FlatView.cpp), traced through the ATen view it calls.

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


def custom_abs_fake(self):
    return torch.empty_like(self, dtype=self.dtype.to_real())


def custom_abs_out_fake(self, *, out):
    _check_out("openreg::custom_abs.out", self, out, self.dtype.to_real())
    return _resized(out, self)


def scaled_tanh_fake(self, scale):
    _check_floating("openreg::scaled_tanh", self)
    return torch.empty_like(self)


def scaled_tanh_out_fake(self, scale, *, out):
    _check_floating("openreg::scaled_tanh.out", self)
    _check_out("openreg::scaled_tanh.out", self, out, self.dtype)
    return _resized(out, self)
