// torch.accelerator.Graph for openreg: capture a sequence of operations once,
// replay it many times.
//
// As with CUDA graphs, what is captured is the work issued to the capturing
// stream, from any thread: here, every outermost operator call that touches
// openreg memory while the calling thread's current stream (on that device) is
// the capture stream. That includes backward, since the autograd engine runs a
// node's work on the stream its forward ran on. Because openreg operators run
// on the calling thread, capture also executes them (CUDA's capture does not),
// which does not change what a replay computes.
//
// Replay calls each captured operator again with the same arguments (the same
// tensors, so inputs refreshed in place are seen) and writes each fresh result
// into the tensor that capture returned, so the graph's outputs update in
// place, as CUDA graph outputs do. The graph keeps its tensors alive until
// reset(), which plays the part of a private memory pool.
#include <atomic>
#include <fstream>
#include <mutex>
#include <vector>

#include <ATen/core/GraphImplInterface.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>

#include "aten/IValueTensors.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegStream.h"

namespace c10::openreg {
namespace {

struct CapturedCall {
  c10::OperatorHandle op;
  std::vector<c10::IValue> inputs;
  std::vector<c10::IValue> outputs;
};

class OpenRegGraph;

// Graphs currently capturing. Read by the observer on every operator call
// while any capture is active; captures are rare, so one mutex serves.
std::mutex g_capturing_mutex;
std::vector<OpenRegGraph*> g_capturing;
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
    const std::vector<c10::IValue>& inputs,
    const std::vector<c10::IValue>& outputs) {
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

class OpenRegGraph final : public at::GraphImplInterface {
 public:
  explicit OpenRegGraph(const at::GraphImplArgs& /*args*/) {}

  ~OpenRegGraph() override {
    if (capturing_) {
      stop_capturing();
    }
  }

  void capture_begin(c10::MempoolId_t pool, at::GraphCaptureMode /*mode*/) override {
    TORCH_CHECK(!capturing_, "This openreg graph is already capturing");
    TORCH_CHECK(calls_.empty(), "This openreg graph already holds a capture; call reset() first");
    const OpenRegStream stream = getCurrentOpenRegStream();
    TORCH_CHECK(
        stream.id() != 0,
        "openreg graphs must be captured on a non-default stream, e.g. "
        "`with torch.openreg.stream(torch.openreg.Stream()), graph:`");
    stream.synchronize();
    stream_ = stream.unwrap();
    pool_ = pool.first != 0 || pool.second != 0 ? pool : c10::MempoolId_t{0, next_pool_id()};
    capturing_ = true;
    std::lock_guard<std::mutex> lock(g_capturing_mutex);
    g_capturing.push_back(this);
    if (g_capture_count.fetch_add(1) == 0) {
      g_observer = at::addGlobalCallback(
          at::RecordFunctionCallback(&on_start, &on_end)
              .needsInputs(true)
              .needsOutputs(true)
              .scopes({at::RecordScope::FUNCTION}));
    }
  }

  void capture_end() override {
    TORCH_CHECK(capturing_, "capture_end() without capture_begin() on this openreg graph");
    OpenRegStream(stream_).synchronize();
    stop_capturing();
  }

  void instantiate() override {
    TORCH_CHECK(!capturing_, "Cannot instantiate an openreg graph while it is capturing");
  }

  void replay() override {
    TORCH_CHECK(!capturing_, "Cannot replay an openreg graph while it is capturing");
    // Like a CUDA graph launch, replay is work on the capture stream.
    const OpenRegStream stream(stream_);
    c10::DeviceGuard device_guard(stream_.device());
    const OpenRegStream previous = getCurrentOpenRegStream(stream.device_index());
    setCurrentOpenRegStream(stream);
    // Autograd recorded its own work during capture; replay only recomputes.
    c10::AutoGradMode no_grad(false);
    try {
      for (const CapturedCall& call : calls_) {
        std::vector<c10::IValue> stack = call.inputs;
        call.op.callBoxed(stack);
        for (size_t i = 0; i < stack.size() && i < call.outputs.size(); ++i) {
          write_into(call.outputs[i], stack[i]);
        }
      }
    } catch (...) {
      setCurrentOpenRegStream(previous);
      throw;
    }
    setCurrentOpenRegStream(previous);
  }

  void reset() override {
    TORCH_CHECK(!capturing_, "Cannot reset an openreg graph while it is capturing");
    calls_.clear();
  }

  c10::MempoolId_t pool() const override {
    return pool_;
  }

  void enable_debug_mode() override {
    debug_ = true;
  }

  void debug_dump(const std::string& path) override {
    TORCH_CHECK(debug_, "openreg graph: call enable_debug_mode() before capture to use debug_dump()");
    std::ofstream out(path);
    TORCH_CHECK(out, "openreg graph: cannot write ", path);
    out << "digraph openreg_graph {\n";
    for (size_t i = 0; i < calls_.size(); ++i) {
      out << "  n" << i << " [label=\"" << calls_[i].op.operator_name() << "\"];\n";
      if (i > 0) {
        out << "  n" << i - 1 << " -> n" << i << ";\n";
      }
    }
    out << "}\n";
  }

 private:
  static uint64_t next_pool_id() {
    static std::atomic<uint64_t> next{1};
    return next++;
  }

  void stop_capturing() {
    capturing_ = false;
    std::lock_guard<std::mutex> lock(g_capturing_mutex);
    g_capturing.erase(std::find(g_capturing.begin(), g_capturing.end(), this));
    if (g_capture_count.fetch_sub(1) == 1) {
      at::removeCallback(g_observer);
    }
  }

  // Writes a replayed result into the tensor capture returned, unless the
  // operator returned that very tensor (in-place and out= calls).
  static void write_into(const c10::IValue& captured, const c10::IValue& fresh) {
    if (captured.isTensor() && fresh.isTensor()) {
      const at::Tensor& target = captured.toTensor();
      const at::Tensor& source = fresh.toTensor();
      if (target.defined() && source.defined() &&
          target.unsafeGetTensorImpl() != source.unsafeGetTensorImpl()) {
        target.detach().copy_(source);
      }
    } else if (captured.isTensorList() && fresh.isTensorList()) {
      const auto targets = captured.toTensorList();
      const auto sources = fresh.toTensorList();
      for (size_t i = 0; i < targets.size() && i < sources.size(); ++i) {
        write_into(targets.get(i), sources.get(i));
      }
    }
  }

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
    if (!device) {
      return;  // host-only work is not captured, as with CUDA
    }
    const c10::StreamId stream = getCurrentOpenRegStream(*device).id();
    std::lock_guard<std::mutex> lock(g_capturing_mutex);
    for (OpenRegGraph* graph : g_capturing) {
      if (graph->stream_.device_index() == *device && graph->stream_.id() == stream) {
        auto op = c10::Dispatcher::singleton().findOp(*name);
        TORCH_INTERNAL_ASSERT(op.has_value(), "openreg graph: unknown operator ", *name);
        std::lock_guard<std::mutex> calls_lock(graph->calls_mutex_);
        graph->calls_.push_back(CapturedCall{*op, context->inputs, fn.outputs()});
      }
    }
  }

  bool capturing_ = false;
  bool debug_ = false;
  c10::Stream stream_{c10::Stream::DEFAULT, make_device(0)};
  c10::MempoolId_t pool_{0, 0};
  std::mutex calls_mutex_;
  std::vector<CapturedCall> calls_;
};

} // namespace
} // namespace c10::openreg

namespace at {
// The registry key is the device type's name as PyTorch prints it in upper
// case, which for PrivateUse1 is the backend's registered name.
REGISTER_GRAPH_IMPL(OPENREG, c10::openreg::OpenRegGraph);
} // namespace at
