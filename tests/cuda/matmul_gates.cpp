// GPU gates of the CUDA products (kernels/cuda/matmul.h) against the CPU reference on the same
// prepared inputs, for BF16, Q8_0 and affine4 random matrices, every path (decode rows 1..8,
// cuBLASLt and tiled rows above) and every epilogue, each also captured in a CUDA graph and
// replayed (bitwise the direct run); then the BF16 decode bandwidth, printed.
// Exits 77 with "SKIPPED: <why>" where there is no GPU.
//
// Bounds. Input preparation is bitwise. A product differs from kernels::ref::matmul only in the
// order its n float terms are added (n = cols for BF16, whose products are exact in FP32; n =
// blocks for Q8 inputs, whose block terms are computed by the very same operations). Any order
// is within (n - 1) u sum|t| of the exact sum (u = 2^-24), so two orders differ by at most
// 2 (n - 1) u sum|t|: that is the per-element gate, with sum|t| computed here in double. The
// tensor cores are allowed twice that: their FP32 accumulation is not documented to round to
// nearest at every addition. The gate is tight enough to catch any indexing or scaling mistake
// (which changes a result by a fraction of sum|t| / sqrt(n), orders of magnitude more). The
// NMSE is gated too, at 1e-9 (BF16) and 1e-10 (quantized): random-sign sums carry relative
// errors of about u sqrt(n) ~ 3e-6 (NMSE ~1e-11) at n = 3072, and far less over 96 blocks. The
// tiled quantized path adds its blocks in the reference's own order: it must match bit for bit
// (Store and Accumulate; SwiGlu's expf may differ from the host's by an ulp).
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "core/half.h"
#include "format/quant.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/matmul_math.h"
#include "kernels/cuda/matmul_plan.h"
#include "kernels/ref/ops.h"

namespace {

using kipp::GgmlType;
using kipp::cuda::Epilogue;
using kipp::kernels::InputFormat;

int g_checks = 0, g_failures = 0;

void report(bool passed, const std::string& line) {
  ++g_checks;
  if (!passed) ++g_failures;
  std::printf("%s %s\n", passed ? "PASS" : "FAIL", line.c_str());
  std::fflush(stdout);
}

void cuda_or_die(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return;
  std::printf("FAIL %s: %s\n", what, cudaGetErrorString(error));
  std::exit(1);
}

// Device memory freed at scope exit.
template <typename T>
struct DeviceBuffer {
  T* data = nullptr;
  explicit DeviceBuffer(size_t count) {
    cuda_or_die(cudaMalloc(&data, std::max<size_t>(count, 1) * sizeof(T)), "cudaMalloc");
  }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

template <typename T>
void upload(T* device, const std::vector<T>& host) {
  cuda_or_die(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
}
template <typename T>
std::vector<T> download(const T* device, size_t count) {
  std::vector<T> host(count);
  cuda_or_die(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost), "download");
  return host;
}

const char* type_name(GgmlType type) {
  return type == GgmlType::BF16 ? "bf16" : type == GgmlType::Q8_0 ? "q8_0" : "affine4";
}
const char* epilogue_name(Epilogue e) {
  return e == Epilogue::Store ? "store" : e == Epilogue::Accumulate ? "accumulate" : "swiglu";
}

std::vector<float> normal(size_t count, uint32_t seed, float stddev) {
  std::mt19937 random(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(count);
  for (float& x : v) x = dist(random);
  return v;
}

// A weight matrix in `type`, as a GGUF stores it.
std::vector<uint8_t> encode(GgmlType type, const std::vector<float>& values, size_t rows, size_t cols) {
  std::vector<uint8_t> bytes(rows * kipp::cuda::weight_row_bytes(type, static_cast<uint32_t>(cols)));
  if (type == GgmlType::BF16)
    kipp::f32_to_bf16_row(values.data(), reinterpret_cast<uint16_t*>(bytes.data()), values.size());
  else if (type == GgmlType::Q8_0)
    kipp::quantize_q8_0(values.data(), reinterpret_cast<kipp::BlockQ8_0*>(bytes.data()), values.size());
  else
    kipp::quantize_affine4(values.data(), reinterpret_cast<kipp::BlockAffine4*>(bytes.data()), values.size());
  return bytes;
}

// The CPU's prepared input: storage and view.
struct HostInput {
  std::vector<uint8_t> storage;
  kipp::kernels::PreparedInput view;
};

HostInput prepare_on_cpu(InputFormat format, const std::vector<float>& x, size_t rows, size_t stride, size_t cols) {
  HostInput in;
  in.storage.resize(kipp::kernels::prepared_input_bytes(format, rows, cols) + 16);
  in.view = kipp::kernels::ref::prepare_input(format, x.data(), rows, stride, cols, in.storage.data());
  return in;
}

bool same_bits(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) || (std::isnan(a) && std::isnan(b));
}

// prepare_input on the device against the CPU's, bitwise (NaN against NaN of any payload: the
// device's default NaN is not the host's).
void gate_prepare(const std::string& name, InputFormat format, const std::vector<float>& x, uint32_t rows,
                  uint32_t stride, uint32_t cols) {
  const HostInput cpu = prepare_on_cpu(format, x, rows, stride, cols);
  DeviceBuffer<float> device_x(x.size());
  upload(device_x.data, x);
  DeviceBuffer<uint8_t> storage(kipp::cuda::device_input_bytes(format, rows, cols));
  const kipp::cuda::DeviceInput in = kipp::cuda::device_input_layout(format, rows, cols, storage.data);
  kipp::cuda::prepare_input(device_x.data, stride, in, nullptr);
  cuda_or_die(cudaDeviceSynchronize(), "prepare_input");
  const size_t values = size_t{rows} * cols, blocks = values / 32;
  size_t wrong = 0;
  if (format == InputFormat::BF16) {
    const auto gpu = download(in.bf16, values);
    for (size_t i = 0; i < values; ++i) wrong += gpu[i] != cpu.view.bf16[i];
  } else {
    const auto codes = download(in.q8, values);
    const auto scales = download(in.q8_scale, blocks);
    const auto scaled_sums = download(in.q8_scaled_sum, blocks);
    for (size_t i = 0; i < values; ++i) wrong += codes[i] != cpu.view.q8[i];
    for (size_t b = 0; b < blocks; ++b)
      wrong += !same_bits(scales[b], cpu.view.q8_scale[b]) + !same_bits(scaled_sums[b], cpu.view.q8_scaled_sum[b]);
  }
  report(wrong == 0, "prepare_input " + name + ": " + std::to_string(wrong) + " values differ");
}

// Rows with every edge of the quantizer: zero, subnormal, huge, inf and NaN blocks.
std::vector<float> special_values(size_t rows, size_t cols) {
  std::vector<float> x = normal(rows * cols, 99, 1.0f);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t b = 0; b < rows * cols / 32; ++b) {
    float* block = x.data() + b * 32;
    switch (b % 7) {
      case 0: std::fill(block, block + 32, 0.0f); break;
      case 1:
        for (int i = 0; i < 32; ++i) block[i] *= 1e-40f;
        break;
      case 2:
        for (int i = 0; i < 32; ++i) block[i] *= 1e37f;
        break;
      case 3: block[b % 32] = inf; break;
      case 4: block[b % 32] = -nan; break;
      case 5: block[3] = -inf, block[9] = nan; break;
      default: break;
    }
  }
  return x;
}

// out = w . in on the CPU, split over the host's threads by output rows.
void reference_product(const kipp::kernels::WeightMatrix& w, const kipp::kernels::PreparedInput& in, float* out,
                       size_t stride) {
  const long chunks = static_cast<long>((w.rows + 63) / 64);
#pragma omp parallel for schedule(dynamic)
  for (long c = 0; c < chunks; ++c) {
    kipp::kernels::WeightMatrix part = w;
    const size_t first = static_cast<size_t>(c) * 64;
    part.data = w.data + first * w.row_bytes;
    part.rows = std::min<size_t>(64, w.rows - first);
    kipp::kernels::ref::matmul(part, in, out + first, stride);
  }
}

// sum over the terms of out[r][o] of |term|, in double: the scale of its rounding error.
std::vector<double> term_magnitudes(const kipp::kernels::WeightMatrix& w, const kipp::kernels::PreparedInput& in) {
  namespace math = kipp::cuda::math;
  std::vector<double> sums(in.rows * w.rows);
  const size_t blocks = w.cols / 32;
#pragma omp parallel for schedule(dynamic)
  for (long o = 0; o < static_cast<long>(w.rows); ++o) {
    const uint8_t* row = w.data + static_cast<size_t>(o) * w.row_bytes;
    for (size_t r = 0; r < in.rows; ++r) {
      double sum = 0;
      if (w.type == GgmlType::BF16) {
        const auto* weights = reinterpret_cast<const uint16_t*>(row);
        for (size_t i = 0; i < w.cols; ++i)
          sum += std::fabs(double{kipp::bf16_to_f32(weights[i])} * kipp::bf16_to_f32(in.bf16[r * w.cols + i]));
      } else {
        for (size_t b = 0; b < blocks; ++b) {
          const size_t block_bytes = w.row_bytes / blocks;
          const math::WeightBlock wb = w.type == GgmlType::Q8_0 ? math::load_q8_0(row + b * block_bytes)
                                                                : math::load_affine4(row + b * block_bytes);
          int32_t words[8];
          std::memcpy(words, in.q8 + (r * blocks + b) * 32, sizeof words);
          const int32_t dot = math::block_dot(wb, words);
          const size_t at = r * blocks + b;
          sum += std::fabs(w.type == GgmlType::Q8_0
                               ? math::q8_0_term(wb.scale, in.q8_scale[at], dot)
                               : math::affine4_term(wb.scale, wb.min, in.q8_scale[at], dot, in.q8_scaled_sum[at]));
        }
      }
      sums[r * w.rows + static_cast<size_t>(o)] = sum;
    }
  }
  return sums;
}

// The product of `epilogue` captured in a CUDA graph on a stream of its own and replayed once,
// over `out` reset to `start`: what the backend does with a step shape that ran once directly.
// The error of the capture or the launch, else the outputs.
kipp::Expected<std::vector<float>> graph_replay(kipp::cuda::MatmulContext& context, const kipp::cuda::DeviceMatrix& w,
                                                const kipp::cuda::DeviceMatrix* up, const kipp::cuda::DeviceInput& in,
                                                float* out, const std::vector<float>& start, uint32_t out_stride,
                                                Epilogue epilogue) {
  upload(out, start);
  cudaStream_t stream;
  cuda_or_die(cudaStreamCreate(&stream), "cudaStreamCreate");
  cudaGraph_t graph = nullptr;
  cuda_or_die(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  const kipp::Status status = kipp::cuda::matmul(context, w, up, in, out, out_stride, epilogue, stream);
  const cudaError_t captured = cudaStreamEndCapture(stream, &graph);
  std::string failure = !status.ok()              ? status.message()
                        : captured != cudaSuccess ? std::string("capture: ") + cudaGetErrorString(captured)
                                                  : "";
  if (failure.empty()) {
    cudaGraphExec_t exec = nullptr;
    cudaError_t ran = cudaGraphInstantiate(&exec, graph, 0);
    if (ran == cudaSuccess) ran = cudaGraphLaunch(exec, stream);
    if (ran == cudaSuccess) ran = cudaStreamSynchronize(stream);
    if (ran != cudaSuccess) failure = std::string("replay: ") + cudaGetErrorString(ran);
    if (exec != nullptr) cudaGraphExecDestroy(exec);
  }
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  if (!failure.empty()) return kipp::make_error(failure);
  return download(out, start.size());
}

struct Case {
  GgmlType type;
  uint32_t outputs, cols;
  std::vector<uint32_t> rows;
};

void gate_products(kipp::cuda::MatmulContext& context, const Case& c) {
  const uint32_t outputs = c.outputs, cols = c.cols;
  const std::vector<float> w_values = normal(size_t{outputs} * cols, 1 + outputs + cols, 0.05f);
  const std::vector<float> up_values = normal(size_t{outputs} * cols, 2 + outputs + cols, 0.05f);
  const std::vector<uint8_t> w_bytes = encode(c.type, w_values, outputs, cols);
  const std::vector<uint8_t> up_bytes = encode(c.type, up_values, outputs, cols);
  const auto w_host = kipp::kernels::make_weight_matrix(c.type, w_bytes.data(), outputs, cols);
  const auto up_host = kipp::kernels::make_weight_matrix(c.type, up_bytes.data(), outputs, cols);
  DeviceBuffer<uint8_t> w_device(w_bytes.size()), up_device(up_bytes.size());
  upload(w_device.data, w_bytes);
  upload(up_device.data, up_bytes);
  const uint64_t row_bytes = kipp::cuda::weight_row_bytes(c.type, cols);
  const kipp::cuda::DeviceMatrix w{c.type, w_device.data, outputs, cols, row_bytes};
  const kipp::cuda::DeviceMatrix up{c.type, up_device.data, outputs, cols, row_bytes};
  const InputFormat format = kipp::kernels::input_format(c.type);
  const bool quantized = c.type != GgmlType::BF16;

  for (const uint32_t rows : c.rows) {
    const uint32_t x_stride = cols + 32, out_stride = outputs + 16;
    const std::vector<float> x = normal(size_t{rows} * x_stride, 7 * rows + cols, 1.0f);
    const std::string shape = std::string(type_name(c.type)) + " " + std::to_string(outputs) + "x" +
                              std::to_string(cols) + " rows " + std::to_string(rows);
    gate_prepare(shape, format, x, rows, x_stride, cols);

    const HostInput cpu = prepare_on_cpu(format, x, rows, x_stride, cols);
    std::vector<float> ref_w(size_t{rows} * outputs), ref_up(size_t{rows} * outputs);
    reference_product(w_host, cpu.view, ref_w.data(), outputs);
    reference_product(up_host, cpu.view, ref_up.data(), outputs);
    const std::vector<double> mag_w = term_magnitudes(w_host, cpu.view), mag_up = term_magnitudes(up_host, cpu.view);

    DeviceBuffer<float> device_x(x.size());
    upload(device_x.data, x);
    DeviceBuffer<uint8_t> storage(kipp::cuda::device_input_bytes(format, rows, cols));
    const kipp::cuda::DeviceInput in = kipp::cuda::device_input_layout(format, rows, cols, storage.data);
    kipp::cuda::prepare_input(device_x.data, x_stride, in, nullptr);

    const auto path = kipp::cuda::matmul_path(c.type, rows);
    const double terms = quantized ? cols / 32.0 : cols;
    const double factor = (path == kipp::cuda::MatmulPath::Bf16Cublas ? 4.0 : 2.0) * (terms - 1) * 0x1p-24;
    const bool bitwise_path = path == kipp::cuda::MatmulPath::QuantTiled;
    const std::vector<float> init = normal(size_t{rows} * out_stride, 5 + rows, 1.0f);

    for (const Epilogue epilogue : {Epilogue::Store, Epilogue::Accumulate, Epilogue::SwiGlu}) {
      DeviceBuffer<float> out(size_t{rows} * out_stride);
      std::vector<float> start = init;
      if (epilogue != Epilogue::Accumulate)
        std::fill(start.begin(), start.end(), std::numeric_limits<float>::quiet_NaN());  // unwritten shows
      upload(out.data, start);
      const kipp::Status status = kipp::cuda::matmul(context, w, epilogue == Epilogue::SwiGlu ? &up : nullptr, in,
                                                     out.data, out_stride, epilogue, nullptr);
      const cudaError_t synced = cudaDeviceSynchronize();
      const std::string name = "matmul " + shape + " " + epilogue_name(epilogue);
      if (!status.ok() || synced != cudaSuccess) {
        report(false, name + ": " + (status.ok() ? cudaGetErrorString(synced) : status.message()));
        if (synced != cudaSuccess) std::exit(1);  // the context is lost
        continue;
      }
      const std::vector<float> gpu = download(out.data, start.size());
      const auto replayed = graph_replay(context, w, epilogue == Epilogue::SwiGlu ? &up : nullptr, in, out.data, start,
                                         out_stride, epilogue);
      report(replayed.ok() && std::memcmp(replayed->data(), gpu.data(), gpu.size() * sizeof(float)) == 0,
             name + " captured in a graph" +
                 (replayed.ok() ? ": the replay bitwise the direct run" : ": " + replayed.message()));
      double worst = 0, error2 = 0, ref2 = 0;
      size_t violations = 0, equal = 0, padding = 0;
      for (size_t r = 0; r < rows; ++r) {
        for (size_t o = outputs; o < out_stride; ++o)
          padding += !same_bits(gpu[r * out_stride + o], start[r * out_stride + o]);
        for (size_t o = 0; o < outputs; ++o) {
          const size_t i = r * outputs + o;
          const float g = ref_w[i], u = ref_up[i];
          float expected = g;
          double bound = factor * mag_w[i];
          if (epilogue == Epilogue::Accumulate) {
            // Both sides round start + their sum once: the sums' difference plus two roundings.
            expected = start[r * out_stride + o] + g;
            bound += 3 * 0x1p-24 * std::fabs(expected);
          } else if (epilogue == Epilogue::SwiGlu) {
            kipp::kernels::ref::swiglu(&g, &u, &expected, 1);
            const double silu = g / (1.0 + std::exp(-double{g}));
            const double up_error = factor * mag_up[i];
            // |silu'| < 1.1, so the gate's error moves silu(gate) by at most 1.1 times it; the
            // two sides' exp (expf within 2 ulp, the host's within 1), divide and multiply add
            // at most about 9 units of 2^-24 of the result: 16 are allowed.
            bound = 1.1 * (std::fabs(u) + up_error) * factor * mag_w[i] + std::fabs(silu) * up_error +
                    16 * 0x1p-24 * std::fabs(expected);
          }
          const float value = gpu[r * out_stride + o];
          const double error = std::fabs(double{value} - expected);
          equal += same_bits(value, expected);
          if (!(error <= bound + 1e-30)) ++violations;
          worst = std::max(worst, error / (bound + 1e-30));
          error2 += error * error;
          ref2 += double{expected} * expected;
        }
      }
      const double nmse = ref2 > 0 ? error2 / ref2 : error2;
      const size_t total = size_t{rows} * outputs;
      const bool bitwise_wanted = bitwise_path && epilogue != Epilogue::SwiGlu;
      const bool passed =
          violations == 0 && padding == 0 && nmse <= (quantized ? 1e-10 : 1e-9) && (!bitwise_wanted || equal == total);
      char line[256];
      std::snprintf(line, sizeof line, ": worst error/bound %.3f, NMSE %.2e, %zu/%zu bitwise%s, padding %zu touched",
                    worst, nmse, equal, total, bitwise_wanted ? " (required)" : "", padding);
      report(passed, name + line);
    }
  }
}

// BF16 decode products of one row over `outputs` x `cols`, captured in a CUDA graph (which the
// decode paths promise to allow: that is a check) and timed as graph launches: the median per
// product, as GB/s of weights. The products cycle over enough copies of the matrix that they
// are read from HBM, not from L2.
void time_decode(kipp::cuda::MatmulContext& context, uint32_t outputs, uint32_t cols) {
  constexpr int kProducts = 32, kLaunches = 11;
  const uint64_t row_bytes = kipp::cuda::weight_row_bytes(GgmlType::BF16, cols), matrix_bytes = outputs * row_bytes;
  const uint64_t copies = std::clamp<uint64_t>((uint64_t{256} << 20) / matrix_bytes + 1, 1, kProducts);
  DeviceBuffer<uint8_t> weights(copies * matrix_bytes);
  cuda_or_die(cudaMemset(weights.data, 0x3c, copies * matrix_bytes), "cudaMemset");
  const size_t input_bytes = kipp::cuda::device_input_bytes(InputFormat::BF16, 1, cols);
  DeviceBuffer<uint8_t> storage(input_bytes);
  cuda_or_die(cudaMemset(storage.data, 0x3c, input_bytes), "cudaMemset");
  const kipp::cuda::DeviceInput in = kipp::cuda::device_input_layout(InputFormat::BF16, 1, cols, storage.data);
  DeviceBuffer<float> out(outputs);
  cudaStream_t stream;
  cuda_or_die(cudaStreamCreate(&stream), "cudaStreamCreate");
  cudaGraph_t graph;
  cuda_or_die(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  kipp::Status status;
  for (int k = 0; k < kProducts && status.ok(); ++k) {
    const kipp::cuda::DeviceMatrix w{GgmlType::BF16, weights.data + (k % copies) * matrix_bytes, outputs, cols,
                                     row_bytes};
    status = kipp::cuda::matmul(context, w, nullptr, in, out.data, outputs, Epilogue::Store, stream);
  }
  const cudaError_t captured = cudaStreamEndCapture(stream, &graph);
  const std::string name = "graph capture of " + std::to_string(kProducts) + " bf16 decode products " +
                           std::to_string(outputs) + "x" + std::to_string(cols);
  if (!status.ok() || captured != cudaSuccess) {
    report(false, name + ": " + (status.ok() ? cudaGetErrorString(captured) : status.message()));
    return;
  }
  cudaGraphExec_t exec;
  cuda_or_die(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  cuda_or_die(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");  // warm-up
  cuda_or_die(cudaStreamSynchronize(stream), "graph run");
  report(true, name);
  cudaEvent_t start, stop;
  cuda_or_die(cudaEventCreate(&start), "cudaEventCreate");
  cuda_or_die(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<float> times;
  for (int i = 0; i < kLaunches; ++i) {
    cuda_or_die(cudaEventRecord(start, stream), "cudaEventRecord");
    cuda_or_die(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    cuda_or_die(cudaEventRecord(stop, stream), "cudaEventRecord");
    cuda_or_die(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    cuda_or_die(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  std::sort(times.begin(), times.end());
  const double seconds = times[times.size() / 2] * 1e-3 / kProducts;
  std::printf("TIME bf16 decode 1 row %ux%u: %.2f us per product, %.0f GB/s of weights (median of %d graph runs)\n",
              outputs, cols, seconds * 1e6, static_cast<double>(matrix_bytes) / seconds * 1e-9, kLaunches);
}

}  // namespace

int main() {
  const auto device = kipp::cuda_device_info();
  if (!device.ok()) {
    std::printf("SKIPPED: %s\n", device.message().c_str());
    return 77;
  }
  std::printf("device: %s (sm_%d%d)\n", device->name.c_str(), device->compute_major, device->compute_minor);
  constexpr uint32_t kHeadRows = 151936;
  auto context = kipp::cuda::create_matmul_context(512, kHeadRows, 3072);
  if (!context.ok()) {
    std::printf("FAIL create_matmul_context: %s\n", context.message().c_str());
    return 1;
  }
  gate_prepare("bf16 special values", InputFormat::BF16, special_values(4, 448), 4, 448, 448);
  gate_prepare("q8 special values", InputFormat::Q8, special_values(4, 448), 4, 448, 448);
  for (const GgmlType type : {GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_1}) {
    gate_products(**context, {type, 1024, 1024, {1, 2, 7, 16, 33, 128, 512}});
    gate_products(**context, {type, 3072, 1024, {1, 8, 9, 33, 128}});
    gate_products(**context, {type, 1024, 3072, {1, 7, 33, 128}});
  }
  gate_products(**context, {GgmlType::BF16, kHeadRows, 1024, {1, 9}});
  time_decode(**context, 1024, 3072);
  time_decode(**context, kHeadRows, 1024);
  std::printf("matmul_gates: %d checks, %d failed\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
