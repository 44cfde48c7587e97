// CPU engine benchmark on one GGUF: open time and memory (resident anonymous vs file-backed
// pages, so mapped weights are visibly not copied), K/V bytes per token against the formula,
// prefill and decode throughput (medians of --repeats runs, single session, greedy feed-back).
//
// Usage: engine_bench --model GGUF [--prompt-tokens N] [--decode-tokens N] [--capacity N]
//                     [--repeats N] [--threads N] [--out FILE.json]
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_common.h"
#include "runtime/engine.h"

namespace {

using kipp::bench::Clock;
using kipp::bench::median;
using kipp::bench::must;
using kipp::bench::seconds_since;

[[noreturn]] void die(const std::string& message) { kipp::bench::die("engine_bench", message); }

// VmRSS, RssAnon and RssFile of this process in bytes.
nlohmann::json resident_memory() {
  std::ifstream in("/proc/self/status");
  nlohmann::json out;
  std::string line;
  while (std::getline(in, line)) {
    for (const char* key : {"VmRSS", "RssAnon", "RssFile"}) {
      if (line.rfind(std::string(key) + ":", 0) == 0) out[key] = std::stoull(line.substr(line.find(':') + 1)) * 1024;
    }
  }
  return out;
}

uint32_t argmax(const std::vector<float>& logits) {
  uint32_t best = 0;
  for (uint32_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, out_path;
  uint32_t threads = 0, prompt_tokens = 64, decode_tokens = 16, capacity = 4096, repeats = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&] { return kipp::bench::option_value("engine_bench", argc, argv, i); };
    if (arg == "--model") model_path = value();
    else if (arg == "--prompt-tokens") prompt_tokens = static_cast<uint32_t>(std::stoul(value()));
    else if (arg == "--decode-tokens") decode_tokens = static_cast<uint32_t>(std::stoul(value()));
    else if (arg == "--capacity") capacity = static_cast<uint32_t>(std::stoul(value()));
    else if (arg == "--repeats") repeats = static_cast<uint32_t>(std::stoul(value()));
    else if (arg == "--threads") threads = static_cast<uint32_t>(std::stoul(value()));
    else if (arg == "--out") out_path = value();
    else if (arg == "--help" || arg == "-h") {
      std::cout << "usage: engine_bench --model GGUF [--prompt-tokens 64] [--decode-tokens 16] [--capacity 4096] "
                   "[--repeats 3] [--threads 0 (all)] [--out FILE.json]\n";
      return 0;
    } else die("unknown argument " + arg);
  }
  if (model_path.empty()) die("--model is required");
  if (repeats == 0 || prompt_tokens == 0) die("--repeats and --prompt-tokens must be positive");

  nlohmann::json result;
  kipp::bench::record_machine_and_command(result, "engine_bench", argc, argv);
  result["model"] = model_path;
  result["rss_at_start"] = resident_memory();

  const auto open_start = Clock::now();
  kipp::EngineOptions options;
  options.verify_content_hash = false;  // measured separately by `kipp inspect`; not part of serving
  options.threads = threads;
  auto engine = must(kipp::Engine::open(model_path, options), "opening " + model_path);
  result["open_seconds"] = seconds_since(open_start);
  result["rss_after_open"] = resident_memory();
  const kipp::ModelConfig& config = engine->config();
  const uint32_t vocab = engine->vocab_size();
  result["file_bytes"] = engine->model().file_size();
  result["backend"] = engine->backend().name();
  result["threads"] = threads == 0 ? std::thread::hardware_concurrency() : threads;
  result["scratch_bytes"] = engine->backend().scratch_bytes();

  kipp::SessionOptions session_options;
  session_options.capacity = capacity;
  auto session = must(engine->create_session(session_options), "creating a session");
  const uint64_t blocks = (capacity + kipp::kKvBlockPositions - 1) / kipp::kKvBlockPositions;
  const uint64_t formula = uint64_t{config.num_layers} * 2 * config.num_kv_heads * config.head_dim * 2;
  result["kv"] = {{"bytes_per_token_formula", formula},
                  {"bytes_per_token_config", config.kv_bytes_per_token()},
                  {"session_capacity", capacity},
                  {"session_storage_bytes", session->kv_storage_bytes()},
                  {"session_storage_bytes_formula", blocks * kipp::kKvBlockPositions * formula}};
  if (session->kv_storage_bytes() != blocks * kipp::kKvBlockPositions * formula)
    die("the session's K/V storage is not blocks * 32 * layers * 2 * kv_heads * head_dim * 2 bytes");
  result["rss_after_session"] = resident_memory();

  std::vector<uint32_t> prompt(prompt_tokens);
  for (uint32_t i = 0; i < prompt_tokens; ++i) prompt[i] = (i * 7919u + 13u) % vocab;
  std::vector<float> logits(vocab);
  std::vector<double> prefill_seconds, decode_seconds;
  for (uint32_t r = 0; r < repeats; ++r) {
    session->reset();
    auto start = Clock::now();
    kipp::Status status = session->eval(prompt, 1, logits.data());
    if (!status.ok()) die("prefill: " + status.message());
    prefill_seconds.push_back(seconds_since(start));
    for (uint32_t t = 0; t < decode_tokens; ++t) {
      const uint32_t next = argmax(logits);
      start = Clock::now();
      status = session->eval(std::span<const uint32_t>(&next, 1), 1, logits.data());
      if (!status.ok()) die("decode: " + status.message());
      decode_seconds.push_back(seconds_since(start));
    }
    std::cerr << "repeat " << r + 1 << "/" << repeats << ": prefill " << prefill_seconds.back() << " s\n";
  }
  const double prefill = median(prefill_seconds);
  result["prefill"] = {{"tokens", prompt_tokens}, {"median_seconds", prefill}, {"tokens_per_second", prompt_tokens / prefill}};
  if (decode_tokens > 0) {
    const double decode = median(decode_seconds);
    result["decode"] = {{"tokens", decode_tokens}, {"median_seconds_per_token", decode}, {"tokens_per_second", 1.0 / decode}};
  }
  result["rss_after_runs"] = resident_memory();

  kipp::bench::write_result("engine_bench", result, out_path);
  return 0;
}
