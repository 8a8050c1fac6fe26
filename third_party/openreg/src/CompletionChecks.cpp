#include "CompletionChecks.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "CopyBytes.h"
#include "Environment.h"
#include "Error.h"
#include "Stream.h"

namespace openreg::runtime {

std::atomic<uint64_t> checkWord{0};

namespace {

// A leaf lock: nothing else is taken under it.
std::mutex& sourcesMutex() {
  static std::mutex* const mutex = new std::mutex;  // leaked: stream workers may outlive statics
  return *mutex;
}

// The queued checked copies with a host source, guarded by sourcesMutex.
std::vector<CheckedCopy*>& guardedSources() {
  static auto* const all = new std::vector<CheckedCopy*>;  // leaked, as the mutex
  return *all;
}

// A range of host addresses, [begin, end).
struct Span {
  uintptr_t begin, end;
  bool empty() const {
    return begin >= end;
  }
};

Span span(const void* address, size_t count) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(address);
  return {begin, begin + count};
}

Span common(Span a, Span b) {
  return {std::max(a.begin, b.begin), std::min(a.end, b.end)};
}

}  // namespace

std::shared_ptr<CheckedCopy> CheckedCopy::issue(
    void* target, const void* origin, size_t count, orMemcpyKind kind, const char* context, Stream& stream) {
  std::shared_ptr<CheckedCopy> copy(new CheckedCopy(
      target, origin, count, kind == orMemcpyDeviceToHost || kind == orMemcpyHostToHost, context, stream));
  std::unique_ptr<unsigned char[]> snapshot;
  if (kind == orMemcpyHostToDevice || kind == orMemcpyHostToHost) {
    snapshot.reset(new (std::nothrow) unsigned char[count]);
    if (snapshot == nullptr) {
      fail(
          orErrorMemoryAllocation,
          "%s: cannot allocate the %zu-byte snapshot of the source that completion checks keep", context, count);
      return nullptr;
    }
    std::memcpy(snapshot.get(), origin, count);
  }
  bool poison = copy->hostDestination_;
  {
    std::lock_guard lock(sourcesMutex());
    if (snapshot != nullptr) {
      copy->snapshot_ = std::move(snapshot);
      guardedSources().push_back(copy.get());
    }
    // A queued copy (this one, for an overlapping host-to-host copy) has yet
    // to read these bytes, as they are now.
    for (const CheckedCopy* queued : guardedSources())
      poison = poison && common(span(target, count), span(queued->origin_, queued->count_)).empty();
  }
  if (poison)
    std::memset(target, 0xFF, count);
  return copy;
}

CheckedCopy::~CheckedCopy() {
  std::lock_guard lock(sourcesMutex());
  if (snapshot_ != nullptr)
    std::erase(guardedSources(), this);
}

void CheckedCopy::run() {
  size_t changedAt = count_;
  {
    std::unique_ptr<unsigned char[]> snapshot;  // freed after the lock
    std::lock_guard lock(sourcesMutex());
    if (snapshot_ != nullptr) {
      const auto* source = static_cast<const unsigned char*>(origin_);
      if (std::memcmp(snapshot_.get(), source, count_) != 0)
        changedAt = std::mismatch(source, source + count_, snapshot_.get()).first - source;
      std::erase(guardedSources(), this);
      snapshot = std::move(snapshot_);
    }
  }
  copyBytes(target_, origin_, count_);
  if (hostDestination_) {
    // Written by the stream, not the host: the queued copies that read these
    // bytes (later in stream order) must not report them.
    std::lock_guard lock(sourcesMutex());
    for (CheckedCopy* queued : guardedSources()) {
      const Span source = span(queued->origin_, queued->count_);
      const Span written = common(span(target_, count_), source);
      if (!written.empty()) {
        std::memcpy(
            queued->snapshot_.get() + (written.begin - source.begin), reinterpret_cast<const void*>(written.begin),
            written.end - written.begin);
      }
    }
  }
  if (changedAt != count_)
    stream_.addHostWrite({0, origin_, count_, context_, changedAt});
}

}  // namespace openreg::runtime

using namespace openreg::runtime;

orError_t orSetCompletionChecks(int enabled) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (enabled != 0 && enabled != 1) {
    return fail(orErrorInvalidValue, "orSetCompletionChecks: enabled is %d (expected 0 or 1)", enabled);
  }
  if (enabled != 0) {
    checkWord.fetch_or(kChecksOn, std::memory_order_relaxed);
  } else {
    checkWord.fetch_and(~kChecksOn, std::memory_order_relaxed);
  }
  requireAllStreams(config->deviceCount);
  return orSuccess;
}

orError_t orGetCompletionChecks(int* enabled) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (enabled == nullptr)
    return fail(orErrorInvalidValue, "orGetCompletionChecks: enabled is NULL");
  *enabled = completionChecks().on() ? 1 : 0;
  return orSuccess;
}
