#include "graph/StreamCapture.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <unordered_set>

#include <ATen/Context.h>
#include <ATen/record_function.h>

#include "aten/IValueTensors.h"
#include "runtime/OpenRegStream.h"

namespace c10::openreg {
namespace {

// Captures alive. Read by the observer on every operator call while any
// capture is active; captures are rare, so one mutex serves.
std::mutex g_captures_mutex;
std::vector<StreamCapture*> g_captures;
std::atomic<int> g_capture_count{0};
at::CallbackHandle g_observer = 0;

// Operator calls in progress on this thread. Other observed scopes (the
// autograd engine's per-node "evaluate_function" records, user annotations)
// do not count: the operators inside them are still outermost.
thread_local int t_depth = 0;

// Per-call state between the observer's start and end callbacks. Inputs are
// copied at the start: RecordFunction's view of them is gone by the end.
struct CallContext final : public at::ObserverContext {
  bool is_operator = false;
  bool outermost = false;
  std::vector<c10::IValue> inputs;
};

// The openreg device the call touched, if any.
std::optional<c10::DeviceIndex> openreg_device_of(
    const std::vector<c10::IValue>& inputs, const std::vector<c10::IValue>& outputs) {
  std::optional<c10::DeviceIndex> device;
  auto see = [&](const at::Tensor& t) {
    if (!device && t.defined() && t.is_privateuseone()) {
      device = t.device().index();
    }
  };
  for (const auto* values : {&inputs, &outputs}) {
    for (const c10::IValue& value : *values) {
      at::openreg::for_each_tensor(value, see);
    }
  }
  return device;
}

// An operator that only allocates its result: a CUDA graph records kernels,
// and an allocation is none (its memory, from the graph's pool, stays the
// result's for every replay). Unless deterministic mode fills it, which is a
// kernel.
bool only_allocates(const c10::OperatorName& name) {
  static const std::unordered_set<std::string> allocating{
      "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty", "aten::new_empty_strided"};
  const at::Context& context = at::globalContext();
  return allocating.count(name.name) != 0 &&
      !(context.deterministicAlgorithms() && context.deterministicFillUninitializedMemory());
}

}  // namespace

class CaptureObserver {
 public:
  static std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
    auto context = std::make_unique<CallContext>();
    context->is_operator = fn.operator_name().has_value();
    if (!context->is_operator) {
      return context;
    }
    context->outermost = t_depth++ == 0;
    if (context->outermost) {
      context->inputs.assign(fn.inputs().begin(), fn.inputs().end());
    }
    return context;
  }

  static void on_end(const at::RecordFunction& fn, at::ObserverContext* observer_context) {
    auto* context = static_cast<CallContext*>(observer_context);
    if (!context->is_operator) {
      return;
    }
    --t_depth;
    if (!context->outermost) {
      return;
    }
    const std::optional<c10::OperatorName> name = fn.operator_name();
    const std::optional<c10::DeviceIndex> device = openreg_device_of(context->inputs, fn.outputs());
    if (!device || only_allocates(*name)) {
      return;  // host-only work and allocations are not captured, as with CUDA
    }
    const c10::Stream stream = getCurrentOpenRegStream(*device).unwrap();
    std::lock_guard<std::mutex> lock(g_captures_mutex);
    for (StreamCapture* capture : g_captures) {
      if (capture->stream_ == stream) {
        auto op = c10::Dispatcher::singleton().findOp(*name);
        TORCH_INTERNAL_ASSERT(op.has_value(), "openreg graph: unknown operator ", *name);
        std::lock_guard<std::mutex> calls_lock(capture->calls_mutex_);
        capture->calls_.push_back(CapturedCall{*op, context->inputs, fn.outputs()});
      }
    }
  }
};

StreamCapture::StreamCapture(c10::Stream stream, CaptureErrorMode mode) : stream_(stream), registration_(stream, mode) {
  std::lock_guard<std::mutex> lock(g_captures_mutex);
  g_captures.push_back(this);
  if (g_capture_count.fetch_add(1) == 0) {
    g_observer = at::addGlobalCallback(
        at::RecordFunctionCallback(&CaptureObserver::on_start, &CaptureObserver::on_end)
            .needsInputs(true)
            .needsOutputs(true)
            .scopes({at::RecordScope::FUNCTION}));
  }
}

StreamCapture::~StreamCapture() {
  std::lock_guard<std::mutex> lock(g_captures_mutex);
  g_captures.erase(std::find(g_captures.begin(), g_captures.end(), this));
  if (g_capture_count.fetch_sub(1) == 1) {
    at::removeCallback(g_observer);
  }
}

std::vector<CapturedCall> StreamCapture::take_calls() {
  std::lock_guard<std::mutex> lock(calls_mutex_);
  return std::exchange(calls_, {});
}

}  // namespace c10::openreg
