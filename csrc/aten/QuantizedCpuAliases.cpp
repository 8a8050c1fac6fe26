// Quantized tensors in CpuAliases (CpuAliases.h). A quantized openreg tensor is
// a QTensorImpl (key QuantizedPrivateUse1) over ordinary device memory plus a
// quantizer: its host counterpart is a QuantizedCPU QTensorImpl over the host
// view of the same storage. A per-channel quantizer holds scale and zero point
// tensors, which live on the openreg device too, so the host side gets a
// quantizer over their host views, and a quantizer coming back from the CPU
// kernel gets device tensors again.
#include <ATen/quantized/QTensorImpl.h>

#include "aten/CpuAliases.h"
#include "aten/QuantizedTensors.h"

namespace at::openreg {

at::QuantizerPtr CpuAliases::host_quantizer_for(const at::QuantizerPtr& device_quantizer) {
  for (const auto& pair : quantizers_) {
    if (pair.device == device_quantizer) {
      return pair.host;
    }
  }
  at::QuantizerPtr host =
      map_channel_params(device_quantizer, [&](const at::Tensor& t) { return t.is_privateuseone() ? alias(t) : t; });
  quantizers_.push_back({device_quantizer, host});
  return host;
}

at::QuantizerPtr CpuAliases::device_quantizer_for(const at::QuantizerPtr& host_quantizer) {
  for (const auto& pair : quantizers_) {
    if (pair.host == host_quantizer) {
      return pair.device;
    }
  }
  // A quantizer the CPU kernel made: its host-view parameters map back to the
  // device tensors they alias, parameters it computed are copied over.
  return map_channel_params(host_quantizer, [&](const at::Tensor& t) { return to_device(t); });
}

at::Tensor CpuAliases::alias_quantized(const at::Tensor& device_quantized) {
  at::QuantizerPtr quantizer = host_quantizer_for(at::get_qtensorimpl(device_quantized)->quantizer());
  at::Tensor host = at::detail::make_tensor<at::QTensorImpl>(
      host_storage_for(device_quantized.storage()), c10::DispatchKeySet(c10::DispatchKey::QuantizedCPU),
      device_quantized.dtype(), quantizer);
  c10::TensorImpl* host_impl = host.unsafeGetTensorImpl();
  host_impl->set_sizes_and_strides(
      device_quantized.sizes(), device_quantized.strides(), device_quantized.storage_offset());
  quantized_.push_back({device_quantized.unsafeGetTensorImpl(), host_impl, std::move(quantizer)});
  return host;
}

void CpuAliases::write_back_quantized() {
  // Sizes, strides and storages were carried like any tensor's; only a
  // replaced quantizer (copy_ gives self the source's) remains.
  for (auto& entry : quantized_) {
    at::QuantizerPtr now = static_cast<at::QTensorImpl*>(entry.host)->quantizer();
    if (now != entry.host_quantizer) {
      static_cast<at::QTensorImpl*>(entry.device)->set_quantizer_(device_quantizer_for(now));
      entry.host_quantizer = std::move(now);
    }
  }
}

at::Tensor CpuAliases::quantized_to_device(const at::Tensor& host_quantized) {
  check_quantized_dtype(host_quantized.scalar_type(), op_name_);
  at::QuantizerPtr quantizer = device_quantizer_for(at::get_qtensorimpl(host_quantized)->quantizer());
  at::Tensor result = at::detail::make_tensor<at::QTensorImpl>(
      c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(device_storage_for(host_quantized.storage()))),
      c10::DispatchKeySet(c10::DispatchKey::QuantizedPrivateUse1), host_quantized.dtype(), std::move(quantizer));
  result.unsafeGetTensorImpl()->set_sizes_and_strides(
      host_quantized.sizes(), host_quantized.strides(), host_quantized.storage_offset());
  return result;
}

}  // namespace at::openreg
