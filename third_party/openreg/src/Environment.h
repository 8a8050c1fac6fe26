// Runtime configuration, parsed once from the OPENREG_* environment.
#pragma once

#include <atomic>
#include <cstddef>

namespace openreg::runtime {

inline constexpr int kMaxDevices = 16;

struct Config {
  int deviceCount;
  size_t deviceMemory;  // per device, a multiple of pageSize
  bool memoryProtection;
  size_t pageSize;

  // Callers make sure bytes <= SIZE_MAX - pageSize.
  size_t roundUpToPage(size_t bytes) const {
    return (bytes + pageSize - 1) / pageSize * pageSize;
  }
};

// The configuration while the runtime is usable: set once the environment
// parsed as valid, cleared in a child forked after that. Null otherwise.
extern std::atomic<const Config*> usableConfig;

// Parses the environment on the first call from any thread; null, recording
// the reason as this thread's last error, if it is invalid or this process
// is a child forked after the runtime started.
const Config* loadRuntimeConfig();

// The configuration, parsed on the first call from any thread. If the
// environment is invalid, records the reason as this thread's last error and
// returns null; every API entry point then fails with
// orErrorInitializationError. Inline: every entry point starts here, so once
// the runtime is usable this is one load.
inline const Config* runtimeConfig() {
  // Acquire: pairs with the release that published the parsed configuration.
  if (const Config* config = usableConfig.load(std::memory_order_acquire))
    return config;
  return loadRuntimeConfig();
}

}  // namespace openreg::runtime
