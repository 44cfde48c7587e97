#include "core/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KIPP_SPIN_PAUSE() _mm_pause()
#else
#define KIPP_SPIN_PAUSE() ((void)0)
#endif

namespace kipp {
namespace {

// A forward pass hands the pool hundreds of short loops per token, with short serial stretches
// between them; waking a sleeping thread costs more than many of them. Threads therefore poll
// for this many rounds (a pause is 10-140 cycles depending on the CPU: up to about a
// millisecond) before they block: far fewer rounds let the threads fall asleep between loops,
// which `kipp bench` shows in prefill and decode speed. The polling only costs anything when
// the cores are oversubscribed.
constexpr int kSpinRounds = 20000;

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
  body_ = &body;
  count_ = count;
  pending_.store(workers_.size(), std::memory_order_relaxed);
  {
    std::lock_guard lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_.notify_all();
  const auto [begin, end] = range_of(0, size(), count);
  std::exception_ptr caller_failure;
  try {
    body(0, begin, end);
  } catch (...) {
    caller_failure = std::current_exception();
  }
  // The workers hold `body` until they are done: wait for them even when the caller's part threw.
  for (int round = 0; round < kSpinRounds && pending_.load(std::memory_order_acquire) != 0; ++round) KIPP_SPIN_PAUSE();
  if (pending_.load(std::memory_order_acquire) != 0) {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
  }
  body_ = nullptr;
  std::exception_ptr failure = caller_failure;
  {
    std::lock_guard lock(mutex_);
    if (!failure) failure = worker_failure_;
    worker_failure_ = nullptr;
  }
  if (failure) std::rethrow_exception(failure);
}

void ThreadPool::work(size_t index) {
  size_t seen = 0;
  for (;;) {
    for (int round = 0; round < kSpinRounds && generation_.load(std::memory_order_acquire) == seen; ++round)
      KIPP_SPIN_PAUSE();
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock lock(mutex_);
      start_.wait(lock, [&] { return stopping_ || generation_.load(std::memory_order_acquire) != seen; });
      if (stopping_) return;
    }
    seen = generation_.load(std::memory_order_acquire);
    const auto [begin, end] = range_of(index, size(), count_);
    if (begin < end) {
      try {
        (*body_)(index, begin, end);
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!worker_failure_) worker_failure_ = std::current_exception();
      }
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard lock(mutex_);
      done_.notify_one();
    }
  }
}

}  // namespace kipp
