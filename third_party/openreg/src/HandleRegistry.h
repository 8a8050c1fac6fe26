// The live objects behind the opaque stream and event handles.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <utility>

namespace openreg::runtime {

// Handles are sequence numbers that are never reused, so a stale handle is
// reported as such instead of aliasing a newer object or being dereferenced.
// Lookups hand out shared ownership: an object being destroyed by one thread
// stays valid for a call another thread is still making on it.
template <typename Object>
class HandleRegistry {
 public:
  // Constructs Object(handle, args...) under a fresh handle.
  template <typename... Args>
  std::shared_ptr<Object> create(Args&&... args) {
    std::unique_lock lock(mutex_);
    const uintptr_t handle = ++lastHandle_;
    auto object = std::make_shared<Object>(handle, std::forward<Args>(args)...);
    objects_.emplace(handle, object);
    return object;
  }

  // Null if handle is not live.
  std::shared_ptr<Object> find(uintptr_t handle) const {
    std::shared_lock lock(mutex_);
    const auto it = objects_.find(handle);
    return it == objects_.end() ? nullptr : it->second;
  }

  // False if handle was not live.
  bool remove(uintptr_t handle) {
    std::shared_ptr<Object> removed;  // released after the lock
    std::unique_lock lock(mutex_);
    const auto it = objects_.find(handle);
    if (it == objects_.end())
      return false;
    removed = std::move(it->second);
    objects_.erase(it);
    return true;
  }

  template <typename Visit>
  void forEach(Visit visit) const {
    std::shared_lock lock(mutex_);
    for (const auto& [handle, object] : objects_)
      visit(object);
  }

 private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<uintptr_t, std::shared_ptr<Object>> objects_;
  uintptr_t lastHandle_ = 0;
};

}  // namespace openreg::runtime
