// What this machine can do at most, measured rather than looked up: the memory bandwidth a
// read-only pass over a buffer far larger than the caches achieves, and the peak multiply-add
// rates of the vector instructions the kernels may use. `kipp bench` compares the engine's
// decode (memory-bound) and prefill (compute-bound) against these. Nothing here knows a model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kipp::kernels {

struct BandwidthResult {
  double best_gb_per_second = 0;    // 1e9 bytes per second, the fastest pass
  double median_gb_per_second = 0;  // the median pass
  uint64_t buffer_bytes = 0;
  uint32_t threads = 0;
  uint32_t passes = 0;
  std::string instruction;  // the load the summing loop ran on ("avx512f zmm", "avx2 ymm", "scalar")
};

inline constexpr uint64_t kDefaultBandwidthBytes = uint64_t{512} << 20;

// A read-bandwidth probe whose buffer and threads stay ready between timed passes, so passes
// can be taken between other work: on a shared host the bandwidth moves from minute to minute,
// and `kipp bench` compares decode with passes taken between its tokens.
class BandwidthProbe {
 public:
  // A buffer of `bytes` (rounded down to whole 64-byte lines, split evenly over `threads`
  // threads; 0 = one per hardware thread), written once here so page faults stay out of the
  // timing. Fails only when the buffer cannot be allocated or holds no whole line.
  static Expected<std::unique_ptr<BandwidthProbe>> create(uint32_t threads, uint64_t bytes = kDefaultBandwidthBytes);
  ~BandwidthProbe();
  BandwidthProbe(const BandwidthProbe&) = delete;
  BandwidthProbe& operator=(const BandwidthProbe&) = delete;

  // Sums the whole buffer once and returns the seconds it took; fails if the sum is wrong (the
  // loads were dropped).
  Expected<double> timed_pass();
  // timed_pass between two timed runs of other work: untimed pauses before and after it, longer
  // than idle ThreadPool threads poll (about a millisecond), so neither side's threads run on
  // the other's cores.
  Expected<double> timed_pass_between_runs();
  // Best and median of the passes so far (zero rates before the first).
  BandwidthResult result() const;

 private:
  struct State;
  explicit BandwidthProbe(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

inline constexpr uint32_t kDefaultBandwidthPasses = 10;

// `repeats` timed passes of `probe`, and its result over all its passes.
Expected<BandwidthResult> read_bandwidth(BandwidthProbe& probe, uint32_t repeats = kDefaultBandwidthPasses);
// The same with a fresh BandwidthProbe, freed after.
Expected<BandwidthResult> read_bandwidth(uint32_t threads, uint64_t bytes = kDefaultBandwidthBytes,
                                         uint32_t repeats = kDefaultBandwidthPasses);

enum class MultiplyAddKind { Fp32Fma, Bf16Dot, Int8Dot, AmxBf16, AmxInt8 };
// "fp32_fma", "bf16_dot", "int8_dot", "amx_bf16", "amx_int8"
std::string_view multiply_add_kind_name(MultiplyAddKind kind);

struct PeakRate {
  MultiplyAddKind kind = MultiplyAddKind::Fp32Fma;
  std::string instruction;              // e.g. "vfmadd231ps zmm"
  double multiply_adds_per_second = 0;  // summed over all threads
  double flops_per_second() const { return 2 * multiply_adds_per_second; }
};

// Peak rates on `threads` threads (0 = one per hardware thread), each probe running about
// `seconds_per_probe` with independent accumulator chains so that throughput, not latency,
// bounds it. FP32 is always measured (zmm FMA, ymm FMA or scalar on x86-64, NEON FMLA on ARM64); the
// BF16 (vdpbf16ps) and int8 (vpdpbusd) dot products only where the CPU has AVX512_BF16 /
// AVX512_VNNI; AMX BF16 tile products (tdpbf16ps) where amx::supported(), AMX int8 ones
// (tdpbssd) where amx::int8_supported().
std::vector<PeakRate> peak_multiply_add(uint32_t threads, double seconds_per_probe = 0.2);

}  // namespace kipp::kernels
