// The Kineto activity profiler of openreg: device activity in torch.profiler.
//
// torch.profiler.profile(activities=[..., ProfilerActivity.PrivateUse1])
// asks Kineto for the device activity types (kernels, memcpy, device-side
// annotations). Kineto configures every registered child profiler with them;
// this one opens a session that, between start() and stop(), has the runtime
// record each piece of work executed on an openreg stream (the orActivity* API
// of third_party/openreg). Kineto forwards the correlation id of every aten::
// operator entered while the session lives (pushCorrelationId /
// popCorrelationId, on the operator's thread); the session hands them to the
// runtime, which tags the work each thread launches with its innermost id. In
// processTrace, Kineto passes a lookup from correlation id to the operator's
// CPU activity: each device activity links to its operator through it, which
// is how key_averages() gets device time per operator, and the chrome trace
// shows one row per device (pid = device index) and stream (tid = stream).
#define USE_KINETO  // torch 2.13's wheels are built with Kineto; the header needs it
// GenericTraceActivity formats its metadata with fmt, whose compiled part
// libtorch does not export: compile it into this file instead.
#define FMT_HEADER_ONLY

#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <libkineto.h>
#include <output_base.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <openreg.h>

namespace c10::openreg {
namespace {

using libkineto::ActivityType;

// How each kind of runtime record shows in Kineto: the types torch maps to
// the PrivateUse1 device (a host function is work a stream runs, like a kernel).
ActivityType kineto_type(orActivityKind kind) {
  switch (kind) {
    case orActivityKindMemcpy:
      return ActivityType::GPU_MEMCPY;
    case orActivityKindRange:
      return ActivityType::GPU_USER_ANNOTATION;
    case orActivityKindKernel:
    case orActivityKindHostFunc:
      break;
  }
  return ActivityType::CONCURRENT_KERNEL;
}

const std::set<ActivityType>& device_activity_types() {
  static const std::set<ActivityType> types{
      ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY, ActivityType::GPU_USER_ANNOTATION};
  return types;
}

// One runtime record, copied out of the flush callback (its name is only
// valid there).
struct DeviceRecord {
  ActivityType type;
  std::string name;
  int device;
  int64_t stream;  // the runtime handle's value: 0 for a device's default stream
  uint64_t correlation_id;
  int64_t start;
  int64_t end;
  orMemcpyKind memcpy_kind;
  size_t bytes;
};

// Waits for the work queued on every device, so that it is recorded before
// recording stops. Errors (an unusable runtime) leave nothing to wait for.
void synchronize_all_devices() noexcept {
  int count = 0;
  int current = 0;
  if (orGetDeviceCount(&count) != orSuccess || orGetDevice(&current) != orSuccess) {
    return;
  }
  for (int device = 0; device < count; ++device) {
    int initialized = 0;
    if (orDeviceIsInitialized(device, &initialized) == orSuccess && initialized && orSetDevice(device) == orSuccess) {
      (void)orDeviceSynchronize();
    }
  }
  (void)orSetDevice(current);
}

class OpenRegProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  explicit OpenRegProfilerSession(std::set<ActivityType> types) : types_(std::move(types)) {}

  ~OpenRegProfilerSession() override {
    if (recording_) {
      (void)orActivityDisable();
    }
  }

  void start() override {
    // Records completed after an earlier session stopped belong to no trace.
    (void)orActivityFlush([](const orActivity*, void*) {}, nullptr);
    recording_ = orActivityEnable() == orSuccess;
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    if (!recording_) {
      return;
    }
    synchronize_all_devices();
    (void)orActivityDisable();
    recording_ = false;
    (void)orActivityFlush(
        [](const orActivity* activity, void* self) { static_cast<OpenRegProfilerSession*>(self)->keep(*activity); },
        this);
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  // Correlation ids of the aten:: operators, pushed on the operator's thread.
  void pushCorrelationId(uint64_t id) override {
    (void)orActivityPushExternalCorrelationId(id);
  }
  void popCorrelationId() override {
    (void)orActivityPopExternalCorrelationId(nullptr);
  }

  std::vector<std::string> errors() override {
    return {};
  }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0, 0);
  }

  void processTrace(
      libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback get_linked_activity, int64_t start_time,
      int64_t end_time) override {
    trace_ = std::make_unique<libkineto::CpuTraceBuffer>();
    trace_->span = libkineto::TraceSpan(start_time, end_time, "openreg");
    trace_->gpuOpCount = 0;
    for (const DeviceRecord& record : records_) {
      // Kineto keeps only what lies inside the profiled window.
      if (end_time > start_time && (record.start < start_time || record.end > end_time)) {
        continue;
      }
      trace_->emplace_activity(trace_->span, record.type, record.name);
      libkineto::GenericTraceActivity& activity = libkineto::CpuTraceBuffer::toRef(trace_->activities.back());
      activity.startTime = record.start;
      activity.endTime = record.end;
      activity.device = record.device;
      activity.resource = static_cast<int32_t>(record.stream);
      activity.id = static_cast<int32_t>(record.correlation_id);
      if (record.correlation_id != 0) {
        activity.linked = get_linked_activity(static_cast<int32_t>(record.correlation_id));
      }
      activity.addMetadata("device", record.device);
      activity.addMetadata("stream", record.stream);
      if (record.type == ActivityType::GPU_MEMCPY) {
        activity.addMetadata("bytes", record.bytes);
      }
      seen_streams_.emplace(record.device, record.stream);
      ++trace_->gpuOpCount;
      logger.handleActivity(activity);
    }
  }

  // The device rows: labelled after the lowest device that has activity (Kineto
  // takes one per session); every (device, stream) row gets a name below.
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    if (seen_streams_.empty()) {
      return nullptr;
    }
    const int device = seen_streams_.begin()->first;
    return std::make_unique<libkineto::DeviceInfo>(
        libkineto::DeviceInfo{device, kDeviceSortOffset + device, "openreg", "openreg " + std::to_string(device)});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> rows;
    for (const auto& [device, stream] : seen_streams_) {
      rows.push_back(
          libkineto::ResourceInfo{
              stream, stream, device, "openreg " + std::to_string(device) + " stream " + std::to_string(stream)});
    }
    return rows;
  }

  // Owns the activities handed to the logger; Kineto keeps it with the trace.
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::move(trace_);
  }

 private:
  // Device rows sort after the host's (whose pid is a process id).
  static constexpr int64_t kDeviceSortOffset = 1 << 24;

  void keep(const orActivity& activity) {
    const ActivityType type = kineto_type(activity.kind);
    if (types_.count(type) == 0) {
      return;
    }
    records_.push_back(
        DeviceRecord{
            type, activity.name, activity.device, static_cast<int64_t>(reinterpret_cast<uintptr_t>(activity.stream)),
            activity.correlationId, activity.start, activity.end, activity.memcpyKind, activity.bytes});
  }

  const std::set<ActivityType> types_;
  bool recording_ = false;
  std::vector<DeviceRecord> records_;
  std::set<std::pair<int, int64_t>> seen_streams_;
  std::unique_ptr<libkineto::CpuTraceBuffer> trace_;
};

class OpenRegActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override {
    return name_;
  }

  const std::set<ActivityType>& availableActivities() const override {
    return device_activity_types();
  }

  // A session only when device activity is asked for: a CPU-only profile
  // leaves the runtime's recording off.
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& activity_types, const libkineto::Config& /*config*/) override {
    std::set<ActivityType> wanted;
    std::set_intersection(
        activity_types.begin(), activity_types.end(), device_activity_types().begin(), device_activity_types().end(),
        std::inserter(wanted, wanted.begin()));
    if (wanted.empty()) {
      return nullptr;
    }
    return std::make_unique<OpenRegProfilerSession>(std::move(wanted));
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t /*ts_ms*/, int64_t /*duration_ms*/, const std::set<ActivityType>& activity_types,
      const libkineto::Config& config) override {
    return configure(activity_types, config);
  }

 private:
  const std::string name_ = "openreg";
};

}  // namespace

REGISTER_PRIVATEUSE1_PROFILER(OpenRegActivityProfiler);

}  // namespace c10::openreg
