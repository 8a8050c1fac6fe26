// CpuAliases for strided nested tensors (torch.nested with layout=torch.strided).
//
// A NestedTensorImpl is one buffer storage plus three CPU metadata tensors
// (per-component sizes, strides and storage offsets). Its host counterpart is
// therefore a CPU NestedTensorImpl over the host view of the same storage with
// the same metadata: NestedTensorCPU kernels then read and write device memory
// in place, and a nested result maps back by mapping its storage, exactly as a
// strided result does.
#include <ATen/NestedTensorImpl.h>

#include "aten/CpuAliases.h"

namespace at::openreg {
namespace {

// A 1-D tensor over all of `storage`: the form NestedTensorImpl's constructor
// takes its buffer in (it derives the nested dispatch keys from the buffer's).
at::Tensor whole_storage(c10::Storage storage, c10::DispatchKey backend, caffe2::TypeMeta dtype) {
  const auto numel = static_cast<int64_t>(storage.nbytes() / dtype.itemsize());
  at::Tensor buffer = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(backend), dtype);
  buffer.unsafeGetTensorImpl()->set_sizes_contiguous({numel});
  return buffer;
}

at::Tensor nested_over(const at::Tensor& buffer, const at::native::NestedTensorImpl& like) {
  return at::detail::make_tensor<at::native::NestedTensorImpl>(
      buffer, like.get_nested_sizes(), like.get_nested_strides(), like.get_storage_offsets());
}

}  // namespace

at::Tensor CpuAliases::alias_nested(const at::Tensor& device_nested) {
  const at::native::NestedTensorImpl* impl = at::native::get_nested_tensor_impl(device_nested);
  const c10::Storage host = host_storage_for(impl->unsafe_storage());
  return nested_over(whole_storage(host, c10::DispatchKey::CPU, impl->dtype()), *impl);
}

at::Tensor CpuAliases::nested_to_device(const at::Tensor& host_nested) {
  const at::native::NestedTensorImpl* impl = at::native::get_nested_tensor_impl(host_nested);
  c10::StorageImpl* device = device_storage_for(impl->unsafe_storage());
  const c10::Storage storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(device));
  return nested_over(whole_storage(storage, c10::DispatchKey::PrivateUse1, impl->dtype()), *impl);
}

}  // namespace at::openreg
