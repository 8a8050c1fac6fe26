#include "ReadSection.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <thread>

namespace openreg::runtime {

// One per thread that has entered a section, kept for the process's life and
// reused by later threads once its owner exits.
struct ReaderSlot {
  // 0 outside a section; inside, the grace period count when it began.
  std::atomic<uint64_t> since{0};
  std::atomic<bool> owned{true};
  ReaderSlot* next = nullptr;  // immutable once the slot is listed
};

namespace {

// Only ever grows: a writer scans the list without a lock.
std::atomic<ReaderSlot*> slots{nullptr};
// Starts at 1 so that a slot's 0 means "outside a section".
std::atomic<uint64_t> gracePeriods{1};

long membarrier(int command) {
  return syscall(__NR_membarrier, command, 0, 0);
}

// Whether writers fence every reader for it (true once the process is
// registered for expedited membarriers) or readers fence themselves.
std::atomic<bool> writersFenceReaders{false};
// Writers hold it shared from their choice of fence to the end of their scan;
// the switch to writer fences takes it exclusively, so a reader that sees the
// switch made (and skips its fence) never meets a writer that chose the
// reader-fenced way.
std::shared_mutex fenceSwitch;

void* registerForMembarrier(void*) {
  if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0) {
    const std::unique_lock<std::shared_mutex> exclusive(fenceSwitch);
    writersFenceReaders.store(true, std::memory_order_release);
  }
  return nullptr;
}

// Registration waits for a kernel grace period once the process has a second
// thread (4.5-20 ms measured; numpy's BLAS usually starts one under torch),
// so it runs on a thread of its own and sections fence themselves meanwhile.
// Started by the first section or writer, not at load: a process that never
// reaches device memory starts no thread. Where the kernel refuses, or the
// thread cannot start, readers keep fencing themselves.
void startRegistration() {
  static std::once_flag started;
  std::call_once(started, [] {
    pthread_t thread;
    if (pthread_create(&thread, nullptr, &registerForMembarrier, nullptr) == 0) {
      pthread_setname_np(thread, "or-membarrier");
      pthread_detach(thread);
    }
  });
}

// Initial-exec, as the current device (Device.cpp says why and what it costs).
[[gnu::tls_model("initial-exec")]] thread_local ReaderSlot* threadSlot = nullptr;

// Gives the slot back when its thread exits (a section never spans that).
struct SlotReturn {
  ~SlotReturn() {
    if (threadSlot != nullptr)
      threadSlot->owned.store(false, std::memory_order_release);
    threadSlot = nullptr;  // a later thread-exit destructor's section claims another
  }
};
thread_local SlotReturn slotReturn;

ReaderSlot* claimSlot() {
  ReaderSlot* slot = nullptr;
  for (ReaderSlot* s = slots.load(std::memory_order_acquire); s != nullptr; s = s->next) {
    bool owned = false;
    if (s->owned.compare_exchange_strong(owned, true, std::memory_order_acquire)) {
      slot = s;
      break;
    }
  }
  if (slot == nullptr) {
    slot = new ReaderSlot;  // leaked on purpose: writers may be scanning it
    slot->next = slots.load(std::memory_order_relaxed);
    while (!slots.compare_exchange_weak(slot->next, slot, std::memory_order_release)) {
    }
  }
  threadSlot = slot;
  (void)&slotReturn;  // constructs it, registering the return at thread exit
  return slot;
}

}  // namespace

ReadSection::ReadSection() {
  ReaderSlot* slot = threadSlot != nullptr ? threadSlot : claimSlot();
  if (slot->since.load(std::memory_order_relaxed) != 0) {
    slot_ = nullptr;
    return;
  }
  slot_ = slot;
  // Acquire: a section that sees a grace period's number also sees what its
  // writer published before starting it.
  slot->since.store(gracePeriods.load(std::memory_order_acquire), std::memory_order_relaxed);
  // Acquire: a section that skips its fence comes after every writer that
  // relied on it (fenceSwitch).
  if (writersFenceReaders.load(std::memory_order_acquire)) {
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the compiler must not reorder
  } else {
    startRegistration();
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
}

ReadSection::~ReadSection() {
  // Release: the writer that sees the slot cleared also sees the section's reads done.
  if (slot_ != nullptr)
    slot_->since.store(0, std::memory_order_release);
}

void waitForReaders() {
  const std::shared_lock<std::shared_mutex> fenceChoice(fenceSwitch);
  // Sections that begin from here on carry at least `current`, and see what
  // the caller published before this call.
  const uint64_t current = gracePeriods.fetch_add(1, std::memory_order_acq_rel) + 1;
  // After the fence, a reader's slot store is visible here, or its data
  // loads come after the fence and see the new data.
  if (writersFenceReaders.load(std::memory_order_relaxed)) {
    membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
  } else {
    startRegistration();
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  for (ReaderSlot* slot = slots.load(std::memory_order_acquire); slot != nullptr; slot = slot->next) {
    for (;;) {
      const uint64_t since = slot->since.load(std::memory_order_acquire);
      if (since == 0 || since >= current)
        break;
      std::this_thread::yield();
    }
  }
}

}  // namespace openreg::runtime
