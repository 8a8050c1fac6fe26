#include "sanitizer/SanitizerTrace.h"

#include <Python.h>

#include <mutex>

#include <c10/util/flat_hash_map.h>
#include <openreg.h>

#include "runtime/OpenRegException.h"

namespace c10::openreg::sanitizer {

void set_enabled(bool on) {
  OPENREG_CHECK(orSetCompletionChecks(on ? 1 : 0));
  g_enabled.store(on, std::memory_order_relaxed);
}

namespace {
thread_local bool t_runtime_freed = false;  // a segment returned to the runtime, not yet reported
}  // namespace

void note_runtime_free() noexcept {
  if (enabled()) {
    t_runtime_freed = true;
  }
}

void trace_noted_synchronization() noexcept {
  if (t_runtime_freed) {
    t_runtime_freed = false;
    trace([](const auto& t) { t.trace_gpu_device_synchronization(c10::kPrivateUse1); });
  }
}

uintptr_t stream_id(const c10::Stream& stream) {
  // Stream ids are small per device (a pool index and a priority), so the device index fits above them.
  return (static_cast<uintptr_t>(static_cast<uint8_t>(stream.device_index())) << 48) |
      (static_cast<uintptr_t>(stream.id()) & ((uintptr_t{1} << 48) - 1));
}

PythonExceptionSetAside::PythonExceptionSetAside() {
  if (!Py_IsInitialized()) {
    return;
  }
  gil_state_ = PyGILState_Ensure();
  PyErr_Fetch(
      reinterpret_cast<PyObject**>(&exception_[0]), reinterpret_cast<PyObject**>(&exception_[1]),
      reinterpret_cast<PyObject**>(&exception_[2]));
  active_ = true;
}

PythonExceptionSetAside::~PythonExceptionSetAside() {
  if (active_) {
    PyErr_Restore(
        static_cast<PyObject*>(exception_[0]), static_cast<PyObject*>(exception_[1]),
        static_cast<PyObject*>(exception_[2]));
    PyGILState_Release(static_cast<PyGILState_STATE>(gil_state_));
  }
}

bool answer_not_ready(uintptr_t key, bool pending) {
  static std::mutex mutex;
  static ska::flat_hash_set<uintptr_t> answered;  // keys already answered "not ready" for their pending work
  const std::lock_guard<std::mutex> lock(mutex);
  if (!pending) {
    answered.erase(key);
    return false;
  }
  return answered.erase(key) == 0 && answered.insert(key).second;
}

}  // namespace c10::openreg::sanitizer
