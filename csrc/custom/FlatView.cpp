// openreg::flat_view(Tensor(a) self) -> Tensor(a): a custom view operator.
//
// Its one kernel (operators.yaml) is CompositeImplicitAutograd: it is defined by the ATen view
// it calls, and that is deliberate. Functionalization (torch.compile,
// AOTAutograd, opcheck's aot_dispatch tests) replays views it knows how to
// regenerate, and cannot replay a custom view whose backend kernels are opaque;
// it can replay aten::view. The decomposition also gives flat_view its
// behaviour on every device (openreg's aten::view aliases by construction),
// on the meta device, under fake tensors and under autograd, so it has no
// per-device, fake or autograd kernel (torch.library.register_fake refuses one
// for a CompositeImplicitAutograd operator).
#include <ATen/TensorUtils.h>
#include <ATen/core/Tensor.h>

namespace at::openreg {

at::Tensor flat_view(const at::Tensor& self) {
  // Symbolic sizes: the same code runs on the real tensors and while tracing.
  const c10::SymInt numel = self.sym_numel();
  TORCH_CHECK(
      at::detail::computeStride(self.sym_sizes(), self.sym_strides(), c10::SymIntArrayRef(numel)).has_value(),
      "openreg::flat_view: a tensor of sizes ", self.sym_sizes(), " and strides ", self.sym_strides(), " on ",
      self.device(), " has no one-dimensional view; reshape(-1) copies it instead");
  return self.view_symint(c10::SymIntArrayRef(numel));
}

}  // namespace at::openreg
