// Tokenizer throughput on the benchmark corpus (bench/make_tokenizer_corpus.py): single-thread
// encode per section with the piece cache cold (a fresh tokenizer) and warm, decode, streaming
// decode, and batch encode of the mixed corpus split into documents across threads. Each
// figure is the median of --repeats runs. Run it through bench/run_tokenizer_bench.sh.
//
// Usage: tokenizer_bench --corpus DIR --tokenizer DIR [--repeats N] [--threads N] [--out FILE]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"
#include "core/files.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

using kipp::SpecialTokens;
using kipp::Tokenizer;
using kipp::bench::Clock;
using kipp::bench::median;
using kipp::bench::must;
using kipp::bench::seconds_since;

[[noreturn]] void die(const std::string& message) { kipp::bench::die("tokenizer_bench", message); }

double mb_per_s(size_t bytes, double seconds) { return static_cast<double>(bytes) / 1e6 / seconds; }

// Documents of at least `target` bytes, cut at line ends (the unit a data loader encodes).
std::vector<std::string_view> documents(std::string_view text, size_t target) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = std::min(text.size(), start + target);
    const size_t newline = text.find('\n', end);
    end = newline == std::string_view::npos ? text.size() : newline + 1;
    out.push_back(text.substr(start, end - start));
    start = end;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string corpus_dir, tokenizer_dir, out_path;
  int repeats = 5;
  unsigned threads = std::max(2u, std::thread::hardware_concurrency());
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto next = [&]() -> std::string {
      if (i + 1 >= argc) die(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--corpus")
      corpus_dir = next();
    else if (arg == "--tokenizer")
      tokenizer_dir = next();
    else if (arg == "--repeats")
      repeats = std::stoi(next());
    else if (arg == "--threads")
      threads = static_cast<unsigned>(std::stoul(next()));
    else if (arg == "--out")
      out_path = next();
    else
      die("unknown argument " + arg);
  }
  if (corpus_dir.empty() || tokenizer_dir.empty())
    die("usage: tokenizer_bench --corpus DIR --tokenizer DIR [--repeats N] [--threads N] [--out FILE]");

  kipp::HfTokenizerFiles files;
  files.tokenizer_json = must(kipp::read_text_file(tokenizer_dir + "/tokenizer.json"), "tokenizer.json");
  files.tokenizer_config_json =
      must(kipp::read_text_file(tokenizer_dir + "/tokenizer_config.json"), "tokenizer_config.json");
  const auto metadata = must(kipp::import_hf_tokenizer(files, 151936, 151643, 151645), "import");
  auto load_start = Clock::now();
  const Tokenizer warm = must(Tokenizer::create(metadata), "create");
  const double load_seconds = seconds_since(load_start);

  nlohmann::json result;
  result["machine"] = kipp::machine_json(kipp::read_machine_info());
  result["repeats"] = repeats;
  result["tokenizer_create_seconds"] = load_seconds;
  std::printf("tokenizer created in %.3f s\n", load_seconds);

  std::string mixed;
  for (const std::string section : {"prose", "code", "multilingual", "mixed"}) {
    const std::string text = must(kipp::read_text_file(corpus_dir + "/" + section + ".txt"), section);
    // Cold: a fresh tokenizer, so every piece misses the cache once.
    const Tokenizer cold_tokenizer = must(Tokenizer::create(metadata), "create");
    auto start = Clock::now();
    const auto cold_ids = must(cold_tokenizer.encode(text, SpecialTokens::PlainText), section);
    const double cold = seconds_since(start);
    std::vector<double> times;
    std::vector<uint32_t> ids;
    for (int r = 0; r < repeats; ++r) {
      start = Clock::now();
      ids = must(warm.encode(text, SpecialTokens::PlainText), section);
      times.push_back(seconds_since(start));
    }
    if (ids != cold_ids) die(section + ": the cold and warm encodings differ");
    const double warm_s = median(times);
    result["encode"][section] = {
        {"bytes", text.size()},
        {"tokens", ids.size()},
        {"bytes_per_token", static_cast<double>(text.size()) / static_cast<double>(ids.size())},
        {"cold_cache_mb_per_s", mb_per_s(text.size(), cold)},
        {"warm_cache_mb_per_s", mb_per_s(text.size(), warm_s)}};
    std::printf("encode %-12s %9zu bytes %8zu tokens  cold %6.1f MB/s  warm %6.1f MB/s\n", section.c_str(), text.size(),
                ids.size(), mb_per_s(text.size(), cold), mb_per_s(text.size(), warm_s));
    if (section != "mixed") continue;
    mixed = text;

    // Decoding gives NFC(text), so rates are over the decoded size.
    const size_t decoded_size = must(warm.decode(ids), "decode").size();
    times.clear();
    for (int r = 0; r < repeats; ++r) {
      start = Clock::now();
      const std::string decoded = must(warm.decode(ids), "decode");
      times.push_back(seconds_since(start));
      if (decoded.size() != decoded_size) die("decode is not deterministic");
    }
    result["decode_mb_per_s"] = mb_per_s(decoded_size, median(times));
    times.clear();
    for (int r = 0; r < repeats; ++r) {
      start = Clock::now();
      kipp::IncrementalDecoder decoder(warm);
      size_t total = 0;
      for (const uint32_t id : ids) total += must(decoder.push(id), "push").size();
      total += decoder.finish().size();
      times.push_back(seconds_since(start));
      if (total != decoded_size) die("streaming decode differs from decode");
    }
    result["streaming_decode_mb_per_s"] = mb_per_s(decoded_size, median(times));
    std::printf("decode  %6.1f MB/s   streaming decode %6.1f MB/s\n", result["decode_mb_per_s"].get<double>(),
                result["streaming_decode_mb_per_s"].get<double>());
  }

  // Batch: the mixed corpus as ~16 KB documents, pulled by worker threads from a shared index.
  const auto docs = documents(mixed, 16 * 1024);
  result["batch_encode"]["documents"] = docs.size();
  for (unsigned n = 1; n <= threads; n = n < threads ? std::min(threads, n * 2) : threads + 1) {
    std::vector<double> times;
    for (int r = 0; r < repeats; ++r) {
      std::atomic<size_t> next{0};
      std::atomic<bool> failed{false};
      const auto start = Clock::now();
      std::vector<std::thread> workers;
      for (unsigned w = 0; w < n; ++w) {
        workers.emplace_back([&] {
          for (size_t i = next++; i < docs.size(); i = next++) {
            if (!warm.encode(docs[i], SpecialTokens::PlainText).ok()) failed = true;
          }
        });
      }
      for (auto& worker : workers) worker.join();
      times.push_back(seconds_since(start));
      if (failed) die("batch encode failed");
    }
    const double rate = mb_per_s(mixed.size(), median(times));
    result["batch_encode"]["threads_" + std::to_string(n)] = {{"threads", n}, {"mb_per_s", rate}};
    std::printf("batch encode %u thread(s): %6.1f MB/s\n", n, rate);
  }

  if (!out_path.empty()) {
    std::ofstream out(out_path);
    out << result.dump(2) << "\n";
    if (!out) die("cannot write " + out_path);
  }
  return 0;
}
