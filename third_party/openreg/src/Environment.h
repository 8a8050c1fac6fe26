// Runtime configuration, parsed once from the OPENREG_* environment.
#pragma once

#include <cstddef>

namespace openreg::runtime {

inline constexpr int kMaxDevices = 16;

struct Config {
  int deviceCount;
  size_t deviceMemory;  // per device, a multiple of pageSize
  bool memoryProtection;
  size_t pageSize;

  // Callers make sure bytes <= SIZE_MAX - pageSize.
  size_t roundUpToPage(size_t bytes) const { return (bytes + pageSize - 1) / pageSize * pageSize; }
};

// The configuration, parsed on the first call from any thread. If the
// environment is invalid, records the reason as this thread's last error and
// returns null; every API entry point then fails with
// orErrorInitializationError.
const Config* runtimeConfig();

}  // namespace openreg::runtime
