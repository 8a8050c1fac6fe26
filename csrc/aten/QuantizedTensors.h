#pragma once

#include <string_view>
#include <utility>

#include <ATen/core/Tensor.h>
#include <ATen/quantized/Quantizer.h>

namespace at::openreg {

// The quantized dtypes an openreg tensor can have: the ones CUDA's quantized
// kernels handle. Sub-byte types (quint4x2, quint2x4) pack two or four values
// per byte, which no CUDA kernel reads either; they stay CPU-only. Raises,
// naming `op` and the device, for any other dtype.
void check_quantized_dtype(c10::ScalarType dtype, std::string_view op);

// `quantizer` with the scales and zero points of a per-channel quantizer
// replaced by map(tensor), as a new quantizer of the same scheme; any other
// quantizer (per-tensor, unknown) holds no tensors and is returned as is, since
// quantizers are never modified after construction.
template <typename Map>
at::QuantizerPtr map_channel_params(const at::QuantizerPtr& quantizer, Map&& map) {
  const auto* per_channel = dynamic_cast<const at::PerChannelAffineQuantizer*>(quantizer.get());
  if (per_channel == nullptr) {
    return quantizer;
  }
  at::Tensor scales = map(per_channel->scales());
  at::Tensor zero_points = map(per_channel->zero_points());
  if (per_channel->qscheme() == c10::kPerChannelAffineFloatQParams) {
    return c10::make_intrusive<at::PerChannelAffineFloatQParamsQuantizer>(
        per_channel->scalar_type(), std::move(scales), std::move(zero_points), per_channel->axis());
  }
  return c10::make_intrusive<at::PerChannelAffineQuantizer>(
      per_channel->scalar_type(), std::move(scales), std::move(zero_points), per_channel->axis());
}

}  // namespace at::openreg
