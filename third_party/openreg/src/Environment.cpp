#include "Environment.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "Error.h"

namespace openreg::runtime {

namespace {

struct Loaded {
  Config config;
  std::string error;  // empty when the environment is valid
};

// Digits only: no sign, whitespace or base prefix, so "-1", " 2" and "0x10"
// are rejected rather than silently reinterpreted.
std::optional<uint64_t> parseUnsigned(std::string_view text) {
  if (text.empty())
    return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10)
      return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

std::optional<uint64_t> parseBytes(std::string_view text) {
  unsigned shift = 0;
  if (!text.empty()) {
    switch (text.back()) {
      case 'k':
      case 'K':
        shift = 10;
        break;
      case 'm':
      case 'M':
        shift = 20;
        break;
      case 'g':
      case 'G':
        shift = 30;
        break;
    }
    if (shift != 0)
      text.remove_suffix(1);
  }
  const std::optional<uint64_t> value = parseUnsigned(text);
  if (!value || *value > (UINT64_MAX >> shift))
    return std::nullopt;
  return *value << shift;
}

Loaded load() {
  Loaded loaded{Config{2, size_t{8} << 30, true, static_cast<size_t>(sysconf(_SC_PAGESIZE))}, {}};
  Config& config = loaded.config;

  if (const char* text = std::getenv("OPENREG_DEVICE_COUNT")) {
    const std::optional<uint64_t> count = parseUnsigned(text);
    if (!count || *count < 1 || *count > kMaxDevices) {
      loaded.error = "OPENREG_DEVICE_COUNT='" + std::string(text) + "' is invalid: expected an integer in 1.." +
          std::to_string(kMaxDevices);
      return loaded;
    }
    config.deviceCount = static_cast<int>(*count);
  }

  if (const char* text = std::getenv("OPENREG_DEVICE_MEMORY")) {
    const std::optional<uint64_t> bytes = parseBytes(text);
    // The upper bound keeps the page round-up below from overflowing.
    if (!bytes || *bytes < config.pageSize || *bytes > SIZE_MAX / 2) {
      loaded.error = "OPENREG_DEVICE_MEMORY='" + std::string(text) +
          "' is invalid: expected a byte count of at least " + std::to_string(config.pageSize) +
          " with an optional K, M or G suffix (binary units), e.g. 8G";
      return loaded;
    }
    config.deviceMemory = config.roundUpToPage(*bytes);
  }

  // Each device's arena maps its capacity twice (the user and the host view,
  // Arena.cpp), all as address space only. A capacity the process cannot
  // reserve is refused here, naming the variable, rather than reported as
  // free memory until some device's first allocation fails.
  size_t addressSpace = 0;
  const bool overflows = __builtin_mul_overflow(config.deviceMemory, size_t{2} * config.deviceCount, &addressSpace);
  std::string reason = overflows ? "more than the address space can hold" : "";
  if (!overflows) {
    void* probe = mmap(nullptr, addressSpace, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (probe == MAP_FAILED) {
      reason = std::string("mmap: ") + std::strerror(errno);
    } else {
      munmap(probe, addressSpace);
    }
  }
  if (!reason.empty()) {
    const char* text = std::getenv("OPENREG_DEVICE_MEMORY");
    loaded.error = "OPENREG_DEVICE_MEMORY" + (text ? "='" + std::string(text) + "'" : std::string(" (the default)")) +
        " is too large: " + std::to_string(config.deviceCount) + " devices need twice their capacity (" +
        std::to_string(config.deviceMemory) + " bytes each) of address space, which this process cannot reserve (" +
        reason + ")";
  }

  if (const char* text = std::getenv("OPENREG_MEMORY_PROTECTION")) {
    const std::string_view value = text;
    if (value != "0" && value != "1") {
      loaded.error = "OPENREG_MEMORY_PROTECTION='" + std::string(text) + "' is invalid: expected 0 (off) or 1 (on)";
      return loaded;
    }
    config.memoryProtection = value == "1";
  }
  return loaded;
}

}  // namespace

namespace {

// Set in a child forked after the runtime started. The child shares the
// parent's device memory (MAP_SHARED arenas) and has none of its stream
// worker threads, so, as with CUDA, it must not use the runtime at all.
std::atomic<bool> forkedAfterStart{false};

void markForkedChild() {
  forkedAfterStart.store(true, std::memory_order_relaxed);
  // Runs in the child before fork() returns there, so no call the child
  // makes takes the fast path.
  usableConfig.store(nullptr, std::memory_order_relaxed);
}

}  // namespace

std::atomic<const Config*> usableConfig{nullptr};

const Config* loadRuntimeConfig() {
  // A function-local static gives call_once semantics (runtimeConfig()'s
  // fast path spares its guard check).
  // Leaked on purpose: API calls made during static destruction (e.g. from an
  // extension module's teardown) must still find it.
  static const Loaded* const loaded = [] {
    pthread_atfork(nullptr, nullptr, &markForkedChild);
    return new Loaded(load());
  }();
  if (!loaded->error.empty()) {
    fail(orErrorInitializationError, "%s", loaded->error.c_str());
    return nullptr;
  }
  if (forkedAfterStart.load(std::memory_order_relaxed)) {
    fail(
        orErrorInitializationError,
        "openreg was started before this process was forked; a forked child cannot use it "
        "(its device memory and stream threads belong to the parent). Use the 'spawn' start method.");
    return nullptr;
  }
  usableConfig.store(&loaded->config, std::memory_order_release);
  return &loaded->config;
}

}  // namespace openreg::runtime
