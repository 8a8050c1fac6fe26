// Convolution reaches a PrivateUse1 backend through two "overrideable" hooks
// instead of the generic fallback: at::_convolution picks ConvBackend::
// Overrideable for PrivateUse1, and the CompositeExplicitAutograd defaults of
// these operators only raise. Both run the CPU kernels on host views.
#include <ATen/core/Tensor.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <torch/library.h>

#include "aten/CpuAliases.h"
#include "aten/CudaContract.h"
#include "aten/DeviceCall.h"
#include "aten/CpuAllocationsOnDevice.h"

namespace at::openreg {
namespace {

at::Tensor convolution_overrideable(
    const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
    int64_t groups) {
  const at::Tensor bias_tensor = bias.value_or(at::Tensor());
  const DeviceCall call("aten::convolution_overrideable", input, weight, bias_tensor);
  // A kernel of its own rather than the fallback, so it applies its CUDA
  // contract rule itself (integer convolutions, which CUDA refuses).
  static const CudaContractRule* const rule = cuda_contract_rule("aten::convolution_overrideable");
  if (rule != nullptr) {
    check_cuda_contract(
        *rule, {input, weight, bias, stride, padding, dilation, transposed, output_padding, groups},
        /*arguments_begin=*/0);
  }
  CpuAliases views(call);
  // The output, and oneDNN's buffers with it, in device memory: no copy of
  // the output afterwards.
  const AllocateResultsOnDevice on_device;
  const at::Tensor output = at::convolution(
      views.alias(input), views.alias(weight), bias_tensor.defined() ? views.alias(bias_tensor) : at::Tensor(), stride,
      padding, dilation, transposed, output_padding, groups);
  return views.to_device(output);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  const DeviceCall call("aten::convolution_backward_overrideable", grad_output, input, weight);
  CpuAliases views(call);
  // The bias gradient has one entry per output channel.
  const int64_t out_channels = transposed ? weight.size(1) * groups : weight.size(0);
  const AllocateResultsOnDevice on_device;
  auto [grad_input, grad_weight, grad_bias] = at::convolution_backward(
      views.alias(grad_output), views.alias(input), views.alias(weight), std::vector<int64_t>{out_channels}, stride,
      padding, dilation, transposed, output_padding, groups, output_mask);
  return {views.to_device(grad_input), views.to_device(grad_weight), views.to_device(grad_bias)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(convolution_overrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward_overrideable));
}

}  // namespace at::openreg
