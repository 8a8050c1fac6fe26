// Quantized tensors on openreg: the QuantizedPrivateUse1 key, with what CUDA
// offers for affine quantization (per-tensor and per-channel) and nothing
// more, so code that runs here runs on CUDA.
//
// A quantized openreg tensor is a QTensorImpl over device memory from the
// caching allocator, holding a quantizer (scale and zero point, or per-channel
// scale and zero point tensors, which live on the same openreg device). The
// operators registered here are the ones PyTorch registers for QuantizedCUDA
// (native_functions.yaml), in three groups:
//   - creation, metadata and views: PyTorch's device-generic quantized
//     kernels (the ones QuantizedCUDA registers), or openreg's own where they
//     allocate, since PyTorch's allocate for CPU and CUDA only;
//   - compute (dequantize, int_repr, index_select, relu, ...): the CPU's
//     QuantizedCPU kernel on host views (FallbackPipeline.h; QuantizedCpuAliases.cpp
//     maps quantized tensors and their quantizers), so results are the CPU's;
//   - everything else raises NotImplementedError naming the operator and
//     openreg, where CUDA raises for want of a QuantizedCUDA kernel.
// Quantizing an openreg float tensor (quantize_per_tensor, quantize_per_channel,
// _make_per_tensor_quantized_tensor, ...) is a PrivateUse1 call: the dense
// fallback runs the CPU kernel and maps its quantized result back. Copies are
// Copy.cpp's, registered for this key too.
#include "aten/QuantizedTensors.h"

#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_quantized_native.h>
#include <ATen/ops/fill_native.h>
#include <ATen/ops/q_per_channel_axis_native.h>
#include <ATen/ops/q_per_channel_scales_native.h>
#include <ATen/ops/q_per_channel_zero_points_native.h>
#include <ATen/ops/q_scale_native.h>
#include <ATen/ops/q_zero_point_native.h>
#include <ATen/ops/qscheme_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/squeeze_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/_empty_per_channel_affine_quantized.h>
#include <ATen/quantized/QTensorImpl.h>
#include <torch/library.h>

#include "aten/FallbackPipeline.h"
#include "aten/OperatorPolicy.h"
#include "runtime/OpenRegDeviceAllocator.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegGuard.h"

namespace at::openreg {

void check_quantized_dtype(c10::ScalarType dtype, std::string_view op) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      dtype == c10::kQUInt8 || dtype == c10::kQInt8 || dtype == c10::kQInt32, op,
      ": quantized tensors on the openreg device have dtype torch.quint8, torch.qint8 or torch.qint32 "
      "(those CUDA's quantized kernels handle), not ",
      dtype, "; sub-byte quantized tensors are CPU-only");
}

namespace {

// The dtype a factory was asked for, which must be one openreg holds. The
// dispatcher picks this key for a factory only from a quantized dtype; without
// one, the call is a PrivateUse1 one, which the CPU's stub refuses.
c10::ScalarType requested_dtype(std::optional<c10::ScalarType> dtype, std::string_view op) {
  TORCH_INTERNAL_ASSERT(dtype.has_value(), op, ": a quantized factory call without a dtype");
  check_quantized_dtype(*dtype, op);
  return *dtype;
}

// A new quantized tensor in openreg memory, laid out in `memory_format`:
// what PyTorch's new_qtensor does for CPU and CUDA tensors.
at::Tensor new_quantized_tensor(
    c10::IntArrayRef size, c10::ScalarType dtype, std::optional<c10::Device> device,
    std::optional<c10::MemoryFormat> memory_format, at::QuantizerPtr quantizer) {
  at::detail::check_size_nonnegative(size);
  // Out-of-tree kernels get no generated device guard.
  c10::openreg::OptionalOpenRegGuard guard(device);
  const size_t nbytes = at::detail::computeStorageNbytesContiguous(size, c10::elementSize(dtype));
  at::Tensor tensor = at::detail::make_tensor<at::QTensorImpl>(
      c10::Storage(c10::Storage::use_byte_size_t(), nbytes, c10::openreg::getDeviceAllocator(), /*resizable=*/true),
      c10::DispatchKeySet(c10::DispatchKey::QuantizedPrivateUse1), c10::scalarTypeToTypeMeta(dtype),
      std::move(quantizer));
  c10::TensorImpl* impl = tensor.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  impl->empty_tensor_restride(memory_format.value_or(c10::MemoryFormat::Contiguous));
  return tensor;
}

at::Tensor empty_affine_quantized(
    c10::IntArrayRef size, std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> /*layout*/,
    std::optional<c10::Device> device, std::optional<bool> /*pin_memory*/, double scale, int64_t zero_point,
    std::optional<c10::MemoryFormat> memory_format) {
  const c10::ScalarType type = requested_dtype(dtype, "aten::_empty_affine_quantized");
  return new_quantized_tensor(
      size, type, device, memory_format, at::make_per_tensor_affine_quantizer(scale, zero_point, type));
}

// The scales and zero points move to the new tensor's device: a quantizer's
// parameters live with its tensor (`.cpu()` of an openreg tensor gets CPU
// parameters, `.to("openreg")` of a CPU one openreg parameters), so host
// views and copies never mix devices.
at::Tensor empty_per_channel_affine_quantized(
    c10::IntArrayRef size, const at::Tensor& scales, const at::Tensor& zero_points, int64_t axis,
    std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout, std::optional<c10::Device> device,
    std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  // This key is chosen whenever the parameters are openreg tensors, also for
  // a tensor made on the CPU (`.cpu()` creates the result this way).
  if (!c10::device_or_default(device).is_privateuseone()) {
    return at::_empty_per_channel_affine_quantized(
        size, scales.cpu(), zero_points.cpu(), axis, dtype, layout, device, pin_memory, memory_format);
  }
  const c10::ScalarType type = requested_dtype(dtype, "aten::_empty_per_channel_affine_quantized");
  c10::openreg::OptionalOpenRegGuard guard(device);
  const c10::Device target = c10::openreg::make_device(c10::openreg::current_device());
  return new_quantized_tensor(
      size, type, target, memory_format,
      at::make_per_channel_affine_quantizer(scales.to(target), zero_points.to(target), axis, type));
}

// torch.empty(..., dtype=torch.quint8): a tensor without quantization
// parameters, as on CPU and CUDA (q_scale() and printing it raise).
at::Tensor empty_unknown_quantized(
    c10::IntArrayRef size, std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> /*layout*/,
    std::optional<c10::Device> device, std::optional<bool> /*pin_memory*/,
    std::optional<c10::MemoryFormat> memory_format) {
  const c10::ScalarType type = requested_dtype(dtype, "aten::empty.memory_format");
  return new_quantized_tensor(size, type, device, memory_format, at::make_unknown_quantizer(type));
}

// PyTorch has no strided quantized empty for any device (pytorch#74540): the
// generated kernels of structured operators (cat, sort, topk, indexing with
// tensors) allocate their output this way, so this is where CUDA fails too.
at::Tensor empty_strided_quantized(
    c10::IntArrayRef /*size*/, c10::IntArrayRef /*stride*/, std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> /*layout*/, std::optional<c10::Device> /*device*/, std::optional<bool> /*pin_memory*/) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "aten::empty_strided: quantized openreg tensors (dtype ", c10::toString(c10::dtype_or_default(dtype)),
      ") cannot be created with explicit strides, as on the CPU and CUDA (pytorch/pytorch#74540); an operator that "
      "allocates its output this way (cat, sort, topk, indexing with tensors, ...) has no quantized kernel on CUDA "
      "either. Dequantize first (x.dequantize()), or run it on the CPU.");
}

// CUDA's set_storage_quantized_ with the device check of the dense set_.
at::Tensor& set_storage_offset(
    at::Tensor& self, c10::Storage source, int64_t storage_offset, c10::IntArrayRef size, c10::IntArrayRef stride) {
  at::native::checkSetStorage(self, source, storage_offset, size, stride);
  return at::native::set_storage_quantized_(self, std::move(source), storage_offset, size, stride);
}

// PyTorch's _to_copy gives a quantized tensor that is not dense (a select, a
// strided slice) an empty_like of itself, which stays on the tensor's own
// device whatever device was asked for: `.cpu()` of such a CUDA view returns
// a CUDA tensor, and `.to("openreg")` of a CPU one a CPU tensor. openreg makes
// such a tensor contiguous first, so the copy lands where it was asked to.
at::Tensor to_copy(
    const at::Tensor& self, std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
    std::optional<c10::Device> device, std::optional<bool> pin_memory, bool non_blocking,
    std::optional<c10::MemoryFormat> memory_format) {
  if (self.is_quantized() && !self.is_non_overlapping_and_dense()) {
    return at::native::_to_copy(self.contiguous(), dtype, layout, device, pin_memory, non_blocking, memory_format);
  }
  return at::native::_to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format);
}

void quantized_host_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  run_on_host(op, stack, c10::DispatchKey::QuantizedPrivateUse1);
}

// Every other operator reaching the key: CUDA has no QuantizedCUDA kernel for
// it either.
void unsupported_quantized_operator(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "Could not run '", policy_for(op).name,
      "' with arguments from the 'QuantizedPrivateUse1' backend (quantized openreg tensors): openreg supports "
      "the quantized operators CUDA supports, and CUDA has no quantized kernel for this one. Dequantize first "
      "(x.dequantize()), or run it on the CPU.");
}

}  // namespace

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&unsupported_quantized_operator>());
}

TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  // Creation.
  m.impl("_empty_affine_quantized", TORCH_FN(empty_affine_quantized));
  m.impl("_empty_per_channel_affine_quantized", TORCH_FN(empty_per_channel_affine_quantized));
  m.impl("empty.memory_format", TORCH_FN(empty_unknown_quantized));
  m.impl("empty_quantized", TORCH_FN(at::native::empty_quantized));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_quantized));
  m.impl("empty_strided", TORCH_FN(empty_strided_quantized));
  m.impl("clone", TORCH_FN(at::native::quantized_clone));
  m.impl("_to_copy", TORCH_FN(to_copy));
  m.impl(
      "fill_.Scalar",
      TORCH_FN(static_cast<at::Tensor& (*)(at::Tensor&, const at::Scalar&)>(at::native::fill_quantized_)));
  m.impl(
      "fill_.Tensor",
      TORCH_FN(static_cast<at::Tensor& (*)(at::Tensor&, const at::Tensor&)>(at::native::fill_quantized_)));
  // Quantization parameters.
  m.impl("q_scale", TORCH_FN(at::native::q_scale_quant));
  m.impl("q_zero_point", TORCH_FN(at::native::q_zero_point_quant));
  m.impl("qscheme", TORCH_FN(at::native::qscheme_quant));
  m.impl("q_per_channel_scales", TORCH_FN(at::native::q_per_channel_scales));
  m.impl("q_per_channel_zero_points", TORCH_FN(at::native::q_per_channel_zero_points));
  m.impl("q_per_channel_axis", TORCH_FN(at::native::q_per_channel_axis));
  // Views (the composites permute, transpose, select, slice, expand, reshape,
  // ... reach these), and storage swapping.
  m.impl("as_strided", TORCH_FN(at::native::as_strided_qtensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("squeeze", TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&)>(at::native::squeeze_quantized)));
  m.impl(
      "squeeze.dim", TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&, int64_t)>(at::native::squeeze_quantized)));
  m.impl(
      "squeeze.dims",
      TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&, c10::IntArrayRef)>(at::native::squeeze_quantized)));
  m.impl("unsqueeze", TORCH_FN(at::native::unsqueeze_quantized));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage_offset));
  // Compute: the QuantizedCPU kernels on host views.
  for (const char* name :
       {"dequantize.self", "int_repr", "index_select", "index_select.out", "masked_fill_.Scalar", "masked_fill_.Tensor",
        "_index_put_impl_", "flip", "relu", "relu_", "gelu", "max.dim", "min.dim", "_adaptive_avg_pool2d",
        "quantized_max_pool2d"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&quantized_host_fallback>());
  }
}

}  // namespace at::openreg
