// The attention backend choice: a DispatchStub filled for PrivateUse1.
//
// scaled_dot_product_attention asks the device's _fused_sdp_choice_stub which
// kernel to run, and uses the math composite when the device registered no
// answer. openreg answers with the CPU's choice (libtorch's own CPU function,
// called directly rather than through the stub: see StubKernels.cpp for why
// openreg never calls a stub), so results are the CPU's: the chosen CPU kernel
// (flash attention for CPU) then runs through the fallback. With dropout the
// answer is math, whose dropout draws from the openreg generator; the CPU
// kernel would draw from the CPU's.
#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_native.h>

namespace at::openreg {
namespace {

int64_t fused_sdp_choice(
    const at::Tensor& query,
    const at::Tensor& key,
    const at::Tensor& value,
    const std::optional<at::Tensor>& attn_mask,
    double dropout_p,
    bool is_causal,
    std::optional<double> scale,
    bool enable_gqa) {
  if (dropout_p > 0.0) {
    return static_cast<int64_t>(at::SDPBackend::math);
  }
  return at::native::_fused_sdp_choice_cpp(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
}

} // namespace
} // namespace at::openreg

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &at::openreg::fused_sdp_choice)
} // namespace at::native
