// Attention alone, on the kernel table in use, against the machine's read bandwidth measured
// between its passes: --sequences sequences each at --context positions, its last --rows positions
// the queries (1: a decode step, as a batched decode step runs it after the projections; 32: a
// tile of a prefill), over --layers layers of the 0.6b model's attention shape (16 query heads
// over 8 K/V heads of 128). Each sequence has its own K/V blocks, so a pass reads every
// sequence's K and V from memory, not cache.
//
// Each of --threads threads takes an equal share of the (sequence, kv head) items of every
// layer for a whole pass, so no synchronisation is timed. Medians of --passes passes.
//
// Usage: attention_bench [--context 64,128,512] [--sequences 1,8] [--rows 1] [--layers 28]
//                        [--passes 7] [--threads 2] [--out FILE.json]
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"
#include "core/half.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/machine_probe.h"
#include "kernels/ref/ops.h"
#include "kernels/weights.h"

namespace {

using kipp::bench::Clock;
using kipp::bench::median;
using kipp::bench::parse_count;
using kipp::bench::seconds_since;
using kipp::bench::split_list;
using kipp::kernels::kKvBlockPositions;

constexpr const char* kProgram = "attention_bench";
constexpr size_t kQueryHeads = 16, kKvHeads = 8, kHeadDim = 128, kGroup = kQueryHeads / kKvHeads;
constexpr size_t kKvWidth = kKvHeads * kHeadDim;
// One block of one layer: K then V, kKvBlockPositions positions of kKvWidth elements each.
constexpr size_t kLayerBlockElements = 2 * kKvBlockPositions * kKvWidth;
// Within K (and V), each kv head's rows are together, as the backend lays them out.
constexpr size_t kHeadRows = kKvBlockPositions * kHeadDim;

[[noreturn]] void die(const std::string& message) { kipp::bench::die(kProgram, message); }

struct Measured {
  double seconds;  // median pass
  double kv_gb_per_second;
  double gflop_per_second;
  double microseconds_per_sequence_layer;
  double bandwidth_alongside_gb_per_second;  // median read pass between the timed ones
};

// `rows` query positions per sequence, the last `rows` of its `context` (1: a decode step; 32:
// a prefill tile, as the backend hands attention 32 rows of one sequence at most).
Measured measure(const kipp::kernels::KernelTable& table, size_t context, size_t rows, size_t sequences, size_t layers,
                 size_t passes, size_t threads, kipp::kernels::BandwidthProbe& probe, std::mt19937& rng) {
  const size_t blocks = (context + kKvBlockPositions - 1) / kKvBlockPositions;
  // Per sequence, its blocks, each holding every layer's K and V as the backend's pool does.
  std::vector<std::vector<uint16_t>> storage(sequences * blocks);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(layers * kLayerBlockElements);
  for (std::vector<uint16_t>& block : storage) {
    for (float& v : values) v = normal(rng);
    block.resize(values.size());
    kipp::f32_to_bf16_row(values.data(), block.data(), values.size());
  }
  std::vector<std::vector<const uint16_t*>> block_tables(sequences);
  for (size_t s = 0; s < sequences; ++s)
    for (size_t b = 0; b < blocks; ++b) block_tables[s].push_back(storage[s * blocks + b].data());

  const size_t row_width = kQueryHeads * kHeadDim, sequence_width = rows * row_width;
  std::vector<float> q(sequences * sequence_width), out(q.size());
  for (float& v : q) v = normal(rng);
  const size_t scratch_floats = kipp::kernels::ref::attention_scratch_floats(context, rows, kGroup, kHeadDim);
  std::vector<std::vector<float>> scratch(threads, std::vector<float>(scratch_floats));
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  const size_t items = sequences * kKvHeads;

  const kipp::bench::PassTimes timed = kipp::bench::time_passes(
      threads, passes,
      [&](size_t t) {
        for (size_t l = 0; l < layers; ++l) {
          const size_t k_offset = l * kLayerBlockElements, v_offset = k_offset + kKvBlockPositions * kKvWidth;
          const auto view_of = [&](size_t item) {
            const size_t g = item % kKvHeads;
            return kipp::kernels::KvLayerView{block_tables[item / kKvHeads].data(),
                                              k_offset + g * kHeadRows,
                                              v_offset + g * kHeadRows,
                                              1,
                                              kHeadDim,
                                              kHeadDim};
          };
          // Round-robin, as the backend deals (sequence, kv head) items to its threads, each
          // thread asking for its next item's K/V first.
          for (size_t item = t; item < items; item += threads) {
            if (item + threads < items) kipp::kernels::fetch_kv_rows(view_of(item + threads), context);
            const size_t at = (item / kKvHeads) * sequence_width + (item % kKvHeads) * kGroup * kHeadDim;
            table.attention_rows(q.data() + at, row_width, rows, context - rows, kGroup, view_of(item), scale,
                                 scratch[t].data(), out.data() + at, row_width);
          }
        }
      },
      &probe);
  // The K and V bytes one pass must read: every visible position of every layer and sequence;
  // the FLOPs: Q.K and P.V over every visible (query, key) pair, per query head.
  const double bytes = 2.0 * 2.0 * static_cast<double>(context * kKvWidth * layers * sequences);
  const double pairs = static_cast<double>(rows) * static_cast<double>(context - rows) +
                       static_cast<double>(rows) * static_cast<double>(rows + 1) / 2;
  const double flops = 2.0 * 2.0 * pairs * kHeadDim * kQueryHeads * static_cast<double>(layers * sequences);
  const double seconds = timed.median_seconds;
  return {seconds, bytes / seconds / 1e9, flops / seconds / 1e9,
          seconds * 1e6 / static_cast<double>(sequences * layers), timed.bandwidth_alongside_gb_per_second};
}

void usage() {
  std::cout << "Usage: attention_bench [--context 64,128,512] [--sequences 1,8] [--rows 1] [--layers 28]\n"
               "                       [--passes 7] [--threads 2] [--out FILE.json]\n"
               "Times the kernel table's attention alone (the last --rows positions of each sequence as\n"
               "queries: 1 a decode step, up to 32 a prefill tile; the 0.6b model's 16 query heads over 8\n"
               "K/V heads of 128) over --layers layers of K/V per sequence, and reports the K/V bytes/s\n"
               "against the read bandwidth measured between its passes, and FLOP/s.\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> contexts = {64, 128, 512}, sequence_counts = {1, 8};
  size_t rows = 1;
  size_t layers = 28;
  kipp::bench::CommonOptions common;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&] { return kipp::bench::option_value(kProgram, argc, argv, i); };
    if (arg == "--help" || arg == "-h") {
      usage();
      return 0;
    } else if (arg == "--context") {
      contexts = kipp::bench::parse_counts(kProgram, value(), arg);
    } else if (arg == "--sequences") {
      sequence_counts = kipp::bench::parse_counts(kProgram, value(), arg);
    } else if (arg == "--rows") {
      rows = parse_count(kProgram, value(), arg);
    } else if (arg == "--layers") {
      layers = parse_count(kProgram, value(), arg);
    } else if (!kipp::bench::take_common_option(kProgram, argc, argv, i, common)) {
      die("unknown option '" + arg + "' (see --help)");
    }
  }

  for (size_t context : contexts)
    if (context < rows) die("--context " + std::to_string(context) + " is shorter than --rows " + std::to_string(rows));
  if (rows > 32) die("--rows is at most 32 (the backend's tile of query rows)");
  const kipp::kernels::KernelTable& table = kipp::kernels::cpu_kernels();
  auto [result, bandwidth, probe] = kipp::bench::start_result(kProgram, argc, argv, table.name, common.threads);
  std::mt19937 rng(7);
  result["shape"] = {{"query_heads", kQueryHeads},
                     {"kv_heads", kKvHeads},
                     {"head_dim", kHeadDim},
                     {"layers", layers},
                     {"query_rows", rows}};
  for (size_t sequences : sequence_counts)
    for (size_t context : contexts) {
      const Measured m = measure(table, context, rows, sequences, layers, common.passes, common.threads, *probe, rng);
      std::fprintf(
          stderr,
          "sequences %2zu context %5zu  %7.2f GB/s K/V (%3.0f%% of the %.1f GB/s read alongside)  %7.1f GFLOP/s  "
          "%7.1f us per sequence and layer\n",
          sequences, context, m.kv_gb_per_second, 100 * m.kv_gb_per_second / m.bandwidth_alongside_gb_per_second,
          m.bandwidth_alongside_gb_per_second, m.gflop_per_second, m.microseconds_per_sequence_layer);
      result["runs"].push_back({{"sequences", sequences},
                                {"context", context},
                                {"median_pass_seconds", m.seconds},
                                {"kv_gb_per_second", m.kv_gb_per_second},
                                {"bandwidth_alongside_gb_per_second", m.bandwidth_alongside_gb_per_second},
                                {"of_bandwidth_alongside", m.kv_gb_per_second / m.bandwidth_alongside_gb_per_second},
                                {"of_median_bandwidth", m.kv_gb_per_second / bandwidth.median_gb_per_second},
                                {"gflop_per_second", m.gflop_per_second},
                                {"microseconds_per_sequence_layer", m.microseconds_per_sequence_layer}});
    }
  kipp::bench::write_result(kProgram, result, common.out_path);
  return 0;
}
