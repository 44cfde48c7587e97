#include "core/thread_pool.h"

#include <algorithm>

namespace kipp {
namespace {

// The range of thread `index` of `threads` over [0, count).
std::pair<size_t, size_t> range_of(size_t index, size_t threads, size_t count) {
  return {count * index / threads, count * (index + 1) / threads};
}

}  // namespace

ThreadPool::ThreadPool(size_t threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  for (size_t i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::parallel_for(size_t count, const std::function<void(size_t, size_t, size_t)>& body) {
  if (workers_.empty() || count <= 1) {
    body(0, 0, count);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    body_ = &body;
    count_ = count;
    pending_ = workers_.size();
    ++generation_;
  }
  start_.notify_all();
  const auto [begin, end] = range_of(0, size(), count);
  body(0, begin, end);
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  body_ = nullptr;
}

void ThreadPool::work(size_t index) {
  size_t seen = 0;
  for (;;) {
    const std::function<void(size_t, size_t, size_t)>* body;
    size_t count;
    {
      std::unique_lock lock(mutex_);
      start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      body = body_;
      count = count_;
    }
    const auto [begin, end] = range_of(index, size(), count);
    if (begin < end) (*body)(index, begin, end);
    {
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

}  // namespace kipp
