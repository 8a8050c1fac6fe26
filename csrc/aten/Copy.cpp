// Copies between the CPU and openreg, and between openreg devices. copy_()
// sends every copy that involves a PrivateUse1 tensor here. Copies run in the
// current stream's order; non_blocking=True ones are queued on it.
#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/copy.h>
#include <ATen/ops/resize.h>
#include <torch/library.h>

#include "aten/CpuAliases.h"
#include "aten/QuantizedTensors.h"
#include "runtime/OpenRegException.h"
#include "runtime/OpenRegGuard.h"
#include "runtime/OpenRegHostAllocator.h"
#include "runtime/OpenRegStorage.h"
#include "runtime/OpenRegStream.h"
#include "runtime/OpenRegCaptureRules.h"
#include "runtime/OpenRegSyncDebug.h"

namespace at::openreg {
namespace {

orMemcpyKind copy_kind(const at::Tensor& src, const at::Tensor& dst) {
  if (src.is_cpu()) {
    return dst.is_cpu() ? orMemcpyHostToHost : orMemcpyHostToDevice;
  }
  return dst.is_cpu() ? orMemcpyDeviceToHost : orMemcpyDeviceToDevice;
}

// Same element type, same layout in memory, one dense block: one runtime copy.
bool is_plain_memcpy(const at::Tensor& src, const at::Tensor& dst) {
  return src.dtype() == dst.dtype() && src.sizes() == dst.sizes() && src.strides() == dst.strides() &&
      src.is_non_overlapping_and_dense() && src.is_conj() == dst.is_conj() && src.is_neg() == dst.is_neg();
}

bool is_pinned(const at::Tensor& t) {
  orPointerAttributes attributes{};
  return orPointerGetAttributes(&attributes, t.const_data_ptr()) == orSuccess && attributes.type == orMemoryTypeHost;
}

// Asynchronous when no host memory could change under the queued copy, as in
// CUDA: device to device on one device, or to/from pinned host memory.
bool can_copy_async(const at::Tensor& src, const at::Tensor& dst) {
  if (src.is_cpu()) {
    return is_pinned(src);
  }
  if (dst.is_cpu()) {
    return is_pinned(dst);
  }
  return src.device() == dst.device();
}

// A copy involving a quantized tensor is the CPU's copy_ on host views, which
// quantizes a float source with the destination's parameters, gives a
// quantized destination the source's parameters, and refuses quantized to
// float, with the CPU's checks and messages.
at::Tensor copy_quantized(const at::Tensor& self, const at::Tensor& dst, c10::Device device) {
  CpuAliases views(device, "aten::_copy_from");
  if (dst.is_cpu()) {
    dst.copy_(views.alias(self));
    // dst now holds the host view's quantizer, whose per-channel parameters
    // are host views of device memory: it gets CPU copies of them.
    if (self.is_quantized()) {
      at::set_quantizer_(dst, map_channel_params(self.quantizer(), [](const at::Tensor& t) { return t.cpu(); }));
    }
    return dst;
  }
  views.alias(dst).copy_(self.is_cpu() ? self : views.alias(self));
  views.write_back();  // the quantizer copy_ gave the destination
  return dst;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  // `self` is the source.
  for (const at::Tensor* t : {&self, &dst}) {
    TORCH_CHECK(
        t->is_cpu() || t->is_privateuseone(), "openreg can copy only between cpu and openreg tensors, got a copy from ",
        self.device(), " to ", dst.device());
  }
  if (dst.numel() == 0) {
    return dst;
  }
  if (self._is_zerotensor()) {
    // A ZeroTensor (autograd's efficient zero gradients) has no memory.
    dst.zero_();
    return dst;
  }
  if (c10::openreg::any_capture_active() && self.is_cpu() != dst.is_cpu()) {
    const at::Tensor& host = self.is_cpu() ? self : dst;
    c10::openreg::check_capture_allows_host_copy(
        (self.is_cpu() ? dst : self).device().index(), is_pinned(host), non_blocking);
  }
  if (dst.is_cpu() && c10::openreg::sync_debug_enabled() && !(non_blocking && can_copy_async(self, dst))) {
    c10::openreg::warn_or_error_on_sync("a copy from openreg to the CPU");
  }
  const c10::Device device = dst.is_privateuseone() ? dst.device() : self.device();
  c10::openreg::OpenRegGuard guard(device);
  const c10::openreg::OpenRegStream stream = c10::openreg::getCurrentOpenRegStream(device.index());
  if (self.is_privateuseone() && dst.is_privateuseone() && self.device() != dst.device()) {
    // Peer copy: the source device's queued work comes first as well.
    c10::openreg::wait_for_stream(c10::openreg::getCurrentOpenRegStream(self.device().index()));
  }
  if (self.is_quantized() || dst.is_quantized()) {
    return copy_quantized(self, dst, device);
  }
  if (is_plain_memcpy(self, dst)) {
    // The CPU's and CUDA's copy_ run through TensorIterator, which refuses a
    // destination that partly overlaps its source (x[1:].copy_(x[:-1])):
    // the result would depend on the copy's order.
    at::assert_no_partial_overlap(dst, self);
    // The runtime checks a range against the device allocation it falls in,
    // which the caching allocator shares between storages.
    for (const at::Tensor* t : {&self, &dst}) {
      if (t->is_privateuseone()) {
        c10::openreg::check_tensor_in_storage(*t, "aten::_copy_from");
      }
    }
    // data_ptr() of a dense tensor with non-negative strides is its lowest
    // address, so the block is [data_ptr, data_ptr + nbytes).
    const size_t nbytes = self.numel() * self.itemsize();
    if (non_blocking && can_copy_async(self, dst)) {
      OPENREG_CHECK(orMemcpyAsync(dst.data_ptr(), self.data_ptr(), nbytes, copy_kind(self, dst), stream.handle()));
      // The pinned block must not be handed out again before the copy ran.
      const at::Tensor& host = self.is_cpu() ? self : dst;
      if (host.is_cpu()) {
        c10::openreg::getHostAllocator()->record_event(
            host.data_ptr(), host.storage().data_ptr().get_context(), stream.unwrap());
      }
      return dst;
    }
    c10::openreg::wait_for_stream(stream);
    OPENREG_CHECK(orMemcpy(dst.data_ptr(), self.data_ptr(), nbytes, copy_kind(self, dst)));
    return dst;
  }
  // Everything else (dtype conversion, broadcasting, strides, lazy conj/neg)
  // is the CPU copy kernel's job, run on host views of the device memory.
  CpuAliases views(device, "aten::_copy_from");
  at::Tensor host_dst = dst.is_cpu() ? dst : views.alias(dst);
  const at::Tensor host_src = self.is_cpu() ? self : views.alias(self);
  host_dst.copy_(host_src);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) {
    dst.resize_(self.sizes());
  }
  return copy_from(self, dst, false);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
}

// Copies to, from and between quantized tensors (QuantizedTensors.cpp): the
// dispatcher picks this key whenever one of the two is a quantized openreg
// tensor.
TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
}

// Lazily conjugated or negated tensors must reach the kernel above as they
// are: it resolves both bits itself (the CPU copy does). Without these
// fallthroughs the Conjugate/Negative fallbacks would materialize the source
// with clone(), which copies, which calls _copy_from again, forever.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace at::openreg
