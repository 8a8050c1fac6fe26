// The `openreg` operator namespace: the schemas of torch_openreg's C++ custom
// operators, defined once here. Their kernels register per dispatch key in
// other files:
//   CustomKernels.cpp             CPU and PrivateUse1 (openreg)
//   CustomAutograd.cpp            AutogradCPU and AutogradPrivateUse1
//   FlatView.cpp                  CompositeImplicitAutograd (the view operator)
//   torch_openreg/ops/_meta.py    fake kernels (Meta), in Python
// torch_openreg/ops/operators.yaml declares the same operators;
// tests/test_operator_yaml.py fails when the two disagree.
#include <torch/library.h>

TORCH_LIBRARY(openreg, m) {
  // The fake kernels are registered by this Python module. An operator traced
  // with fake tensors before it was imported fails with an error naming it.
  m.set_python_module("torch_openreg.ops._meta");

  // Every operator passes torch.library.opcheck, which pt2_compliant_tag
  // promises to torch.compile. `out` marks out= variants: their mutable
  // argument is a write-only buffer, which lets functionalization handle them.
  const at::Tag compliant = at::Tag::pt2_compliant_tag;

  // Forward only: its backward raises (CustomAutograd.cpp).
  m.def("custom_abs(Tensor self) -> Tensor", {compliant});
  m.def("custom_abs.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)", {at::Tag::out, compliant});

  // tanh(scale * self), with a backward written in C++ (CustomAutograd.cpp).
  m.def("scaled_tanh(Tensor self, float scale) -> Tensor", {compliant});
  m.def(
      "scaled_tanh.out(Tensor self, float scale, *, Tensor(a!) out) -> Tensor(a!)",
      {at::Tag::out, compliant});

  // A view: `(a)` on the argument and on the result declares that the result
  // shares self's storage. There is no out= variant: an out= variant writes
  // into memory the caller owns, which contradicts returning an alias of self.
  m.def("flat_view(Tensor(a) self) -> Tensor(a)", {compliant});
}
