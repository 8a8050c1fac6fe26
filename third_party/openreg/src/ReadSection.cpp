#include "ReadSection.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
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

// Whether writers can fence every reader for it (decided once, before any
// section is entered: the first ReadSection asks).
bool writersFenceReaders() {
  static const bool registered = membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  return registered;
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
  static const bool fencedByWriters = writersFenceReaders();
  ReaderSlot* slot = threadSlot != nullptr ? threadSlot : claimSlot();
  if (slot->since.load(std::memory_order_relaxed) != 0) {
    slot_ = nullptr;
    return;
  }
  slot_ = slot;
  // Acquire: a section that sees a grace period's number also sees what its
  // writer published before starting it.
  slot->since.store(gracePeriods.load(std::memory_order_acquire), std::memory_order_relaxed);
  if (fencedByWriters) {
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the compiler must not reorder
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
}

ReadSection::~ReadSection() {
  // Release: the writer that sees the slot cleared also sees the section's reads done.
  if (slot_ != nullptr)
    slot_->since.store(0, std::memory_order_release);
}

void waitForReaders() {
  // Sections that begin from here on carry at least `current`, and see what
  // the caller published before this call.
  const uint64_t current = gracePeriods.fetch_add(1, std::memory_order_acq_rel) + 1;
  // After the fence, a reader's slot store is visible here, or its data
  // loads come after the fence and see the new data.
  if (writersFenceReaders()) {
    membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
  } else {
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
