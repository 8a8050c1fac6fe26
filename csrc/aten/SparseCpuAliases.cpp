// CpuAliases for sparse layouts: COO (SparsePrivateUse1) and compressed
// CSR/CSC/BSR/BSC (SparseCsrPrivateUse1) tensors.
//
// A sparse tensor owns no memory of its own: it is sizes and flags around
// strided component tensors. So the host counterpart of an openreg sparse
// tensor is a CPU sparse tensor of the same layout whose components are the
// host views of the device components: a SparseCPU / SparseCsrCPU kernel
// reads and writes device memory in place, without copies, as a CPU kernel
// does through strided host views. After the kernel, what it did to a sparse
// argument (new sizes, replaced or resized components, the coalesced flag) is
// carried back to the openreg tensor, and sparse results become openreg
// sparse tensors whose components are mapped back like strided results (over
// an argument's memory: no copy).
#include <ATen/SparseCsrTensorImpl.h>
#include <ATen/SparseTensorImpl.h>

#include "aten/CpuAliases.h"
#include "runtime/OpenRegGuard.h"

namespace at::openreg {
namespace {

bool is_compressed(c10::Layout layout) {
  return layout == c10::kSparseCsr || layout == c10::kSparseCsc || layout == c10::kSparseBsr ||
      layout == c10::kSparseBsc;
}

at::SparseTensorImpl* coo_impl(const at::Tensor& t) {
  return static_cast<at::SparseTensorImpl*>(t.unsafeGetTensorImpl());
}

at::SparseCsrTensorImpl* compressed_impl(const at::Tensor& t) {
  return static_cast<at::SparseCsrTensorImpl*>(t.unsafeGetTensorImpl());
}

bool same(const at::Tensor& a, const at::Tensor& b) {
  return a.unsafeGetTensorImpl() == b.unsafeGetTensorImpl();
}

// A COO tensor holding exactly these components (no shallow copies, unlike
// _sparse_coo_tensor_unsafe): CpuAliases tracks the alias tensors themselves, so
// what a kernel does to a component of the CPU tensor is seen on the device.
at::Tensor make_coo(c10::DispatchKey key, const at::Tensor& like, const at::Tensor& indices, const at::Tensor& values) {
  at::Tensor t = at::detail::make_tensor<at::SparseTensorImpl>(c10::DispatchKeySet(key), like.dtype());
  at::SparseTensorImpl* impl = coo_impl(t);
  const at::SparseTensorImpl* like_impl = coo_impl(like);
  impl->raw_resize_(like_impl->sparse_dim(), like_impl->dense_dim(), like.sizes());
  impl->set_indices_and_values_unsafe(indices, values);
  // set_indices_and_values_unsafe guesses the flag from nnz.
  impl->set_coalesced(like_impl->coalesced());
  return t;
}

at::Tensor make_compressed(
    c10::DispatchKey key, c10::Device device, const at::Tensor& like, const at::Tensor& compressed_indices,
    const at::Tensor& plain_indices, const at::Tensor& values) {
  at::Tensor t =
      at::detail::make_tensor<at::SparseCsrTensorImpl>(c10::DispatchKeySet(key), device, like.layout(), like.dtype());
  compressed_impl(t)->set_member_tensors(compressed_indices, plain_indices, values, like.sizes());
  return t;
}

}  // namespace

at::Tensor CpuAliases::alias_sparse(const at::Tensor& device_sparse) {
  for (const SparseEntry& entry : sparse_) {
    if (same(entry.device, device_sparse)) {
      return entry.host;
    }
  }
  SparseEntry entry{device_sparse, {}, {}, {}};
  if (device_sparse.layout() == c10::kSparse) {
    const at::SparseTensorImpl* impl = coo_impl(device_sparse);
    entry.device_components = {impl->indices(), impl->values()};
    entry.components = {alias(impl->indices()), alias(impl->values())};
    entry.host = make_coo(c10::DispatchKey::SparseCPU, device_sparse, entry.components[0], entry.components[1]);
  } else {
    const at::SparseCsrTensorImpl* impl = compressed_impl(device_sparse);
    entry.device_components = {impl->compressed_indices(), impl->plain_indices(), impl->values()};
    entry.components = {alias(impl->compressed_indices()), alias(impl->plain_indices()), alias(impl->values())};
    entry.host = make_compressed(
        c10::DispatchKey::SparseCsrCPU, c10::Device(c10::kCPU), device_sparse, entry.components[0], entry.components[1],
        entry.components[2]);
  }
  sparse_.push_back(entry);
  return entry.host;
}

void CpuAliases::write_back_sparse() {
  for (const SparseEntry& entry : sparse_) {
    const at::Tensor& host = entry.host;
    const at::Tensor& device = entry.device;
    if (host.layout() == c10::kSparse) {
      const at::SparseTensorImpl* h = coo_impl(host);
      at::SparseTensorImpl* d = coo_impl(device);
      const bool replaced = !same(h->indices(), entry.components[0]) || !same(h->values(), entry.components[1]);
      if (replaced || h->sizes() != d->sizes() || h->sparse_dim() != d->sparse_dim()) {
        d->raw_resize_(h->sparse_dim(), h->dense_dim(), h->sizes());
        d->set_indices_and_values_unsafe(to_device(h->indices()), to_device(h->values()));
      }
      d->set_coalesced(h->coalesced());
    } else {
      const at::SparseCsrTensorImpl* h = compressed_impl(host);
      const bool replaced = !same(h->compressed_indices(), entry.components[0]) ||
          !same(h->plain_indices(), entry.components[1]) || !same(h->values(), entry.components[2]);
      if (replaced || host.sizes() != device.sizes()) {
        compressed_impl(device)->set_member_tensors(
            to_device(h->compressed_indices()), to_device(h->plain_indices()), to_device(h->values()), host.sizes());
      }
    }
  }
}

at::Tensor CpuAliases::sparse_to_device(const at::Tensor& host_sparse) {
  // An argument's counterpart returned as is (in-place, out=): that argument.
  for (const SparseEntry& entry : sparse_) {
    if (same(entry.host, host_sparse)) {
      return entry.device;
    }
  }
  const c10::Layout layout = host_sparse.layout();
  if (layout == c10::kSparse) {
    const at::SparseTensorImpl* impl = coo_impl(host_sparse);
    const at::Tensor values = to_device(impl->values());
    // The TensorImpl starts with empty components on the current device.
    const c10::openreg::OpenRegGuard guard(values.device());
    return make_coo(c10::DispatchKey::SparsePrivateUse1, host_sparse, to_device(impl->indices()), values);
  }
  if (is_compressed(layout)) {
    const at::SparseCsrTensorImpl* impl = compressed_impl(host_sparse);
    const at::Tensor values = to_device(impl->values());
    return make_compressed(
        c10::DispatchKey::SparseCsrPrivateUse1, values.device(), host_sparse, to_device(impl->compressed_indices()),
        to_device(impl->plain_indices()), values);
  }
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, op_name_, " produced a tensor with layout ", layout,
      " on the CPU, which the openreg device cannot hold: openreg supports torch.strided, torch.sparse_coo, "
      "torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr and torch.sparse_bsc tensors");
}

}  // namespace at::openreg
