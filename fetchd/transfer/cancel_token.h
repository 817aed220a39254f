#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace fetchd::transfer {

// Set once (SIGINT, SIGTERM, a gRPC client going away); every wait and transfer checks it, so a cancel
// stops the work promptly and leaves partial files as they are.
class CancelToken {
 public:
  void cancel() {
    {
      std::lock_guard lock(mutex_);
      cancelled_ = true;
    }
    changed_.notify_all();
  }
  bool cancelled() const {
    std::lock_guard lock(mutex_);
    return cancelled_;
  }
  // Waits `duration` unless cancelled first; returns false when cancelled.
  bool wait_for(std::chrono::milliseconds duration) const {
    std::unique_lock lock(mutex_);
    return !changed_.wait_for(lock, duration, [this] { return cancelled_; });
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  bool cancelled_ = false;
};

// Waits `duration` before a retry; false when `cancel` fired first. Without a token it simply sleeps.
inline bool wait_unless_cancelled(const CancelToken* cancel, std::chrono::milliseconds duration) {
  if (cancel != nullptr) return cancel->wait_for(duration);
  std::this_thread::sleep_for(duration);
  return true;
}

}  // namespace fetchd::transfer
