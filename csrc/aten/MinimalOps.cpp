// The minimal operator set every PrivateUse1 backend registers: factories,
// views, resizing and storage swapping, and reading a scalar back. Views use
// PyTorch's device-generic implementations: they only build a new TensorImpl
// over the same storage, so they alias by construction.
#include <cstring>

#include <ATen/Context.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ResizeCommon.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include "PrivateUse1NativeFunctions.h"  // generated from native_functions.yaml
#include "runtime/OpenRegDeviceAllocator.h"
#include "runtime/OpenRegException.h"
#include "runtime/OpenRegGuard.h"
#include "runtime/OpenRegStorage.h"
#include "runtime/OpenRegStream.h"
#include "runtime/OpenRegSynchronizingCall.h"

namespace at::openreg {
namespace {

constexpr c10::DispatchKeySet kDeviceKeys(c10::DispatchKey::PrivateUse1);

void check_factory_options(std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  const c10::Layout l = c10::layout_or_default(layout);
  TORCH_CHECK_NOT_IMPLEMENTED(
      l == c10::kStrided, "openreg supports only torch.strided tensors, but layout ", l, " was requested");
  TORCH_CHECK(
      !c10::pinned_memory_or_default(pin_memory),
      "Only dense CPU tensors can be pinned: pin_memory=True was passed for an openreg tensor, "
      "which already lives in device memory");
}

// torch.utils.deterministic.fill_uninitialized_memory: under deterministic
// mode, CPU and CUDA fill fresh memory with NaN (integers: their maximum), so
// a read before the first write gives the same, recognisable values each run.
bool fills_uninitialized_memory() {
  return C10_UNLIKELY(
      at::globalContext().deterministicAlgorithms() && at::globalContext().deterministicFillUninitializedMemory());
}

at::Tensor empty_memory_format(
    c10::IntArrayRef size, std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
    std::optional<c10::Device> device, std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  check_factory_options(layout, pin_memory);
  // Out-of-tree kernels get no generated device guard: allocate on the
  // requested device ourselves (an index-less device means the current one).
  c10::openreg::OptionalOpenRegGuard guard(device);
  at::Tensor result = at::detail::empty_generic(
      size, c10::openreg::getDeviceAllocator(), kDeviceKeys, c10::dtype_or_default(dtype), memory_format);
  if (fills_uninitialized_memory()) {
    at::native::fill_empty_deterministic_(result);
  }
  return result;
}

at::Tensor empty_strided(
    c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout, std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  check_factory_options(layout, pin_memory);
  c10::openreg::OptionalOpenRegGuard guard(device);
  at::Tensor result = at::detail::empty_strided_generic(
      size, stride, c10::openreg::getDeviceAllocator(), kDeviceKeys, c10::dtype_or_default(dtype));
  if (fills_uninitialized_memory()) {
    at::native::fill_empty_deterministic_(result);
  }
  return result;
}

// Sets sizes (and strides, if given) and grows the storage to fit.
void resize_impl(c10::TensorImpl* self, c10::IntArrayRef size, at::OptionalIntArrayRef stride) {
  if (self->sizes() == size && (!stride || self->strides() == *stride)) {
    return;
  }
  const size_t itemsize = self->dtype().itemsize();
  const size_t offset = self->storage_offset();
  size_t nbytes = 0;
  if (stride) {
    self->set_sizes_and_strides(size, *stride);
    nbytes = at::detail::computeStorageNbytes(size, *stride, itemsize, offset);
  } else {
    self->set_sizes_contiguous(size);
    nbytes = at::detail::computeStorageNbytesContiguous(size, itemsize, offset);
  }
  // An empty tensor needs no storage, whatever its offset.
  if (self->numel() == 0) {
    return;
  }
  const c10::Storage& storage = self->unsafe_storage();
  if (nbytes > storage.nbytes()) {
    c10::openreg::resize_bytes(storage.unsafeGetStorageImpl(), nbytes);
  }
}

}  // namespace

// The kernels gen_backend_stubs registers (csrc/aten/native_functions.yaml).

const at::Tensor& OpenRegNativeFunctions::resize_(
    const at::Tensor& self, c10::IntArrayRef size, std::optional<c10::MemoryFormat> memory_format) {
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  const int64_t old_storage_nbytes = impl->unsafe_storage() ? static_cast<int64_t>(impl->unsafe_storage().nbytes()) : 0;
  resize_impl(impl, size, std::nullopt);
  if (fills_uninitialized_memory()) {
    at::native::fill_resize_deterministic_(self, old_storage_nbytes);
  }
  if (memory_format) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve, "Unsupported memory format ", *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& OpenRegNativeFunctions::set_(
    at::Tensor& self, c10::Storage source, int64_t storage_offset, c10::IntArrayRef size, c10::IntArrayRef stride) {
  at::native::checkSetStorage(self, std::move(source), storage_offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(storage_offset);
  const at::OptionalIntArrayRef stride_opt = stride.data() != nullptr ? at::OptionalIntArrayRef(stride) : std::nullopt;
  resize_impl(self.unsafeGetTensorImpl(), size, stride_opt);
  return self;
}

at::Tensor& OpenRegNativeFunctions::set_(at::Tensor& self, c10::Storage source) {
  const int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_(self, std::move(source), 0, {numel}, {});
}

at::Tensor& OpenRegNativeFunctions::set_(at::Tensor& self, const at::Tensor& source) {
  if (self.unsafeGetTensorImpl() != source.unsafeGetTensorImpl()) {
    set_(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
  }
  return self;
}

at::Tensor OpenRegNativeFunctions::as_strided(
    const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor OpenRegNativeFunctions::view(const at::Tensor& self, c10::IntArrayRef size) {
  return at::native::view(self, size);
}

at::Tensor OpenRegNativeFunctions::_reshape_alias(
    const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

// item(): a device-to-host copy of one element, as CUDA does it, after the
// work queued on the current stream. The bytes are read into a local buffer;
// building a host view (a CPU tensor) for one scalar would cost more than the
// read itself.
at::Scalar OpenRegNativeFunctions::_local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(
      self.numel() > 0, "aten::_local_scalar_dense: a tensor with 0 elements on ", self.device(),
      " has no value to read");
  c10::openreg::check_tensor_in_storage(self, "aten::_local_scalar_dense");
  c10::openreg::on_synchronizing_call("aten::_local_scalar_dense (item())");
  // No device guard: the stream names its device, and so does the pointer.
  c10::openreg::wait_for_stream(c10::openreg::getCurrentOpenRegStream(self.device().index()));
  alignas(16) unsigned char bytes[16];
  const size_t itemsize = self.dtype().itemsize();
  TORCH_INTERNAL_ASSERT(itemsize <= sizeof(bytes));
  OPENREG_CHECK(orMemcpy(bytes, self.const_data_ptr(), itemsize, orMemcpyDeviceToHost));
  at::Scalar result;
  // The CPU kernel's type list, so the same dtypes are accepted.
  AT_DISPATCH_V2(
      self.scalar_type(), "_local_scalar_dense_openreg", AT_WRAP([&] {
        scalar_t value;
        std::memcpy(&value, bytes, sizeof(scalar_t));
        result = at::Scalar(value);
      }),
      AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), c10::kComplexHalf, c10::kHalf, c10::kBool, c10::kBFloat16,
      AT_EXPAND(AT_FLOAT8_TYPES), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES));
  return result;
}

// Hand-written: given empty.memory_format or empty_strided, gen_backend_stubs
// also registers their out= variants with a kernel that allocates and copies
// into `out`, where PyTorch's composite only resizes it (docs/operators.md).
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
}

}  // namespace at::openreg
