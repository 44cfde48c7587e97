#include "kernels/cpu/machine_probe.h"

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "core/large_buffer.h"
#include "core/thread_pool.h"
#if defined(__x86_64__)
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/matmul_amx.h"
#include "kernels/cpu/matmul_int8_amx.h"
#endif

namespace kipp::kernels {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

constexpr size_t kLineBytes = 64;

// ---- Read bandwidth ----------------------------------------------------------------------
// Eight independent accumulators per loop so the adds never wait on each other: the loop then
// runs as fast as the memory system delivers lines.

#if defined(__x86_64__)
__attribute__((target("avx512f"))) uint64_t sum_lines_avx512(const uint8_t* data, size_t lines) {
  __m512i acc[8];
  for (__m512i& a : acc) a = _mm512_setzero_si512();
  size_t i = 0;
  for (; i + 8 <= lines; i += 8) {
#pragma GCC unroll 8
    for (size_t j = 0; j < 8; ++j) acc[j] = _mm512_add_epi64(acc[j], _mm512_load_si512(data + (i + j) * kLineBytes));
  }
  for (; i < lines; ++i) acc[0] = _mm512_add_epi64(acc[0], _mm512_load_si512(data + i * kLineBytes));
  __m512i total = _mm512_setzero_si512();
  for (const __m512i& a : acc) total = _mm512_add_epi64(total, a);
  // Through memory: GCC 12 warns (falsely) inside _mm512_reduce_add_epi64.
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, total);
  uint64_t sum = 0;
  for (uint64_t lane : lanes) sum += lane;
  return sum;
}

__attribute__((target("avx2"))) uint64_t sum_lines_avx2(const uint8_t* data, size_t lines) {
  __m256i acc[8];
  for (__m256i& a : acc) a = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 4 <= lines; i += 4) {
#pragma GCC unroll 8
    for (size_t j = 0; j < 8; ++j) {
      const auto* half = reinterpret_cast<const __m256i*>(data + i * kLineBytes) + j;
      acc[j] = _mm256_add_epi64(acc[j], _mm256_load_si256(half));
    }
  }
  for (; i < lines; ++i) {
    const auto* line = reinterpret_cast<const __m256i*>(data + i * kLineBytes);
    acc[0] = _mm256_add_epi64(acc[0], _mm256_load_si256(line));
    acc[1] = _mm256_add_epi64(acc[1], _mm256_load_si256(line + 1));
  }
  alignas(32) uint64_t lanes[4];
  __m256i total = _mm256_setzero_si256();
  for (const __m256i& a : acc) total = _mm256_add_epi64(total, a);
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), total);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
#endif

uint64_t sum_lines_scalar(const uint8_t* data, size_t lines) {
  uint64_t acc[8] = {};
  for (size_t i = 0; i < lines; ++i) {
    uint64_t words[8];
    std::memcpy(words, data + i * kLineBytes, kLineBytes);
    for (size_t j = 0; j < 8; ++j) acc[j] += words[j];
  }
  uint64_t total = 0;
  for (uint64_t a : acc) total += a;
  return total;
}

struct LineSummer {
  uint64_t (*sum)(const uint8_t*, size_t);
  const char* instruction;
};

LineSummer best_line_summer() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) return {sum_lines_avx512, "avx512f zmm loads"};
  if (__builtin_cpu_supports("avx2")) return {sum_lines_avx2, "avx2 ymm loads"};
#endif
  return {sum_lines_scalar, "scalar 64-bit loads"};
}

// ---- Peak multiply-add rates -------------------------------------------------------------
// Each probe runs kChains independent accumulator chains, so a new instruction can issue every
// cycle on every pipe instead of waiting out the previous one's latency (4-6 cycles). The
// operands come from volatile memory (nothing to constant-fold) and every accumulator ends in
// a volatile store (nothing to drop).

constexpr size_t kChains = 12;

volatile float g_fp32_multiplier = 0.999999f;
volatile float g_fp32_addend = 1e-6f;

#if defined(__x86_64__)
volatile float g_bf16_operand = 1e-3f;
volatile int g_int8_operand = 0x01010101;

// Multiply-adds per iteration of each probe: chains x lanes (x pairs or quads per lane).
constexpr double kZmmFp32PerIteration = kChains * 16;
constexpr double kYmmFp32PerIteration = kChains * 8;
constexpr double kBf16PerIteration = kChains * 16 * 2;
constexpr double kInt8PerIteration = kChains * 16 * 4;

// Through memory: GCC 12 warns (falsely) inside _mm512_reduce_add_ps and the conversions.
__attribute__((target("avx512f"))) float sum_lanes(__m512 x) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, x);
  float sum = 0;
  for (float lane : lanes) sum += lane;
  return sum;
}

__attribute__((target("avx512f"))) void fp32_fma_zmm(uint64_t iterations, volatile float* sink) {
  const __m512 a = _mm512_set1_ps(g_fp32_multiplier), b = _mm512_set1_ps(g_fp32_addend);
  __m512 acc[kChains];
  for (size_t j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j));
  for (uint64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (size_t j = 0; j < kChains; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  }
  __m512 total = _mm512_setzero_ps();
  for (const __m512& x : acc) total = _mm512_add_ps(total, x);
  *sink = sum_lanes(total);
}

__attribute__((target("avx2,fma"))) void fp32_fma_ymm(uint64_t iterations, volatile float* sink) {
  const __m256 a = _mm256_set1_ps(g_fp32_multiplier), b = _mm256_set1_ps(g_fp32_addend);
  __m256 acc[kChains];
  for (size_t j = 0; j < kChains; ++j) acc[j] = _mm256_set1_ps(static_cast<float>(j));
  for (uint64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (size_t j = 0; j < kChains; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  }
  alignas(32) float lanes[8];
  __m256 total = _mm256_setzero_ps();
  for (const __m256& x : acc) total = _mm256_add_ps(total, x);
  _mm256_store_ps(lanes, total);
  float sum = 0;
  for (float lane : lanes) sum += lane;
  *sink = sum;
}
#endif

#if defined(__aarch64__)
constexpr double kNeonFp32PerIteration = kChains * 4;

void fp32_fma_neon(uint64_t iterations, volatile float* sink) {
  const float32x4_t a = vdupq_n_f32(g_fp32_multiplier), b = vdupq_n_f32(g_fp32_addend);
  float32x4_t acc[kChains];
  for (size_t j = 0; j < kChains; ++j) acc[j] = vdupq_n_f32(static_cast<float>(j));
  for (uint64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (size_t j = 0; j < kChains; ++j) acc[j] = vfmaq_f32(b, acc[j], a);
  }
  float32x4_t total = vdupq_n_f32(0);
  for (const float32x4_t& x : acc) total = vaddq_f32(total, x);
  *sink = vaddvq_f32(total);
}
#else
constexpr double kScalarFp32PerIteration = kChains;

void fp32_scalar(uint64_t iterations, volatile float* sink) {
  const float a = g_fp32_multiplier, b = g_fp32_addend;
  float acc[kChains];
  for (size_t j = 0; j < kChains; ++j) acc[j] = static_cast<float>(j);
  for (uint64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (size_t j = 0; j < kChains; ++j) acc[j] = acc[j] * a + b;
  }
  float sum = 0;
  for (float x : acc) sum += x;
  *sink = sum;
}
#endif

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512bf16"))) void bf16_dot_zmm(uint64_t iterations, volatile float* sink) {
  const __m512 value = _mm512_set1_ps(g_bf16_operand);
  const __m512bh a = _mm512_cvtne2ps_pbh(value, value), b = _mm512_cvtne2ps_pbh(value, value);
  __m512 acc[kChains];
  for (size_t j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j));
  for (uint64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (size_t j = 0; j < kChains; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], a, b);
  }
  __m512 total = _mm512_setzero_ps();
  for (const __m512& x : acc) total = _mm512_add_ps(total, x);
  *sink = sum_lanes(total);
}

__attribute__((target("avx512f,avx512vnni"))) void int8_dot_zmm(uint64_t iterations, volatile float* sink) {
  const __m512i a = _mm512_set1_epi32(g_int8_operand), b = _mm512_set1_epi32(g_int8_operand);
  __m512i acc[kChains];
  for (size_t j = 0; j < kChains; ++j) acc[j] = _mm512_set1_epi32(static_cast<int>(j));
  for (uint64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (size_t j = 0; j < kChains; ++j) acc[j] = _mm512_dpbusd_epi32(acc[j], a, b);
  }
  __m512i total = _mm512_setzero_si512();
  for (const __m512i& x : acc) total = _mm512_add_epi32(total, x);
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, total);
  int64_t sum = 0;
  for (int32_t lane : lanes) sum += lane;
  *sink = static_cast<float>(sum);
}

// Four independent 16 x 16 accumulator tiles, each product 16 x 16 x 32 (TDPBF16PS, FP32 sums)
// or 16 x 16 x 64 (TDPBSSD, int32 sums); the operand tiles hold ones.
constexpr double kAmxBf16PerIteration = 4.0 * 16 * 16 * 32;
constexpr double kAmxInt8PerIteration = 4.0 * 16 * 16 * 64;

template <bool Int8>
__attribute__((target("amx-tile,amx-bf16,amx-int8"))) void amx_tiles(uint64_t iterations, volatile float* sink) {
  static constexpr amx::TileConfig config = amx::uniform_tile_config();
  alignas(64) uint16_t operand[16 * 32];
  std::fill(std::begin(operand), std::end(operand), Int8 ? uint16_t{0x0101} : uint16_t{0x3f80});
  alignas(64) float result[16 * 16];
  _tile_loadconfig(&config);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (uint64_t i = 0; i < iterations; ++i) {
    if constexpr (Int8) {
      _tile_dpbssd(0, 4, 5);
      _tile_dpbssd(1, 4, 5);
      _tile_dpbssd(2, 4, 5);
      _tile_dpbssd(3, 4, 5);
    } else {
      _tile_dpbf16ps(0, 4, 5);
      _tile_dpbf16ps(1, 4, 5);
      _tile_dpbf16ps(2, 4, 5);
      _tile_dpbf16ps(3, 4, 5);
    }
  }
  _tile_stored(0, result, 64);
  _tile_release();
  amx::memory_barrier();
  *sink = result[0];
}
#endif

struct Probe {
  MultiplyAddKind kind;
  const char* instruction;
  void (*run)(uint64_t, volatile float*);
  double multiply_adds_per_iteration;
};

std::vector<Probe> available_probes() {
  std::vector<Probe> probes;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f"))
    probes.push_back({MultiplyAddKind::Fp32Fma, "vfmadd231ps zmm", fp32_fma_zmm, kZmmFp32PerIteration});
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    probes.push_back({MultiplyAddKind::Fp32Fma, "vfmadd231ps ymm", fp32_fma_ymm, kYmmFp32PerIteration});
  else
    probes.push_back({MultiplyAddKind::Fp32Fma, "mulss + addss (scalar)", fp32_scalar, kScalarFp32PerIteration});
  if (__builtin_cpu_supports("avx512bf16"))
    probes.push_back({MultiplyAddKind::Bf16Dot, "vdpbf16ps zmm", bf16_dot_zmm, kBf16PerIteration});
  if (__builtin_cpu_supports("avx512vnni"))
    probes.push_back({MultiplyAddKind::Int8Dot, "vpdpbusd zmm", int8_dot_zmm, kInt8PerIteration});
  if (amx::supported())
    probes.push_back({MultiplyAddKind::AmxBf16, "tdpbf16ps tmm", amx_tiles<false>, kAmxBf16PerIteration});
  if (amx::int8_supported())
    probes.push_back({MultiplyAddKind::AmxInt8, "tdpbssd tmm", amx_tiles<true>, kAmxInt8PerIteration});
#elif defined(__aarch64__)
  probes.push_back({MultiplyAddKind::Fp32Fma, "fmla v.4s", fp32_fma_neon, kNeonFp32PerIteration});
#else
  probes.push_back({MultiplyAddKind::Fp32Fma, "scalar multiply + add", fp32_scalar, kScalarFp32PerIteration});
#endif
  return probes;
}

// Seconds for every pool thread to run `iterations` of the probe at once.
double time_on_all_threads(ThreadPool& pool, const Probe& probe, uint64_t iterations, std::vector<float>& sinks) {
  const auto start = Clock::now();
  pool.parallel_for(pool.size(), [&](size_t thread, size_t, size_t) {
    probe.run(iterations, static_cast<volatile float*>(&sinks[thread]));
  });
  return seconds_since(start);
}

PeakRate measure(ThreadPool& pool, const Probe& probe, double seconds) {
  std::vector<float> sinks(pool.size());
  // Calibrate the iteration count on a short run (this also wakes the cores up), then keep the
  // best of five runs that share the time budget (the peak: a shared machine only slows runs down).
  uint64_t iterations = 1 << 14;
  double calibration = time_on_all_threads(pool, probe, iterations, sinks);
  while (calibration < 0.005) {
    iterations *= 4;
    calibration = time_on_all_threads(pool, probe, iterations, sinks);
  }
  constexpr int kRuns = 5;
  iterations =
      std::max<uint64_t>(1, static_cast<uint64_t>(static_cast<double>(iterations) * seconds / kRuns / calibration));
  double best = 0;
  for (int run = 0; run < kRuns; ++run) {
    const double elapsed = time_on_all_threads(pool, probe, iterations, sinks);
    const double rate = static_cast<double>(pool.size()) * static_cast<double>(iterations) *
                        probe.multiply_adds_per_iteration / elapsed;
    best = std::max(best, rate);
  }
  return PeakRate{probe.kind, probe.instruction, best};
}

}  // namespace

struct BandwidthProbe::State {
  LargeBuffer buffer;
  size_t lines = 0;
  ThreadPool pool;
  LineSummer summer = best_line_summer();
  std::vector<uint64_t> sums;
  std::vector<double> seconds;

  State(LargeBuffer data, size_t line_count, uint32_t threads)
      : buffer(std::move(data)), lines(line_count), pool(threads), sums(pool.size()) {}
  std::pair<size_t, size_t> part_of(size_t index) const {
    return {lines * index / pool.size(), lines * (index + 1) / pool.size()};
  }
};

BandwidthProbe::BandwidthProbe(std::unique_ptr<State> state) : state_(std::move(state)) {}
BandwidthProbe::~BandwidthProbe() = default;

Expected<std::unique_ptr<BandwidthProbe>> BandwidthProbe::create(uint32_t threads, uint64_t bytes) {
  const size_t lines = bytes / kLineBytes;
  if (lines == 0) return make_error("read_bandwidth: the buffer must hold at least one 64-byte line");
  // On huge pages like the packed weights: the probe reads memory the best way the engine could.
  LargeBuffer data = allocate_large_buffer(lines * kLineBytes);
  if (data == nullptr)
    return make_error("read_bandwidth: cannot allocate " + std::to_string(lines * kLineBytes) + " bytes");
  auto state = std::make_unique<State>(std::move(data), lines, threads);
  // Each thread first writes the part it later reads (page faults here, not in the timing).
  State& s = *state;
  s.pool.parallel_for(s.pool.size(), [&s](size_t thread, size_t, size_t) {
    const auto [begin, end] = s.part_of(thread);
    std::memset(s.buffer.get() + begin * kLineBytes, 1, (end - begin) * kLineBytes);
  });
  return std::unique_ptr<BandwidthProbe>(new BandwidthProbe(std::move(state)));
}

Expected<double> BandwidthProbe::timed_pass() {
  State& s = *state_;
  const auto start = Clock::now();
  s.pool.parallel_for(s.pool.size(), [&s](size_t thread, size_t, size_t) {
    const auto [begin, end] = s.part_of(thread);
    s.sums[thread] = s.summer.sum(s.buffer.get() + begin * kLineBytes, end - begin);
  });
  const double seconds = seconds_since(start);
  s.seconds.push_back(seconds);
  // Every byte is 1, so the sum is known: checking it keeps the loads from being dropped.
  uint64_t total = 0;
  for (uint64_t sum : s.sums) total += sum;
  if (total != uint64_t{0x0101010101010101} * (s.lines * kLineBytes / 8))
    return make_error("read_bandwidth: the summing loop returned a wrong total");
  return seconds;
}

Expected<double> BandwidthProbe::timed_pass_between_runs() {
  constexpr std::chrono::milliseconds kPoolsParked{3};
  std::this_thread::sleep_for(kPoolsParked);
  Expected<double> seconds = timed_pass();
  std::this_thread::sleep_for(kPoolsParked);
  return seconds;
}

BandwidthResult BandwidthProbe::result() const {
  const State& s = *state_;
  BandwidthResult result;
  result.buffer_bytes = s.lines * kLineBytes;
  result.threads = static_cast<uint32_t>(s.pool.size());
  result.passes = static_cast<uint32_t>(s.seconds.size());
  result.instruction = s.summer.instruction;
  if (s.seconds.empty()) return result;
  std::vector<double> seconds = s.seconds;
  std::sort(seconds.begin(), seconds.end());
  const double gb = static_cast<double>(result.buffer_bytes) / 1e9;
  const size_t n = seconds.size();
  const double median_seconds = n % 2 == 1 ? seconds[n / 2] : 0.5 * (seconds[n / 2 - 1] + seconds[n / 2]);
  result.best_gb_per_second = gb / seconds.front();
  result.median_gb_per_second = gb / median_seconds;
  return result;
}

Expected<BandwidthResult> read_bandwidth(BandwidthProbe& probe, uint32_t repeats) {
  if (repeats == 0) return make_error("read_bandwidth: repeats must be at least 1");
  for (uint32_t pass = 0; pass < repeats; ++pass) KIPP_RETURN_IF_ERROR(probe.timed_pass());
  return probe.result();
}

Expected<BandwidthResult> read_bandwidth(uint32_t threads, uint64_t bytes, uint32_t repeats) {
  if (repeats == 0) return make_error("read_bandwidth: repeats must be at least 1");
  KIPP_ASSIGN_OR_RETURN(auto probe, BandwidthProbe::create(threads, bytes));
  return read_bandwidth(*probe, repeats);
}

std::string_view multiply_add_kind_name(MultiplyAddKind kind) {
  switch (kind) {
    case MultiplyAddKind::Fp32Fma: return "fp32_fma";
    case MultiplyAddKind::Bf16Dot: return "bf16_dot";
    case MultiplyAddKind::Int8Dot: return "int8_dot";
    case MultiplyAddKind::AmxBf16: return "amx_bf16";
    case MultiplyAddKind::AmxInt8: return "amx_int8";
  }
  return "unknown";
}

std::vector<PeakRate> peak_multiply_add(uint32_t threads, double seconds_per_probe) {
  ThreadPool pool(threads);
  std::vector<PeakRate> rates;
  for (const Probe& probe : available_probes()) rates.push_back(measure(pool, probe, seconds_per_probe));
  return rates;
}

}  // namespace kipp::kernels
