// The matrix products alone, on the kernel table in use, against the machine's read bandwidth
// measured alongside (a probe pass after each timed pass): how close each weight type's product comes to streaming its
// weights at memory speed (1-2 input rows, decode) and to the peak multiply-add rate (many
// rows, prefill), without the engine's layer loop, thread pool or other work around it.
//
// The weights are copies of one matrix of each type (outputs x cols, the 0.6b model's up
// projection by default) filling --mib MiB, so a pass over all of them reads memory, not cache,
// as a decode step does. Each of --threads threads takes an equal share of every matrix's
// outputs for a whole pass, so no synchronisation is timed. Medians of --passes passes.
// With a small --mib and --laps N, each pass goes over the same weights N times, so they come
// from cache: the kernels' compute rate apart from memory.
//
// Usage: kernel_bench [--types bf16,q8_0,affine4] [--rows 1,2,8,64] [--outputs 3072] [--cols 1024]
//                     [--mib 384] [--laps 1] [--passes 7] [--threads 2] [--out FILE.json]
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"
#include "core/half.h"
#include "core/large_buffer.h"
#include "format/quant.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/machine_probe.h"
#include "kernels/weights.h"

namespace {

using kipp::GgmlType;
using kipp::bench::Clock;
using kipp::bench::median;
using kipp::bench::parse_count;
using kipp::bench::seconds_since;
using kipp::bench::split_list;

constexpr const char* kProgram = "kernel_bench";

[[noreturn]] void die(const std::string& message) { kipp::bench::die(kProgram, message); }

GgmlType parse_type(const std::string& name) {
  if (name == "bf16") return GgmlType::BF16;
  if (name == "q8_0") return GgmlType::Q8_0;
  if (name == "affine4") return GgmlType::Q4_1;
  die("unknown weight type '" + name + "' (bf16, q8_0 or affine4)");
}

// One matrix of random weights stored in `type`.
std::vector<uint8_t> stored_matrix(GgmlType type, size_t outputs, size_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> values(outputs * cols);
  for (float& v : values) v = normal(rng);
  std::vector<uint8_t> bytes;
  switch (type) {
    case GgmlType::BF16:
      bytes.resize(values.size() * 2);
      kipp::f32_to_bf16_row(values.data(), reinterpret_cast<uint16_t*>(bytes.data()), values.size());
      break;
    case GgmlType::Q8_0:
      bytes.resize(values.size() / kipp::kQuantBlock * sizeof(kipp::BlockQ8_0));
      kipp::quantize_q8_0(values.data(), reinterpret_cast<kipp::BlockQ8_0*>(bytes.data()), values.size());
      break;
    default:
      bytes.resize(values.size() / kipp::kQuantBlock * sizeof(kipp::BlockAffine4));
      kipp::quantize_affine4(values.data(), reinterpret_cast<kipp::BlockAffine4*>(bytes.data()), values.size());
      break;
  }
  return bytes;
}

struct Measured {
  double seconds;  // median pass
  double gb_per_second;
  double gflop_per_second;
  double bandwidth_alongside_gb_per_second;  // median read pass between the timed ones
};

Measured measure(const kipp::kernels::KernelTable& table, GgmlType type, size_t outputs, size_t cols, size_t rows,
                 uint64_t budget_bytes, size_t laps, size_t passes, size_t threads,
                 kipp::kernels::BandwidthProbe& probe, std::mt19937& rng) {
  std::vector<uint8_t> one = stored_matrix(type, outputs, cols, rng);
  // Arranged as the backend arranges them at load time, when the table has its own layout.
  kipp::kernels::WeightMatrix view = kipp::kernels::make_weight_matrix(type, one.data(), outputs, cols);
  std::vector<uint8_t> packed(one.size());
  const bool panels = table.pack_weights != nullptr && table.pack_weights(view, packed.data());
  if (panels) one = packed;
  const size_t copies = std::max<uint64_t>(1, budget_bytes / one.size());
  // On huge pages, as the backend keeps packed weights (core/large_buffer.h).
  const kipp::LargeBuffer weights = kipp::allocate_large_buffer(copies * one.size());
  if (weights == nullptr) die("cannot allocate " + std::to_string(copies * one.size()) + " bytes of weights");
  for (size_t c = 0; c < copies; ++c) std::memcpy(weights.get() + c * one.size(), one.data(), one.size());

  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(rows * cols);
  for (float& v : x) v = normal(rng);
  const kipp::kernels::InputFormat format = kipp::kernels::input_format(type);
  std::vector<float> storage(kipp::kernels::prepared_input_bytes(format, rows, cols) / sizeof(float) + 1);
  const kipp::kernels::PreparedInput in =
      kipp::kernels::input_layout(format, x.data(), rows, cols, cols, storage.data());
  table.prepare_rows(in, 0, rows);
  std::vector<float> out(rows * outputs);

  const kipp::bench::PassTimes timed = kipp::bench::time_passes(
      threads, passes,
      [&](size_t t) {
        // Whole panels of 16 outputs each, as the backend shares them.
        const size_t units = (outputs + 15) / 16;
        const size_t begin = std::min(outputs, 16 * (units * t / threads));
        const size_t end = std::min(outputs, 16 * (units * (t + 1) / threads));
        for (size_t lap = 0; lap < laps; ++lap)
          for (size_t c = 0; c < copies; ++c) {
            const uint8_t* data = weights.get() + c * one.size();
            kipp::kernels::WeightMatrix w = kipp::kernels::make_weight_matrix(type, data, outputs, cols);
            w.panels = panels;
            w.data += begin * w.row_bytes;
            w.rows = end - begin;
            table.matmul(w, in, out.data() + begin, outputs);
          }
      },
      &probe);
  const double seconds = timed.median_seconds;
  const double read = static_cast<double>(laps * copies);
  return {seconds, read * static_cast<double>(one.size()) / seconds / 1e9,
          2.0 * read * static_cast<double>(rows * outputs * cols) / seconds / 1e9,
          timed.bandwidth_alongside_gb_per_second};
}

void usage() {
  std::cout << "Usage: kernel_bench [--types bf16,q8_0,affine4] [--rows 1,2,8,64] [--outputs 3072] [--cols 1024]\n"
               "                    [--mib 384] [--laps 1] [--passes 7] [--threads 2] [--out FILE.json]\n"
               "Times the kernel table's matrix products alone over --mib MiB of weights (copies of one\n"
               "outputs x cols matrix, so each pass reads memory) and reports weight bytes/s against the\n"
               "read bandwidth measured between its passes, and FLOP/s, per weight type and input row count.\n"
               "--laps N goes over the weights N times per pass: with a --mib that fits the caches, the\n"
               "kernels' rate on weights already in cache.\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> types = {"bf16", "q8_0", "affine4"};
  std::vector<size_t> row_counts = {1, 2, 8, 64};
  size_t outputs = 3072, cols = 1024, mib = 384, laps = 1;
  kipp::bench::CommonOptions common;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&] { return kipp::bench::option_value(kProgram, argc, argv, i); };
    if (arg == "--help" || arg == "-h") {
      usage();
      return 0;
    } else if (arg == "--types") {
      types = split_list(value());
    } else if (arg == "--rows") {
      row_counts = kipp::bench::parse_counts(kProgram, value(), arg);
    } else if (arg == "--outputs") {
      outputs = parse_count(kProgram, value(), arg);
    } else if (arg == "--cols") {
      cols = parse_count(kProgram, value(), arg);
    } else if (arg == "--mib") {
      mib = parse_count(kProgram, value(), arg);
    } else if (arg == "--laps") {
      laps = parse_count(kProgram, value(), arg);
    } else if (!kipp::bench::take_common_option(kProgram, argc, argv, i, common)) {
      die("unknown option '" + arg + "' (see --help)");
    }
  }
  if (cols % kipp::kQuantBlock != 0) die("--cols must be a multiple of 32");
  if (types.empty()) die("--types needs at least one value");
  std::vector<GgmlType> parsed_types;
  for (const std::string& name : types) parsed_types.push_back(parse_type(name));

  const kipp::kernels::KernelTable& table = kipp::kernels::cpu_kernels();
  auto [result, bandwidth, probe] = kipp::bench::start_result(kProgram, argc, argv, table.name, common.threads);
  std::mt19937 rng(7);
  result["shape"] = {{"outputs", outputs}, {"cols", cols}, {"weight_mib", mib}, {"laps", laps}};
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string& name = types[i];
    const GgmlType type = parsed_types[i];
    for (size_t rows : row_counts) {
      const Measured m = measure(table, type, outputs, cols, rows, uint64_t{mib} << 20, laps, common.passes,
                                 common.threads, *probe, rng);
      std::fprintf(stderr, "%-8s rows %4zu  %7.2f GB/s (%3.0f%% of the %.1f GB/s read alongside)  %7.1f GFLOP/s\n",
                   name.c_str(), rows, m.gb_per_second, 100 * m.gb_per_second / m.bandwidth_alongside_gb_per_second,
                   m.bandwidth_alongside_gb_per_second, m.gflop_per_second);
      result["runs"].push_back({{"type", name},
                                {"rows", rows},
                                {"median_pass_seconds", m.seconds},
                                {"weight_gb_per_second", m.gb_per_second},
                                {"bandwidth_alongside_gb_per_second", m.bandwidth_alongside_gb_per_second},
                                {"of_bandwidth_alongside", m.gb_per_second / m.bandwidth_alongside_gb_per_second},
                                {"of_median_bandwidth", m.gb_per_second / bandwidth.median_gb_per_second},
                                {"gflop_per_second", m.gflop_per_second}});
    }
  }
  kipp::bench::write_result(kProgram, result, common.out_path);
  return 0;
}
