// The autograd kernel of openreg::scaled_tanh, a torch::autograd::Function
// with a C++ backward. operators.yaml registers it on the autograd key of each
// backend that has kernels (AutogradPrivateUse1 for openreg, AutogradCPU for
// the CPU). The other operators' autograd kernel is the not-implemented
// fallback (also named in the YAML): the forward runs and records a node whose
// backward raises an error naming the operator (out= variants, like ATen's,
// are not differentiable).
#include <ATen/core/Tensor.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>

namespace at::openreg {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// y = tanh(scale * x), dy/dx = scale * (1 - y^2).
class ScaledTanh : public torch::autograd::Function<ScaledTanh> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, double scale) {
    // Below autograd, the call reaches the backend kernel of self's device.
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("openreg::scaled_tanh", "")
                               .typed<at::Tensor(const at::Tensor&, double)>();
    at::Tensor result = op.call(self, scale);
    // The backward needs only the result, so the input is not kept alive.
    ctx->save_for_backward({result});
    ctx->saved_data["scale"] = scale;
    return result;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    const at::Tensor result = ctx->get_saved_variables()[0];
    const double scale = ctx->saved_data["scale"].toDouble();
    // ATen operators on self's device: the backward runs wherever the forward
    // did, and is itself differentiable (double backward works).
    at::Tensor grad_self = grad_outputs[0] * (1 - result * result) * scale;
    return {grad_self, at::Tensor()};
  }
};

}  // namespace

at::Tensor scaled_tanh_autograd(const at::Tensor& self, double scale) {
  return ScaledTanh::apply(self, scale);
}

}  // namespace at::openreg
