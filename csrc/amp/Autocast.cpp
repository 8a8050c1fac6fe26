// Autocast for openreg: CUDA's operator policy under AutocastPrivateUse1.
//
// torch.autocast("openreg") un-excludes the AutocastPrivateUse1 dispatch key,
// which every openreg tensor carries. PyTorch registers nothing for that key,
// so without this file every operator would fail under autocast. Two parts:
//   - a fallthrough for the key, so operators outside the lists skip it at no
//     cost (the dispatcher never calls a fallthrough kernel);
//   - CUDA's per-operator policies. ATen ships CUDA's lists as the
//     AT_FORALL_* macros and the casting wrappers as KERNEL_PRIVATEUSEONE; the
//     lists are expanded here as CUDA expands them for its own Autocast key,
//     so openreg follows whatever the installed torch's CUDA policy is.
// The weight-cast cache, nesting and enabled/dtype state live in ATen's
// at::autocast (keyed by device type); the wrappers use them through
// cached_cast, so torch.is_autocast_cache_enabled() applies unchanged.
//
// Not mirrored from CUDA: cudnn_convolution and cudnn_convolution_transpose,
// which only cuDNN reaches; openreg convolutions go through _convolution and
// convolution, both in the lower-precision list.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace at::openreg {
namespace {

// As on CUDA: binary_cross_entropy is banned under autocast, because its
// input is usually a sigmoid computed in lower precision. The message is
// PyTorch's own.
at::Tensor binary_cross_entropy_banned(
    const at::Tensor& /*self*/, const at::Tensor& /*target*/, const std::optional<at::Tensor>& /*weight*/,
    int64_t /*reduction*/) {
  TORCH_CHECK(
      false,
      "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
      "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
      "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
      "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
      "safe to autocast.");
}

}  // namespace

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define OPENREG_AUTOCAST_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define OPENREG_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define OPENREG_AUTOCAST_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define OPENREG_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

  AT_FORALL_LOWER_PRECISION_FP(OPENREG_AUTOCAST_LOWER_PRECISION_FP)
  AT_FORALL_FP32(OPENREG_AUTOCAST_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(OPENREG_AUTOCAST_FP32_SET_OPT_DTYPE)
  // norm overloads without a dtype argument: redispatched to the overload
  // with one, asking for float32 (fp32_append_dtype).
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(OPENREG_AUTOCAST_PROMOTE)

#undef OPENREG_AUTOCAST_LOWER_PRECISION_FP
#undef OPENREG_AUTOCAST_FP32
#undef OPENREG_AUTOCAST_FP32_SET_OPT_DTYPE
#undef OPENREG_AUTOCAST_PROMOTE

  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_banned));
}

}  // namespace at::openreg
