// _has_compatible_shallow_copy_type: may `variable.data = tensor` swap one
// tensor's implementation for the other's?
//
// nn.Module._apply (behind Module.to(), .cuda-like moves, .half()) asks this
// for every parameter: when true it moves the parameter in place
// (`param.data = moved`), which keeps the Parameter object, so tied weights
// stay one parameter and optimizers, hooks and references taken before the
// move keep working; when false it builds a new Parameter per module. c10's
// answer (TensorImpl::has_compatible_shallow_copy_type) lists the dense and
// sparse backends it knows, without PrivateUse1, and leaves the operator to
// the backend to override (as its comment says). openreg answers as c10 does
// for CUDA: any two dense tensors, any two sparse COO tensors, any two sparse
// compressed tensors, or the same key set.
//
// The operator dispatches on both arguments, so this kernel is reached only
// when one of them is an openreg tensor: CPU-only calls keep PyTorch's kernel.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace at::openreg {
namespace {

constexpr c10::DispatchKeySet kDenseBackends({
    c10::BackendComponent::CPUBit,
    c10::BackendComponent::CUDABit,
    c10::BackendComponent::MPSBit,
    c10::BackendComponent::HIPBit,
    c10::BackendComponent::XPUBit,
    c10::BackendComponent::HPUBit,
    c10::BackendComponent::MTIABit,
    c10::BackendComponent::PrivateUse1Bit,
});
constexpr c10::DispatchKeySet kSparseBackends({
    c10::BackendComponent::CPUBit,
    c10::BackendComponent::CUDABit,
    c10::BackendComponent::MPSBit,
    c10::BackendComponent::HIPBit,
    c10::BackendComponent::XPUBit,
    c10::BackendComponent::PrivateUse1Bit,
});

bool is_dense(c10::DispatchKeySet ks) {
  return ks.has(c10::DispatchKey::Dense) && ks.has_any(kDenseBackends);
}

bool is_sparse(c10::DispatchKeySet ks) {
  return ks.has(c10::DispatchKey::Sparse) && ks.has_any(kSparseBackends);
}

bool is_sparse_compressed(c10::DispatchKeySet ks) {
  return ks.has(c10::DispatchKey::SparseCsr);
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  const c10::DispatchKeySet a = self.key_set();
  const c10::DispatchKeySet b = from.key_set();
  return a == b || (is_dense(a) && is_dense(b)) || (is_sparse(a) && is_sparse(b)) ||
      (is_sparse_compressed(a) && is_sparse_compressed(b));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
}

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
}

}  // namespace at::openreg
