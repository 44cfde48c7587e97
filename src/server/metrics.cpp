#include "server/metrics.h"

#include <charconv>

namespace kipp::server {
namespace {

// The shortest text that reads back as `value` ("0.1", not "0.10000000000000001").
std::string number(double value) {
  char buffer[40];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

void header(std::string& out, const std::string& name, const char* type, const std::string& help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void scalar(std::string& out, const std::string& name, const char* type, const std::string& help, double value) {
  header(out, name, type, help);
  out += name + " " + number(value) + "\n";
}

}  // namespace

void Histogram::observe(double seconds) {
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    if (seconds <= kBuckets[i]) {
      ++counts_[i];
      break;
    }
  }
  ++count_;
  sum_ += seconds;
}

void Histogram::render(const std::string& name, const std::string& help, std::string& out) const {
  header(out, name, "histogram", help);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + number(kBuckets[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + number(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

void Metrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{endpoint, status}];
}

void Metrics::observe_request_duration(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  duration_.observe(seconds);
}

void Metrics::count_cancelled() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++cancelled_;
}

void Metrics::observe_time_to_first_token(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  ttft_.observe(seconds);
}

void Metrics::add_tokens(uint64_t prompt, uint64_t generated) {
  std::lock_guard<std::mutex> lock(mutex_);
  prompt_tokens_ += prompt;
  generated_tokens_ += generated;
}

void Metrics::add_prefix_reuse(uint64_t cached_tokens) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++prefix_hits_;
  prefix_cached_tokens_ += cached_tokens;
}

void Metrics::set_gauges(const SchedulerGauges& gauges) {
  std::lock_guard<std::mutex> lock(mutex_);
  gauges_ = gauges;
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  header(out, "kipp_requests_total", "counter", "HTTP requests by endpoint and status code.");
  for (const auto& [key, count] : requests_)
    out += "kipp_requests_total{endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"} " +
           std::to_string(count) + "\n";
  scalar(out, "kipp_requests_cancelled_total", "counter",
         "Generations cancelled because their response ended first (the client left or the server stopped).",
         double(cancelled_));
  scalar(out, "kipp_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.", double(prompt_tokens_));
  scalar(out, "kipp_generated_tokens_total", "counter", "Tokens generated.", double(generated_tokens_));
  scalar(out, "kipp_queue_depth", "gauge", "Requests waiting for admission.", gauges_.queue_depth);
  scalar(out, "kipp_batch_occupancy", "gauge", "Choices being prefilled or decoded.", gauges_.batch_occupancy);
  scalar(out, "kipp_batch_capacity", "gauge", "Most choices in one step (--max-batch).", gauges_.batch_capacity);
  scalar(out, "kipp_kv_pool_blocks_used", "gauge", "K/V pool blocks held by sessions.", gauges_.kv_blocks_used);
  scalar(out, "kipp_kv_pool_blocks_total", "gauge", "K/V pool blocks (32 positions each).", gauges_.kv_blocks_total);
  scalar(out, "kipp_prefix_reuse_hits_total", "counter", "Requests that reused cached prompt blocks.",
         double(prefix_hits_));
  scalar(out, "kipp_prefix_cached_tokens_total", "counter", "Prompt tokens served from the prefix cache.",
         double(prefix_cached_tokens_));
  ttft_.render("kipp_time_to_first_token_seconds", "Arrival to the first generated token.", out);
  duration_.render("kipp_request_duration_seconds", "Arrival to the end of the response.", out);
  return out;
}

}  // namespace kipp::server
