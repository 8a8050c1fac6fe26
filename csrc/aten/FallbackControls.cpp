#include "aten/FallbackControls.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>

#include <c10/util/Exception.h>

#include "runtime/Options.h"

namespace at::openreg {

struct FallbackCounter {
  std::atomic<uint64_t> calls{0};
  std::atomic<bool> warned{false};
};

namespace {

std::mutex g_counters_mutex;
std::unordered_map<std::string, std::unique_ptr<FallbackCounter>> g_counters;

}  // namespace

FallbackCounter* counter_for(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_counters_mutex);
  auto& counter = g_counters[name];
  if (!counter) {
    counter = std::make_unique<FallbackCounter>();
  }
  return counter.get();
}

void check_fallback_enabled(const OperatorPolicy& policy) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      c10::openreg::fallback_options().enabled, "The operator '", policy.name,
      "' has no openreg kernel, and OPENREG_FALLBACK=0 forbids running it on the CPU fallback.");
}

void count_fallback_call(const OperatorPolicy& policy) {
  policy.counter->calls.fetch_add(1, std::memory_order_relaxed);
  if (c10::openreg::fallback_options().warn && !policy.counter->warned.exchange(true)) {
    TORCH_WARN("The operator '", policy.name, "' has no openreg kernel and runs on the CPU fallback.");
  }
}

std::vector<std::pair<std::string, uint64_t>> fallback_stats() {
  std::vector<std::pair<std::string, uint64_t>> stats;
  std::lock_guard<std::mutex> lock(g_counters_mutex);
  for (const auto& [name, counter] : g_counters) {
    if (const uint64_t calls = counter->calls.load(std::memory_order_relaxed)) {
      stats.emplace_back(name, calls);
    }
  }
  std::sort(stats.begin(), stats.end());
  return stats;
}

void reset_fallback_stats() {
  std::lock_guard<std::mutex> lock(g_counters_mutex);
  for (auto& [name, counter] : g_counters) {
    counter->calls.store(0, std::memory_order_relaxed);
  }
}

}  // namespace at::openreg
