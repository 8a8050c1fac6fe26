// Fills, random fills and the creation operators behind torch.zeros, ones,
// full, rand, randn, randint, randperm, arange, linspace, logspace and eye.
//
// They are openreg kernels rather than fallback calls so that strict mode
// (OPENREG_FALLBACK=0), which exists to show which *compute* operators lack a
// kernel, can still create tensors. Each runs the very at::native function
// the CPU registers for the operator on host views of the openreg tensors (so
// argument checks, kernels and results are the CPU's), after CUDA's device
// check. Random operators draw from the openreg device's generator, whose
// state is a CPU generator (see OpenRegGenerator.h): the same seed gives the
// CPU's numbers bit for bit.
#include <ATen/ExpandUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange_native.h>
#include <ATen/ops/bernoulli_native.h>
#include <ATen/ops/cauchy_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/exponential_native.h>
#include <ATen/ops/eye_native.h>
#include <ATen/ops/fill_native.h>
#include <ATen/ops/geometric_native.h>
#include <ATen/ops/linspace_native.h>
#include <ATen/ops/log_normal_native.h>
#include <ATen/ops/logspace_native.h>
#include <ATen/ops/normal_native.h>
#include <ATen/ops/random_native.h>
#include <ATen/ops/randperm_native.h>
#include <ATen/ops/uniform_native.h>
#include <ATen/ops/zero_native.h>

#include "PrivateUse1NativeFunctions.h"  // generated from native_functions.yaml
#include "aten/CpuAliases.h"
#include "aten/DeviceCall.h"

namespace at::openreg {
namespace {

using OptionalGenerator = std::optional<at::Generator>;

// In-place fills: `fill(views, host_self)` runs the CPU's implementation.
template <typename Fill>
at::Tensor& fill_on_host(std::string_view op, at::Tensor& self, const Fill& fill) {
  const DeviceCall call(op, self);
  CpuAliases views(call);
  fill(views, views.alias(self));
  return self;
}

// out= creation and sampling: `fill(views, host_out)`; the CPU's
// implementation resizes `out` as it needs.
template <typename Fill, typename... Tensors>
at::Tensor& out_on_host(std::string_view op, at::Tensor& out, const Fill& fill, const Tensors&... inputs) {
  const DeviceCall call(op, inputs..., out);
  CpuAliases views(call);
  at::Tensor host_out = views.alias(out);
  fill(views, host_out);
  views.write_back();
  return out;
}

}  // namespace

// The kernels, registered from csrc/aten/native_functions.yaml.

at::Tensor& OpenRegNativeFunctions::fill_(at::Tensor& self, const at::Scalar& value) {
  return fill_on_host(
      "aten::fill_.Scalar", self, [&](CpuAliases&, at::Tensor host) { at::native::fill_(host, value); });
}

// `value` may be a 0-dim CPU tensor, as on CUDA.
at::Tensor& OpenRegNativeFunctions::fill_(at::Tensor& self, const at::Tensor& value) {
  const DeviceCall device_call("aten::fill_.Tensor", self, value);
  CpuAliases call(device_call);
  at::Tensor host = call.alias(self);
  at::native::fill_(host, call.alias(value));
  return self;
}

at::Tensor& OpenRegNativeFunctions::zero_(at::Tensor& self) {
  return fill_on_host("aten::zero_", self, [](CpuAliases&, at::Tensor host) { at::native::zero_(host); });
}

at::Tensor& OpenRegNativeFunctions::normal_(at::Tensor& self, double mean, double std, OptionalGenerator gen) {
  return fill_on_host("aten::normal_", self, [&](CpuAliases& call, at::Tensor host) {
    at::native::normal_(host, mean, std, call.generator(gen));
  });
}

at::Tensor& OpenRegNativeFunctions::uniform_(at::Tensor& self, double from, double to, OptionalGenerator gen) {
  return fill_on_host("aten::uniform_", self, [&](CpuAliases& call, at::Tensor host) {
    at::native::uniform_(host, from, to, call.generator(gen));
  });
}

at::Tensor& OpenRegNativeFunctions::random_(at::Tensor& self, OptionalGenerator gen) {
  return fill_on_host("aten::random_", self, [&](CpuAliases& call, at::Tensor host) {
    at::native::random_(host, call.generator(gen));
  });
}

at::Tensor& OpenRegNativeFunctions::random_(at::Tensor& self, int64_t to, OptionalGenerator gen) {
  return fill_on_host("aten::random_.to", self, [&](CpuAliases& call, at::Tensor host) {
    at::native::random_(host, to, call.generator(gen));
  });
}

at::Tensor& OpenRegNativeFunctions::random_(
    at::Tensor& self, int64_t from, std::optional<int64_t> to, OptionalGenerator gen) {
  return fill_on_host("aten::random_.from", self, [&](CpuAliases& call, at::Tensor host) {
    at::native::random_(host, from, to, call.generator(gen));
  });
}

at::Tensor& OpenRegNativeFunctions::bernoulli_(at::Tensor& self, double p, OptionalGenerator gen) {
  return fill_on_host("aten::bernoulli_.float", self, [&](CpuAliases& call, at::Tensor host) {
    at::native::bernoulli_(host, p, call.generator(gen));
  });
}

at::Tensor& OpenRegNativeFunctions::bernoulli_(at::Tensor& self, const at::Tensor& p, OptionalGenerator gen) {
  const DeviceCall device_call("aten::bernoulli_.Tensor", self, p);
  CpuAliases call(device_call);
  at::Tensor host = call.alias(self);
  at::native::bernoulli_(host, call.alias(p), call.generator(gen));
  return self;
}

at::Tensor& OpenRegNativeFunctions::bernoulli_out(const at::Tensor& self, OptionalGenerator gen, at::Tensor& out) {
  return out_on_host(
      "aten::bernoulli.out", out,
      [&](CpuAliases& call, at::Tensor& host_out) {
        at::native::bernoulli_out(call.alias(self), call.generator(gen), host_out);
      },
      self);
}

at::Tensor& OpenRegNativeFunctions::exponential_(at::Tensor& self, double lambd, OptionalGenerator gen) {
  return fill_on_host("aten::exponential_", self, [&](CpuAliases& call, at::Tensor host) {
    at::native::exponential_(host, lambd, call.generator(gen));
  });
}

at::Tensor& OpenRegNativeFunctions::cauchy_(at::Tensor& self, double median, double sigma, OptionalGenerator gen) {
  return fill_on_host("aten::cauchy_", self, [&](CpuAliases& call, at::Tensor host) {
    at::native::cauchy_(host, median, sigma, call.generator(gen));
  });
}

at::Tensor& OpenRegNativeFunctions::log_normal_(at::Tensor& self, double mean, double std, OptionalGenerator gen) {
  return fill_on_host("aten::log_normal_", self, [&](CpuAliases& call, at::Tensor host) {
    at::native::log_normal_(host, mean, std, call.generator(gen));
  });
}

at::Tensor& OpenRegNativeFunctions::geometric_(at::Tensor& self, double p, OptionalGenerator gen) {
  return fill_on_host("aten::geometric_", self, [&](CpuAliases& call, at::Tensor host) {
    at::native::geometric_(host, p, call.generator(gen));
  });
}

// torch.normal with tensor arguments. The functional overloads allocate
// their output on the device as the CPU's functional kernels do (contiguous,
// the broadcast shape), then run the out= kernel.
at::Tensor& OpenRegNativeFunctions::normal_out(
    const at::Tensor& mean, double std, OptionalGenerator gen, at::Tensor& out) {
  return out_on_host(
      "aten::normal.Tensor_float_out", out,
      [&](CpuAliases& call, at::Tensor& host_out) {
        at::native::normal_out(call.alias(mean), std, call.generator(gen), host_out);
      },
      mean);
}

at::Tensor& OpenRegNativeFunctions::normal_out(
    double mean, const at::Tensor& std, OptionalGenerator gen, at::Tensor& out) {
  return out_on_host(
      "aten::normal.float_Tensor_out", out,
      [&](CpuAliases& call, at::Tensor& host_out) {
        at::native::normal_out(mean, call.alias(std), call.generator(gen), host_out);
      },
      std);
}

at::Tensor& OpenRegNativeFunctions::normal_out(
    const at::Tensor& mean, const at::Tensor& std, OptionalGenerator gen, at::Tensor& out) {
  return out_on_host(
      "aten::normal.Tensor_Tensor_out", out,
      [&](CpuAliases& call, at::Tensor& host_out) {
        at::native::normal_out(call.alias(mean), call.alias(std), call.generator(gen), host_out);
      },
      mean, std);
}

at::Tensor OpenRegNativeFunctions::normal(const at::Tensor& mean, double std, OptionalGenerator gen) {
  at::Tensor out = at::empty_like(mean, at::MemoryFormat::Contiguous);
  return normal_out(mean, std, std::move(gen), out);
}

at::Tensor OpenRegNativeFunctions::normal(double mean, const at::Tensor& std, OptionalGenerator gen) {
  at::Tensor out = at::empty_like(std, at::MemoryFormat::Contiguous);
  return normal_out(mean, std, std::move(gen), out);
}

at::Tensor OpenRegNativeFunctions::normal(const at::Tensor& mean, const at::Tensor& std, OptionalGenerator gen) {
  // One of the two may be a 0-dim CPU tensor: the output goes to the other's device.
  const c10::Device device = common_device("aten::normal.Tensor_Tensor", mean, std);
  at::Tensor out =
      at::empty(at::infer_size(mean.sizes(), std.sizes()), mean.options().device(device), at::MemoryFormat::Contiguous);
  return normal_out(mean, std, std::move(gen), out);
}

at::Tensor& OpenRegNativeFunctions::randperm_out(int64_t n, OptionalGenerator gen, at::Tensor& out) {
  return out_on_host("aten::randperm.generator_out", out, [&](CpuAliases& call, at::Tensor& host_out) {
    at::native::randperm_out_cpu(n, call.generator(gen), host_out);
  });
}

at::Tensor& OpenRegNativeFunctions::arange_out(
    const at::Scalar& start, const at::Scalar& end, const at::Scalar& step, at::Tensor& out) {
  return out_on_host("aten::arange.start_out", out, [&](CpuAliases&, at::Tensor& host_out) {
    at::native::arange_out(start, end, step, host_out);
  });
}

at::Tensor& OpenRegNativeFunctions::linspace_out(
    const at::Scalar& start, const at::Scalar& end, int64_t steps, at::Tensor& out) {
  return out_on_host("aten::linspace.out", out, [&](CpuAliases&, at::Tensor& host_out) {
    at::native::linspace_out(start, end, steps, host_out);
  });
}

at::Tensor& OpenRegNativeFunctions::logspace_out(
    const at::Scalar& start, const at::Scalar& end, int64_t steps, double base, at::Tensor& out) {
  return out_on_host("aten::logspace.out", out, [&](CpuAliases&, at::Tensor& host_out) {
    at::native::logspace_out(start, end, steps, base, host_out);
  });
}

at::Tensor& OpenRegNativeFunctions::eye_out(int64_t n, at::Tensor& out) {
  return out_on_host(
      "aten::eye.out", out, [&](CpuAliases&, at::Tensor& host_out) { at::native::eye_out_cpu(n, host_out); });
}

at::Tensor& OpenRegNativeFunctions::eye_out(int64_t n, int64_t m, at::Tensor& out) {
  return out_on_host(
      "aten::eye.m_out", out, [&](CpuAliases&, at::Tensor& host_out) { at::native::eye_out_cpu(n, m, host_out); });
}

}  // namespace at::openreg
