#pragma once

#include <atomic>
#include <cstdint>

#include <c10/macros/Macros.h>

// The caching allocator's lock: every allocation and free takes two (the
// live-block shard, then the device cache), almost always uncontended. An
// uncontended std::mutex costs a call into glibc each way (about 60
// instructions a pair, a quarter of a cached allocate/free); this one is an
// inline compare-exchange to lock and an exchange to unlock. A contended lock
// sleeps in the kernel (atomic wait, a futex on Linux) instead of spinning,
// since the holder may be returning a segment to the runtime or waiting for a
// stream's events. Never held across a call into Python.
namespace c10::openreg {

class AllocatorMutex {
 public:
  void lock() {
    uint32_t expected = kUnlocked;
    if (C10_LIKELY(state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire))) {
      return;
    }
    // Marked contended, so that the holder's unlock wakes a sleeper.
    while (state_.exchange(kContended, std::memory_order_acquire) != kUnlocked) {
      state_.wait(kContended, std::memory_order_relaxed);
    }
  }

  void unlock() {
    if (C10_UNLIKELY(state_.exchange(kUnlocked, std::memory_order_release) == kContended)) {
      state_.notify_one();
    }
  }

 private:
  static constexpr uint32_t kUnlocked = 0;
  static constexpr uint32_t kLocked = 1;     // held, nobody waiting
  static constexpr uint32_t kContended = 2;  // held, someone may be waiting
  std::atomic<uint32_t> state_{kUnlocked};
};

} // namespace c10::openreg
