// The server's Prometheus metrics (text exposition format 0.0.4). Written by the HTTP threads
// (requests by status, durations) and the scheduler (tokens, queue, batch, K/V pool, prefix
// reuse, time to first token); read by GET /metrics. Thread-safe; knows nothing of either side.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace kipp::server {

class Histogram {
 public:
  static constexpr std::array<double, 14> kBuckets = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                                      2.5,  5,     10,   30,  60,   120, 300};
  void observe(double seconds);
  void render(const std::string& name, const std::string& help, std::string& out) const;

 private:
  std::array<uint64_t, kBuckets.size()> counts_{};  // per bucket (not cumulative)
  uint64_t count_ = 0;
  double sum_ = 0;
};

struct SchedulerGauges {
  uint32_t queue_depth = 0;
  uint32_t batch_occupancy = 0;  // active choices
  uint32_t batch_capacity = 0;
  uint32_t kv_blocks_used = 0;  // held by sessions (the rest is free or reusable cache)
  uint32_t kv_blocks_total = 0;
};

class Metrics {
 public:
  void count_request(const std::string& endpoint, int status);
  void observe_request_duration(double seconds);
  void count_cancelled();  // a response ended before its generation did (the client left)
  void observe_time_to_first_token(double seconds);
  void add_tokens(uint64_t prompt, uint64_t generated);
  void add_prefix_reuse(uint64_t cached_tokens);  // one hit with this many tokens
  void set_gauges(const SchedulerGauges& gauges);

  std::string render() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t cancelled_ = 0;
  uint64_t prompt_tokens_ = 0, generated_tokens_ = 0;
  uint64_t prefix_hits_ = 0, prefix_cached_tokens_ = 0;
  SchedulerGauges gauges_;
  Histogram ttft_, duration_;
};

}  // namespace kipp::server
