// Fused LSTM and GRU cells. ATen's RNN code sends CUDA, XPU and PrivateUse1
// inputs to _thnn_fused_{lstm,gru}_cell (and their backward kernels), which
// have no CPU kernel for the fallback to run, so nn.LSTM / nn.GRU need them
// here. They compute on host views with the CPU's operators, in the order the
// CPU's unfused cells use, so results match CPU's. The workspace layout is
// private to each forward/backward pair.
#include <ATen/core/Tensor.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include "aten/CpuAliases.h"
#include "aten/DeviceCall.h"

namespace at::openreg {
namespace {

// Input and hidden gate pre-activations on the host, biases added if given.
std::pair<at::Tensor, at::Tensor> host_gates(
    CpuAliases& views, const at::Tensor& input_gates, const at::Tensor& hidden_gates,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor igates = views.alias(input_gates);
  at::Tensor hgates = views.alias(hidden_gates);
  if (input_bias.has_value() && input_bias->defined()) {
    igates = igates + views.alias(*input_bias);
  }
  if (hidden_bias.has_value() && hidden_bias->defined()) {
    hgates = hgates + views.alias(*hidden_bias);
  }
  return {igates, hgates};
}

// workspace = [input, forget, cell, output] gates after activation.
std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& cx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  const DeviceCall call("aten::_thnn_fused_lstm_cell", input_gates, hidden_gates, cx, input_bias, hidden_bias);
  CpuAliases views(call);
  auto [igates, hgates] = host_gates(views, input_gates, hidden_gates, input_bias, hidden_bias);
  const auto gates = (igates + hgates).chunk(4, 1);
  const at::Tensor in = gates[0].sigmoid();
  const at::Tensor forget = gates[1].sigmoid();
  const at::Tensor cell = gates[2].tanh();
  const at::Tensor out = gates[3].sigmoid();
  const at::Tensor cy = (forget * views.alias(cx)).add_(in * cell);
  const at::Tensor hy = out * cy.tanh();
  const at::Tensor workspace = at::cat({in, forget, cell, out}, 1);
  return {views.to_device(hy), views.to_device(cy), views.to_device(workspace)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell_backward(
    const std::optional<at::Tensor>& grad_hy, const std::optional<at::Tensor>& grad_cy, const at::Tensor& cx,
    const at::Tensor& cy, const at::Tensor& workspace, bool has_bias) {
  const DeviceCall call("aten::_thnn_fused_lstm_cell_backward_impl", grad_hy, grad_cy, cx, cy, workspace);
  CpuAliases views(call);
  const auto gates = views.alias(workspace).chunk(4, 1);
  const at::Tensor& in = gates[0];
  const at::Tensor& forget = gates[1];
  const at::Tensor& cell = gates[2];
  const at::Tensor& out = gates[3];
  const at::Tensor host_cx = views.alias(cx);
  const at::Tensor tanh_cy = views.alias(cy).tanh();
  // Gradient reaching the cell state, from hy through tanh and from cy.
  at::Tensor grad_c = at::zeros_like(tanh_cy);
  at::Tensor grad_out = at::zeros_like(tanh_cy);
  if (grad_hy.has_value() && grad_hy->defined()) {
    const at::Tensor ghy = views.alias(*grad_hy);
    grad_out = ghy * tanh_cy * out * (1 - out);
    grad_c = grad_c + ghy * out * (1 - tanh_cy * tanh_cy);
  }
  if (grad_cy.has_value() && grad_cy->defined()) {
    grad_c = grad_c + views.alias(*grad_cy);
  }
  const at::Tensor grad_in = grad_c * cell * in * (1 - in);
  const at::Tensor grad_forget = grad_c * host_cx * forget * (1 - forget);
  const at::Tensor grad_cell = grad_c * in * (1 - cell * cell);
  const at::Tensor grad_gates = at::cat({grad_in, grad_forget, grad_cell, grad_out}, 1);
  const at::Tensor grad_cx = grad_c * forget;
  const at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  return {views.to_device(grad_gates), views.to_device(grad_cx), views.to_device(grad_bias)};
}

// workspace = [reset, update, new gates, hx, hidden part of the new gate].
std::tuple<at::Tensor, at::Tensor> fused_gru_cell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& hx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  const DeviceCall call("aten::_thnn_fused_gru_cell", input_gates, hidden_gates, hx, input_bias, hidden_bias);
  CpuAliases views(call);
  auto [igates, hgates] = host_gates(views, input_gates, hidden_gates, input_bias, hidden_bias);
  const auto ig = igates.chunk(3, 1);
  const auto hg = hgates.chunk(3, 1);
  const at::Tensor reset = (hg[0] + ig[0]).sigmoid();
  const at::Tensor update = (hg[1] + ig[1]).sigmoid();
  const at::Tensor fresh = (ig[2] + hg[2] * reset).tanh();
  const at::Tensor host_hx = views.alias(hx);
  const at::Tensor hy = (host_hx - fresh).mul_(update).add_(fresh);
  const at::Tensor workspace = at::cat({reset, update, fresh, host_hx, hg[2]}, 1);
  return {views.to_device(hy), views.to_device(workspace)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_gru_cell_backward(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  const DeviceCall call("aten::_thnn_fused_gru_cell_backward", grad_hy, workspace);
  CpuAliases views(call);
  const auto parts = views.alias(workspace).chunk(5, 1);
  const at::Tensor& reset = parts[0];
  const at::Tensor& update = parts[1];
  const at::Tensor& fresh = parts[2];
  const at::Tensor& hx = parts[3];
  const at::Tensor& hidden_new = parts[4];
  const at::Tensor ghy = views.alias(grad_hy);
  // hy = (hx - n) * z + n
  const at::Tensor grad_hx = ghy * update;
  const at::Tensor grad_new = ghy * (1 - update) * (1 - fresh * fresh);
  const at::Tensor grad_update = ghy * (hx - fresh) * update * (1 - update);
  const at::Tensor grad_reset = grad_new * hidden_new * reset * (1 - reset);
  const at::Tensor grad_input_gates = at::cat({grad_reset, grad_update, grad_new}, 1);
  const at::Tensor grad_hidden_gates = at::cat({grad_reset, grad_update, grad_new * reset}, 1);
  const at::Tensor grad_input_bias = has_bias ? grad_input_gates.sum(0) : at::Tensor();
  const at::Tensor grad_hidden_bias = has_bias ? grad_hidden_gates.sum(0) : at::Tensor();
  return {
      views.to_device(grad_input_gates), views.to_device(grad_hidden_gates), views.to_device(grad_hx),
      views.to_device(grad_input_bias), views.to_device(grad_hidden_bias)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(fused_lstm_cell_backward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(fused_gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(fused_gru_cell_backward));
}

}  // namespace at::openreg
