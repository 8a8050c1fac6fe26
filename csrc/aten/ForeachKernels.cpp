// Foreach operators (torch._foreach_*): one operator over lists of tensors,
// what torch.optim's foreach implementations (SGD, Adam, AdamW, ...) call
// once per step for all parameters.
//
// ATen's kernels for them are CompositeExplicitAutograd loops that call the
// per-tensor operator through the dispatcher for every element, so each
// tensor pays a whole kernel call: device checks, device guard, stream wait,
// scoped accesses, profiler record. CUDA registers multi-tensor kernels
// instead; these are openreg's. One list call
//   - checks the lists' lengths as ATen does, and the devices of all their
//     tensors once, by the per-tensor rule (DeviceCheck.h: one openreg
//     device; 0-dim CPU tensors allowed as inputs), before writing anything;
//   - makes that device current once, waits for its stream once and opens
//     the storages of all lists with one batched access (HostAddresses::open,
//     one KernelLaunch record named after the foreach operator);
//   - runs each index's per-tensor operator in list order, through the stub
//     operators' own call (run_stub, StubOperators.h): the CPU loops on
//     device memory where the iterator needs no cast, the host path with the
//     CPU's casts otherwise. In list order, so tensors that appear in two
//     lists, or share storage, see the earlier indices' writes exactly as in
//     ATen's loop.
// The Scalar of add/sub/mul/div's .Scalar and .ScalarList overloads becomes
// a 0-dim CPU operand of the per-tensor Tensor operator, made in the tensor's
// dtype, where that gives what the per-tensor Scalar operator (mul_.Scalar,
// ...) computes (scalar_operand). Where it may not (reduced floating types,
// promotion to another dtype), and for an index whose `self` is not on the
// device (a 0-dim CPU tensor in a functional call), the index runs ATen's
// per-tensor operator itself through the dispatcher, as the composite loop
// would.
#include <algorithm>
#include <tuple>

#include <ATen/Dispatch_v2.h>
#include <ATen/ops/add.h>
#include <ATen/ops/div.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sub.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/ForeachUtils.h>
#include <torch/library.h>

#include "aten/HostAddresses.h"
#include "aten/StubOperators.h"

namespace at::openreg {
namespace {

// The Scalar operand of the per-tensor Tensor operator (add_.Tensor, ...)
// for `tensor`'s index: a 0-dim CPU wrapped number in `tensor`'s dtype,
// holding the value the CPU's cast to that dtype gives (c10::convert, the
// copy kernel's static_cast). Undefined where that may not reproduce the
// per-tensor Scalar operator: where promotion gives another dtype (an
// integer tensor and a float scalar), and for the other floating types
// (half, bfloat16, float8), whose loops compute in float and whose Scalar
// operators differ from the Tensor ones (the CPU's mul_.Scalar of a half
// tensor rounds the scalar to half first, mul_.Tensor does not).
at::Tensor scalar_operand(const at::Scalar& value, const at::Tensor& tensor) {
  const c10::ScalarType dtype = tensor.scalar_type();
  const bool plain_dtype = dtype == c10::kFloat || dtype == c10::kDouble || dtype == c10::kComplexFloat ||
      dtype == c10::kComplexDouble || c10::isIntegralType(dtype, /*includeBool=*/true);
  if (!plain_dtype || value.isSymbolic() || at::native::result_type(tensor, value) != dtype) {
    return {};
  }
  at::Tensor operand = at::detail::empty_cpu({}, dtype);
  AT_DISPATCH_V2(
      dtype, "openreg foreach scalar", AT_WRAP([&] {
        scalar_t converted;
        if (value.isFloatingPoint()) {
          converted = c10::convert<scalar_t>(value.toDouble());
        } else if (value.isComplex()) {
          converted = c10::convert<scalar_t>(value.toComplexDouble());
        } else if (value.isBoolean()) {
          converted = c10::convert<scalar_t>(value.toBool());
        } else {
          converted = c10::convert<scalar_t>(value.toLong());
        }
        *operand.mutable_data_ptr<scalar_t>() = converted;
      }),
      AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), c10::kBool);
  operand.unsafeGetTensorImpl()->set_wrapped_number(true);
  return operand;
}

// ATen's per-tensor functional operator `Op`, through the dispatcher.
template <typename Op, typename... Rest>
at::Tensor dispatch_functional(const at::Tensor& self, const Rest&... rest) {
  static const auto handle = [] {
    const std::string_view name = Op::functional;  // "aten::add.Tensor", "aten::addcmul"
    const size_t dot = name.find('.');
    const std::string overload = dot == std::string_view::npos ? "" : std::string(name.substr(dot + 1));
    return c10::Dispatcher::singleton()
        .findSchemaOrThrow(std::string(name.substr(0, dot)).c_str(), overload.c_str())
        .template typed<at::Tensor(const at::Tensor&, const Rest&...)>();
  }();
  return handle.call(self, rest...);
}

// One foreach call on one device; its kernels run one index at a time.
class ForeachCall {
 public:
  // `written`: the list an in-place operator writes (empty for functional
  // calls); `read`: the lists it only reads.
  ForeachCall(std::string_view op, at::TensorList written, c10::ArrayRef<at::TensorList> read)
      : call_(op, common_device(op, written, read)), addresses_(call_.device(), op) {
    c10::SmallVector<at::TensorList, 4> lists(read.begin(), read.end());
    lists.push_back(written);
    addresses_.open(lists);
  }

  // The per-tensor operator `Op` on one index, in place on `self`.
  template <typename Op, typename... Args>
  void in_place(const at::Tensor& self, const Args&... args) {
    run_stub<Op>(call_, addresses_, self, self, args...);
  }

  // The same, functional.
  template <typename Op, typename... Args>
  at::Tensor functional(const at::Tensor& self, const Args&... args) {
    if (!self.is_privateuseone()) {
      return per_tensor([&] { return dispatch_functional<Op>(self, args...); });
    }
    return *run_stub<Op>(call_, addresses_, at::Tensor(), self, args...);
  }

  // One index through ATen's own per-tensor operator: a kernel call of its
  // own, which must not nest in this one's launch.
  template <typename PerTensor>
  auto per_tensor(PerTensor run) {
    addresses_.close();
    return run();
  }

 private:
  static c10::Device common_device(std::string_view op, at::TensorList written, c10::ArrayRef<at::TensorList> read) {
    DeviceCheck check(op);
    for (const at::Tensor& tensor : written) {
      check.check_written(tensor);
    }
    for (const at::TensorList list : read) {
      for (const at::Tensor& tensor : list) {
        check.check(tensor);
      }
    }
    return check.device();
  }

  DeviceCall call_;
  HostAddresses addresses_;
};

// The foreach operator's name as a template argument: it names the kernel in
// errors and profiles.
template <size_t N>
struct OpName {
  constexpr OpName(const char (&name)[N]) {
    std::copy_n(name, N, chars);
  }
  constexpr std::string_view view() const {
    return {chars, N - 1};
  }
  char chars[N];
};

// An argument after self, at one index: a list's element, or the Scalar
// every index gets.
const at::Tensor& element(at::TensorList list, size_t i) {
  return list[i];
}
const at::Scalar& element(at::ArrayRef<at::Scalar> list, size_t i) {
  return list[i];
}
const at::Scalar& element(const at::Scalar& scalar, size_t /*i*/) {
  return scalar;
}

// ATen's checks of the lists' lengths, in its order.
void check_lengths(at::TensorList self) {
  at::native::check_foreach_api_restrictions(self);
}
template <typename Arg, typename... Args>
void check_lengths(at::TensorList self, const Arg& arg, const Args&... args) {
  if constexpr (std::is_same_v<Arg, at::TensorList> || std::is_same_v<Arg, at::ArrayRef<at::Scalar>>) {
    at::native::check_foreach_api_restrictions(self, arg);
  } else {
    at::native::check_foreach_api_restrictions(self);
  }
  check_lengths(self, args...);
}

// The tensor lists among the arguments after self.
template <typename... Args>
c10::SmallVector<at::TensorList, 4> tensor_lists(const Args&... args) {
  c10::SmallVector<at::TensorList, 4> lists;
  (
      [&] {
        if constexpr (std::is_same_v<Args, at::TensorList>) {
          lists.push_back(args);
        }
      }(),
      ...);
  return lists;
}

// The per-tensor operator `Op` on every index, in list order:
// self[i].op(element(args, i)...). `Args`: what the foreach overload takes
// after self (lists, a Scalar, a list of Scalars), as in its schema.
template <OpName kName, typename Op, typename... Args>
std::vector<at::Tensor> functional(at::TensorList self, Args... args) {
  check_lengths(self, args...);
  c10::SmallVector<at::TensorList, 4> read = tensor_lists(args...);
  read.push_back(self);
  ForeachCall call(kName.view(), {}, read);
  std::vector<at::Tensor> results;
  results.reserve(self.size());
  for (size_t i = 0; i < self.size(); ++i) {
    results.push_back(call.functional<Op>(self[i], element(args, i)...));
  }
  return results;
}

template <OpName kName, typename Op, typename... Args>
void in_place(at::TensorList self, Args... args) {
  check_lengths(self, args...);
  ForeachCall call(kName.view(), self, tensor_lists(args...));
  for (size_t i = 0; i < self.size(); ++i) {
    call.in_place<Op>(self[i], element(args, i)...);
  }
}

// ATen's per-tensor Scalar operators of add, sub, mul and div.
template <typename Op>
at::Tensor scalar_operator(const at::Tensor& self, const at::Scalar& value) {
  if constexpr (std::is_same_v<Op, add_op>) {
    return at::add(self, value);
  } else if constexpr (std::is_same_v<Op, sub_op>) {
    return at::sub(self, value);
  } else if constexpr (std::is_same_v<Op, mul_op>) {
    return at::mul(self, value);
  } else {
    return at::div(self, value);
  }
}

template <typename Op>
void scalar_operator_(const at::Tensor& self, const at::Scalar& value) {
  if constexpr (std::is_same_v<Op, add_op>) {
    self.add_(value);
  } else if constexpr (std::is_same_v<Op, sub_op>) {
    self.sub_(value);
  } else if constexpr (std::is_same_v<Op, mul_op>) {
    self.mul_(value);
  } else {
    self.div_(value);
  }
}

// The alpha add.Scalar and sub.Scalar pass add.Tensor and sub.Tensor.
const at::Scalar kAlphaOne(1);

// One index of add/sub/mul/div with a Scalar: the Tensor operator with the
// Scalar's operand (alpha 1 for add and sub, as add.Scalar calls add.Tensor),
// or the Scalar operator itself.
template <typename Op>
at::Tensor with_scalar(ForeachCall& call, const at::Tensor& self, const at::Tensor& operand, const at::Scalar& value) {
  if (!operand.defined()) {
    return call.per_tensor([&] { return scalar_operator<Op>(self, value); });
  }
  if constexpr (std::is_same_v<Op, add_op> || std::is_same_v<Op, sub_op>) {
    return call.functional<Op>(self, operand, kAlphaOne);
  } else {
    return call.functional<Op>(self, operand);
  }
}

template <typename Op>
void with_scalar_(ForeachCall& call, const at::Tensor& self, const at::Tensor& operand, const at::Scalar& value) {
  if (!operand.defined()) {
    call.per_tensor([&] { scalar_operator_<Op>(self, value); });
  } else if constexpr (std::is_same_v<Op, add_op> || std::is_same_v<Op, sub_op>) {
    call.in_place<Op>(self, operand, kAlphaOne);
  } else {
    call.in_place<Op>(self, operand);
  }
}

// One Scalar as the operand of every tensor of a list: made once per dtype
// (the promotion that decides it depends on nothing else).
class ScalarOperand {
 public:
  explicit ScalarOperand(const at::Scalar& value) : value_(value) {}

  const at::Tensor& for_tensor(const at::Tensor& tensor) {
    if (!made_ || dtype_ != tensor.scalar_type()) {
      operand_ = tensor.is_privateuseone() ? scalar_operand(value_, tensor) : at::Tensor();
      dtype_ = tensor.scalar_type();
      made_ = tensor.is_privateuseone();
    }
    return operand_;
  }

 private:
  const at::Scalar& value_;
  at::Tensor operand_;
  c10::ScalarType dtype_ = c10::ScalarType::Undefined;
  bool made_ = false;
};

// .Scalar of add, sub, mul and div: self[i].add(scalar).
template <OpName kName, typename Op>
std::vector<at::Tensor> scalar(at::TensorList self, const at::Scalar& value) {
  at::native::check_foreach_api_restrictions(self);
  ForeachCall call(kName.view(), {}, self);
  ScalarOperand operand(value);
  std::vector<at::Tensor> results;
  results.reserve(self.size());
  for (const at::Tensor& t : self) {
    results.push_back(with_scalar<Op>(call, t, operand.for_tensor(t), value));
  }
  return results;
}

template <OpName kName, typename Op>
void scalar_(at::TensorList self, const at::Scalar& value) {
  at::native::check_foreach_api_restrictions(self);
  ForeachCall call(kName.view(), self, {});
  ScalarOperand operand(value);
  for (const at::Tensor& t : self) {
    with_scalar_<Op>(call, t, operand.for_tensor(t), value);
  }
}

// .ScalarList of add, sub, mul and div: self[i].add(scalars[i]).
template <OpName kName, typename Op>
std::vector<at::Tensor> scalar_list(at::TensorList self, at::ArrayRef<at::Scalar> scalars) {
  at::native::check_foreach_api_restrictions(self, scalars);
  ForeachCall call(kName.view(), {}, self);
  std::vector<at::Tensor> results;
  results.reserve(self.size());
  for (size_t i = 0; i < self.size(); ++i) {
    ScalarOperand operand(scalars[i]);
    results.push_back(with_scalar<Op>(call, self[i], operand.for_tensor(self[i]), scalars[i]));
  }
  return results;
}

template <OpName kName, typename Op>
void scalar_list_(at::TensorList self, at::ArrayRef<at::Scalar> scalars) {
  at::native::check_foreach_api_restrictions(self, scalars);
  ForeachCall call(kName.view(), self, {});
  for (size_t i = 0; i < self.size(); ++i) {
    ScalarOperand operand(scalars[i]);
    with_scalar_<Op>(call, self[i], operand.for_tensor(self[i]), scalars[i]);
  }
}

}  // namespace

// One line per overload: its schema name, the kernel template, the
// per-tensor operator (StubOperators.h) and, for the generic ones, the
// arguments after self, as the schema has them.
#define OPENREG_FOREACH(OVERLOAD, KERNEL, ...) m.impl(OVERLOAD, TORCH_FN((KERNEL<"aten::" OVERLOAD, __VA_ARGS__>)))

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using List = at::TensorList;
  using Scalar = const at::Scalar&;
  using Scalars = at::ArrayRef<at::Scalar>;
  OPENREG_FOREACH("_foreach_neg", functional, neg_op);
  OPENREG_FOREACH("_foreach_neg_", in_place, neg_op);
  OPENREG_FOREACH("_foreach_exp", functional, exp_op);
  OPENREG_FOREACH("_foreach_exp_", in_place, exp_op);
  OPENREG_FOREACH("_foreach_log", functional, log_op);
  OPENREG_FOREACH("_foreach_log_", in_place, log_op);
  OPENREG_FOREACH("_foreach_sqrt", functional, sqrt_op);
  OPENREG_FOREACH("_foreach_sqrt_", in_place, sqrt_op);
  OPENREG_FOREACH("_foreach_sin", functional, sin_op);
  OPENREG_FOREACH("_foreach_sin_", in_place, sin_op);
  OPENREG_FOREACH("_foreach_cos", functional, cos_op);
  OPENREG_FOREACH("_foreach_cos_", in_place, cos_op);
  OPENREG_FOREACH("_foreach_tanh", functional, tanh_op);
  OPENREG_FOREACH("_foreach_tanh_", in_place, tanh_op);
  OPENREG_FOREACH("_foreach_sigmoid", functional, sigmoid_op);
  OPENREG_FOREACH("_foreach_sigmoid_", in_place, sigmoid_op);

  OPENREG_FOREACH("_foreach_add.List", functional, add_op, List, Scalar);
  OPENREG_FOREACH("_foreach_add_.List", in_place, add_op, List, Scalar);
  OPENREG_FOREACH("_foreach_sub.List", functional, sub_op, List, Scalar);
  OPENREG_FOREACH("_foreach_sub_.List", in_place, sub_op, List, Scalar);
  OPENREG_FOREACH("_foreach_mul.List", functional, mul_op, List);
  OPENREG_FOREACH("_foreach_mul_.List", in_place, mul_op, List);
  OPENREG_FOREACH("_foreach_div.List", functional, div_op, List);
  OPENREG_FOREACH("_foreach_div_.List", in_place, div_op, List);
  OPENREG_FOREACH("_foreach_lerp.List", functional, lerp_tensor_op, List, List);
  OPENREG_FOREACH("_foreach_lerp_.List", in_place, lerp_tensor_op, List, List);
  OPENREG_FOREACH("_foreach_lerp.Scalar", functional, lerp_scalar_op, List, Scalar);
  OPENREG_FOREACH("_foreach_lerp_.Scalar", in_place, lerp_scalar_op, List, Scalar);
  OPENREG_FOREACH("_foreach_lerp.ScalarList", functional, lerp_scalar_op, List, Scalars);
  OPENREG_FOREACH("_foreach_lerp_.ScalarList", in_place, lerp_scalar_op, List, Scalars);
  OPENREG_FOREACH("_foreach_addcmul.Scalar", functional, addcmul_op, List, List, Scalar);
  OPENREG_FOREACH("_foreach_addcmul_.Scalar", in_place, addcmul_op, List, List, Scalar);
  OPENREG_FOREACH("_foreach_addcmul.ScalarList", functional, addcmul_op, List, List, Scalars);
  OPENREG_FOREACH("_foreach_addcmul_.ScalarList", in_place, addcmul_op, List, List, Scalars);
  OPENREG_FOREACH("_foreach_addcdiv.Scalar", functional, addcdiv_op, List, List, Scalar);
  OPENREG_FOREACH("_foreach_addcdiv_.Scalar", in_place, addcdiv_op, List, List, Scalar);
  OPENREG_FOREACH("_foreach_addcdiv.ScalarList", functional, addcdiv_op, List, List, Scalars);
  OPENREG_FOREACH("_foreach_addcdiv_.ScalarList", in_place, addcdiv_op, List, List, Scalars);

  OPENREG_FOREACH("_foreach_add.Scalar", scalar, add_op);
  OPENREG_FOREACH("_foreach_add_.Scalar", scalar_, add_op);
  OPENREG_FOREACH("_foreach_sub.Scalar", scalar, sub_op);
  OPENREG_FOREACH("_foreach_sub_.Scalar", scalar_, sub_op);
  OPENREG_FOREACH("_foreach_mul.Scalar", scalar, mul_op);
  OPENREG_FOREACH("_foreach_mul_.Scalar", scalar_, mul_op);
  OPENREG_FOREACH("_foreach_div.Scalar", scalar, div_op);
  OPENREG_FOREACH("_foreach_div_.Scalar", scalar_, div_op);
  OPENREG_FOREACH("_foreach_add.ScalarList", scalar_list, add_op);
  OPENREG_FOREACH("_foreach_add_.ScalarList", scalar_list_, add_op);
  OPENREG_FOREACH("_foreach_sub.ScalarList", scalar_list, sub_op);
  OPENREG_FOREACH("_foreach_sub_.ScalarList", scalar_list_, sub_op);
  OPENREG_FOREACH("_foreach_mul.ScalarList", scalar_list, mul_op);
  OPENREG_FOREACH("_foreach_mul_.ScalarList", scalar_list_, mul_op);
  OPENREG_FOREACH("_foreach_div.ScalarList", scalar_list, div_op);
  OPENREG_FOREACH("_foreach_div_.ScalarList", scalar_list_, div_op);
}
#undef OPENREG_FOREACH

}  // namespace at::openreg
