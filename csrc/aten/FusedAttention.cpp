// Fused attention through the path PyTorch keeps for out-of-tree devices.
//
// scaled_dot_product_attention asks the device's _fused_sdp_choice_stub which
// backend to run. CUDA's flash, memory-efficient and cuDNN backends call
// CUDA-only operators; the one a PrivateUse1 device fills is "overrideable":
// aten::_scaled_dot_product_fused_attention_overrideable and its backward,
// whose CompositeExplicitAutograd defaults only raise, and whose autograd
// formula (derivatives.yaml) ties the two together. Inductor keeps both as
// fallback kernels, laid out as their meta functions say.
//
// openreg's fused kernel is the CPU's flash attention kernel run on host
// views, so the choice is overrideable exactly where the CPU would run that
// kernel (when the user left the backend enabled), and the CPU's own answer
// otherwise (math for dropout, a mask that requires grad, ...): every result
// is the CPU's bit for bit.
#include <array>

#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>
#include <ATen/ops/_fused_sdp_choice_native.h>
#include <ATen/ops/_scaled_dot_product_attention_math.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/library.h>

#include "TorchCompat.h"
#include "aten/CpuAliases.h"
#include "aten/DeviceCall.h"
#include "aten/CpuAllocationsOnDevice.h"

namespace at::openreg {
namespace {

constexpr std::string_view kForward = "aten::_scaled_dot_product_fused_attention_overrideable";
constexpr std::string_view kBackward = "aten::_scaled_dot_product_fused_attention_overrideable_backward";

// The layout the operators' meta functions promise (and compiled graphs
// check): a gradient laid out as its input (empty_like), where the CPU's flash
// backward writes (batch, seq, heads, dim) order.
at::Tensor laid_out_like(const at::Tensor& result, const at::Tensor& like) {
  if (!result.defined() || result.strides() == like.strides()) {
    return result;
  }
  return at::empty_like(like).copy_(result);
}

// An optional tensor argument of an ATen call: absent, not undefined.
std::optional<at::Tensor> present(const at::Tensor& tensor) {
  return tensor.defined() ? std::optional<at::Tensor>(tensor) : std::nullopt;
}

// The gates of the CPU's flash kernel (sdp_utils_cpp.cpp's
// use_flash_attention_cpp, not exported) from the header's inline checks, for
// when the user switched flash off and the CPU cannot be asked. They follow
// the release's list for 4-d inputs (2.14 also sends 3-d inputs to the flash
// kernel, which this list does not know).
bool cpu_flash_gates_pass(const sdp::sdp_params& params) {
  constexpr bool debug = false;
  constexpr std::array<at::ScalarType, 4> flash_dtypes{at::kFloat, at::kDouble, at::kBFloat16, at::kHalf};
  const bool same_head_dim =
      params.query.sym_size(-1) == params.key.sym_size(-1) && params.query.sym_size(-1) == params.value.sym_size(-1);
  return sdp::check_nested_tensor(params, debug) && sdp::check_for_dropout(params, debug) &&
      sdp::check_tensor_shapes(params, debug) &&
#if OPENREG_CPU_FLASH_TAKES_MQA
      sdp::check_batch_size_and_num_heads_dense<true /*supports_gqa*/, true, true /*supports_mqa*/>(params, debug) &&
#else
      sdp::check_batch_size_and_num_heads_dense<true /*supports_gqa*/>(params, debug) &&
#endif
      sdp::check_attn_mask_shape(params, debug) && same_head_dim &&
      sdp::check_nonzero_sequence_lengths_dense(params, debug) &&
      sdp::check_last_dim_stride_equals_1_dense<false /*ignore_singleton_dim*/>(params, debug) &&
      sdp::check_tensor_dtype(params, flash_dtypes, debug);
}

int64_t fused_sdp_choice(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const std::optional<at::Tensor>& attn_mask,
    double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa) {
  constexpr auto overrideable = static_cast<int64_t>(at::SDPBackend::overrideable);
  // What the CPU runs for these inputs under the user's switches (raises, as
  // on the CPU, when nothing enabled fits).
  const auto cpu_choice = [&] {
    return at::native::_fused_sdp_choice_cpp(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
  };
  const auto& context = at::globalContext();
  if (!context.userEnabledOverrideableSDP()) {
    return cpu_choice();  // math, or the CPU's flash kernel through the fallback
  }
  if (context.userEnabledFlashSDP()) {
    // The CPU's own gates, exact for every release: where it would run its
    // flash kernel, openreg runs the same kernel as its fused one.
    const int64_t choice = cpu_choice();
    return choice == static_cast<int64_t>(at::SDPBackend::flash_attention) ? overrideable : choice;
  }
  const sdp::sdp_params params{query, key, value, attn_mask, dropout_p, is_causal, enable_gqa};
  return cpu_flash_gates_pass(params) ? overrideable : cpu_choice();
}

using AttentionOutputs = std::tuple<
    at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor, at::Tensor>;

AttentionOutputs fused_attention_overrideable(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const std::optional<at::Tensor>& attn_bias,
    double dropout_p, bool is_causal, bool return_debug_mask, std::optional<double> scale) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      dropout_p == 0.0, "openreg: ", kForward, " has no dropout (got dropout_p=", dropout_p,
      "); scaled_dot_product_attention takes the math backend for dropout");
  TORCH_CHECK_NOT_IMPLEMENTED(!return_debug_mask, "openreg: ", kForward, " has no debug attention mask");
  const at::Tensor bias = attn_bias.value_or(at::Tensor());
  const DeviceCall call(kForward, query, key, value, bias);
  CpuAliases views(call);
  const AllocateResultsOnDevice on_device;
  auto [output, logsumexp] = at::_scaled_dot_product_flash_attention_for_cpu(
      views.alias(query), views.alias(key), views.alias(value), dropout_p, is_causal, present(views.alias(bias)),
      scale);
  // The schema's logsumexp is (batch, heads, q_len) and contiguous (its meta
  // function, which compiled graphs check); the CPU kernel writes it
  // heads-minor. Its backward reads it through strides either way.
  logsumexp = logsumexp.contiguous();
  // Without dropout there is no random state: empty CPU scalars, as CUDA's
  // flash kernel returns them. No cumulative sequence lengths (dense inputs).
  const auto no_rng_state = [] { return at::empty({}, at::TensorOptions().dtype(at::kLong)); };
  return {
      views.to_device(output),
      views.to_device(logsumexp),
      at::Tensor(),
      at::Tensor(),
      query.sym_size(-2),
      key.sym_size(-2),
      no_rng_state(),
      no_rng_state(),
      at::Tensor()};
}

// The gradient of an additive attention bias, which the CPU's flash backward
// does not compute: scaled_dot_product_attention never asks for it (a bias
// that requires grad takes the math backend), a direct call of the backward
// may. It is what the CPU's math backend gives, differentiated by autograd
// here on the host views.
at::Tensor bias_gradient(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& bias, bool is_causal, std::optional<double> scale) {
  // A backend kernel runs below autograd (its dispatch keys excluded on this
  // thread): the math graph needs them back, with grad mode on.
  const c10::impl::ForceDispatchKeyGuard autograd_keys(c10::default_included_set, c10::default_excluded_set);
  const at::AutoGradMode grad_mode(true);
  const at::Tensor leaf = bias.detach().requires_grad_(true);
  const bool grouped_heads = query.size(-3) != key.size(-3);
  const at::Tensor output = std::get<0>(at::_scaled_dot_product_attention_math(
      query, key, value, leaf, 0.0, is_causal, std::nullopt, scale, grouped_heads));
  return torch::autograd::grad({output}, {leaf}, {grad_out})[0];
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_overrideable_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out,
    const at::Tensor& logsumexp, const at::Tensor& /*cum_seq_q*/, const at::Tensor& /*cum_seq_k*/, int64_t /*max_q*/,
    int64_t /*max_k*/, double dropout_p, bool is_causal, const at::Tensor& /*philox_seed*/,
    const at::Tensor& /*philox_offset*/, std::optional<double> scale) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      dropout_p == 0.0, "openreg: ", kBackward, " has no dropout (got dropout_p=", dropout_p, ")");
  const DeviceCall call(kBackward, grad_out, query, key, value, attn_bias, out, logsumexp);
  CpuAliases views(call);
  const AllocateResultsOnDevice on_device;
  const at::Tensor host_grad_out = views.alias(grad_out);
  const at::Tensor host_query = views.alias(query);
  const at::Tensor host_key = views.alias(key);
  const at::Tensor host_value = views.alias(value);
  const at::Tensor host_bias = views.alias(attn_bias);
  at::Tensor grad_query, grad_key, grad_value, grad_bias;
  if (grad_input_mask[0] || grad_input_mask[1] || grad_input_mask[2]) {
    std::tie(grad_query, grad_key, grad_value) = at::_scaled_dot_product_flash_attention_for_cpu_backward(
        host_grad_out, host_query, host_key, host_value, views.alias(out), views.alias(logsumexp), dropout_p, is_causal,
        present(host_bias), scale);
  }
  if (grad_input_mask[3] && host_bias.defined()) {
    grad_bias = bias_gradient(host_grad_out, host_query, host_key, host_value, host_bias, is_causal, scale);
  }
  const auto wanted = [&](bool asked, const at::Tensor& grad, const at::Tensor& input) {
    return asked ? views.to_device(laid_out_like(grad, input)) : at::Tensor();
  };
  return {
      wanted(grad_input_mask[0], grad_query, host_query), wanted(grad_input_mask[1], grad_key, host_key),
      wanted(grad_input_mask[2], grad_value, host_value), wanted(grad_input_mask[3], grad_bias, host_bias)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // The operator behind torch._fused_sdp_choice asks the same question.
  m.impl("_fused_sdp_choice", TORCH_FN(fused_sdp_choice));
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(fused_attention_overrideable));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", TORCH_FN(fused_attention_overrideable_backward));
}

}  // namespace at::openreg

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &at::openreg::fused_sdp_choice)
}  // namespace at::native
