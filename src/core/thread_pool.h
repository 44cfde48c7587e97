// A fixed set of worker threads for data-parallel loops: parallel_for splits [0, count) into
// one contiguous range per thread and returns when all are done. The caller's thread runs the
// first range, so a pool of size 1 has no workers and runs everything inline.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kipp {

class ThreadPool {
 public:
  // threads == 0 means one per hardware thread.
  explicit ThreadPool(size_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return workers_.size() + 1; }

  // Calls body(thread_index, begin, end) on disjoint ranges covering [0, count); ranges are
  // split evenly and in order, so the same count always gives the same ranges. If a range
  // throws, the other ranges still finish, then the first exception is rethrown here.
  void parallel_for(size_t count, const std::function<void(size_t, size_t, size_t)>& body);

 private:
  void work(size_t index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  // Written by the caller before generation_ is advanced (release), read by the workers after
  // they see the new generation (acquire).
  const std::function<void(size_t, size_t, size_t)>* body_ = nullptr;
  size_t count_ = 0;
  std::atomic<size_t> generation_{0};
  std::atomic<size_t> pending_{0};
  bool stopping_ = false;              // guarded by mutex_
  std::exception_ptr worker_failure_;  // guarded by mutex_
};

}  // namespace kipp
