#include "cli/bench_report.h"

#include <cstdio>
#include <string>

#include "cli/backend_memory.h"
#include "cli/bench_costs.h"
#include "kernels/cpu/kernels.h"

namespace kipp::cli {
namespace {

// The peak a prefill of `tokens` tokens on `type` weights is held against: the instruction the
// kernel table in use multiplies that type and row count with when this CPU has it, else FP32 FMA.
const kernels::PeakRate* prefill_peak(const std::vector<kernels::PeakRate>& peaks, GgmlType type, uint32_t tokens) {
  const kernels::KernelTable& table = kernels::cpu_kernels();
  const kernels::MultiplyAddKind wanted = projection_multiply_add_kind(
      type, table.bf16_on_tiles, table.int8_on_tiles != nullptr && table.int8_on_tiles(tokens));
  for (const kernels::PeakRate& peak : peaks)
    if (peak.kind == wanted) return &peak;
  for (const kernels::PeakRate& peak : peaks)
    if (peak.kind == kernels::MultiplyAddKind::Fp32Fma) return &peak;
  return nullptr;
}

nlohmann::ordered_json spread_json(const RateSpread& spread) {
  return {{"median", spread.median}, {"min", spread.min}, {"max", spread.max}};
}

nlohmann::ordered_json optional_number(std::optional<double> value) {
  return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
}

std::string gigabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f GB", bytes / 1e9);
  return text;
}

std::string mebibytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", bytes / (1 << 20));
  return text;
}

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100 * fraction);
  return text;
}

// The GPU's measured BF16 product rate as a peak: every weight type's prefill is set against it
// (the tensor cores' BF16 rate is the ceiling the card states for dense products).
kernels::PeakRate device_peak(const BenchDevice& device) {
  return {kernels::MultiplyAddKind::Bf16Dot, "cuBLASLt BF16 product, FP32 accumulation",
          device.ceilings.bf16_flops_per_second / 2};
}

struct PrefillFigures {
  double flops = 0;
  double flops_per_second = 0;
  std::optional<kernels::PeakRate> peak;
  std::optional<double> fraction_of_peak;
};

PrefillFigures prefill_figures(const Model& model, const BenchResult& result, const PrefillRun& run) {
  PrefillFigures figures;
  figures.flops = prefill_flops(model, run.tokens);
  figures.flops_per_second = figures.flops * run.tokens_per_second.median / run.tokens;
  if (result.device) {
    figures.peak = device_peak(*result.device);
  } else if (const kernels::PeakRate* peak =
                 prefill_peak(result.peaks, model.weights().layers.front().attn_q.type, run.tokens)) {
    figures.peak = *peak;
  }
  if (figures.peak) figures.fraction_of_peak = figures.flops_per_second / figures.peak->flops_per_second();
  return figures;
}

struct DecodeFigures {
  double weight_bytes = 0;
  double kv_bytes = 0;
  double bytes_per_token = 0;
  double gb_per_second = 0;
  // Against the median and the best of the bandwidth passes taken between the tokens: the
  // median decode rate against the median pass is the like-for-like figure, the best pass
  // catches the host's fastest moment. On a GPU: against the device copy's bytes per second
  // (read + written), the median of its runs; no best pass.
  std::optional<double> bandwidth_fraction;
  std::optional<double> best_pass_fraction;
  // Token by token against the pass just before it (its own bytes: the weights and the K/V of
  // the positions it saw): the host's moments paired, as the batch ratio pairs its steps.
  std::optional<RateSpread> paired_fraction;
};

DecodeFigures decode_figures(const Model& model, const BenchResult& result) {
  DecodeFigures figures;
  figures.weight_bytes = static_cast<double>(decode_weight_bytes(model));
  figures.kv_bytes = decode_kv_bytes(model.config(), result.decode.mean_positions);
  figures.bytes_per_token = figures.weight_bytes + figures.kv_bytes;
  figures.gb_per_second = figures.bytes_per_token * result.decode.tokens_per_second.median / 1e9;
  if (const auto& alongside = result.decode.bandwidth_alongside) {
    figures.bandwidth_fraction = figures.gb_per_second / alongside->median_gb_per_second;
    figures.best_pass_fraction = figures.gb_per_second / alongside->best_gb_per_second;
    const DecodeRun& d = result.decode;
    std::vector<double> fractions;
    for (size_t t = 0; t < d.token_seconds.size() && t < d.pass_gb_per_second.size(); ++t) {
      // Token t (from 0) sits at position prompt + t and attends to prompt + t + 1 positions.
      const double bytes =
          figures.weight_bytes + decode_kv_bytes(model.config(), static_cast<double>(d.prompt_tokens + t + 1));
      fractions.push_back(bytes / d.token_seconds[t] / 1e9 / d.pass_gb_per_second[t]);
    }
    if (!fractions.empty()) figures.paired_fraction = spread_of(std::move(fractions));
  } else if (result.device) {
    figures.bandwidth_fraction = figures.gb_per_second * 1e9 / result.device->ceilings.copy_bytes_per_second;
  }
  return figures;
}

using Json = nlohmann::ordered_json;

Json model_json(const Model& model) {
  const ModelConfig& c = model.config();
  return {{"path", model.path()},
          {"file_bytes", model.file_size()},
          {"quant_scheme", std::string(quant_scheme_name(model.provenance().scheme))},
          {"projection_dtype", std::string(ggml_type_name(model.weights().layers.front().attn_q.type))},
          {"embedding_dtype", std::string(ggml_type_name(model.weights().token_embedding.type))},
          {"output_dtype", std::string(ggml_type_name(model.weights().output.type))},
          {"parameter_count", c.parameter_count()},
          {"config",
           {{"hidden_size", c.hidden_size},
            {"num_layers", c.num_layers},
            {"num_heads", c.num_heads},
            {"num_kv_heads", c.num_kv_heads},
            {"head_dim", c.head_dim},
            {"ffn_size", c.ffn_size},
            {"vocab_size", c.vocab_size},
            {"context_length", c.context_length},
            {"tie_embeddings", c.tie_embeddings}}}};
}

// The machine probes (read bandwidth, peak multiply-add rates); null when they did not run.
Json probes_json(const BenchResult& result) {
  if (!result.bandwidth) return nullptr;
  const kernels::BandwidthResult& bw = *result.bandwidth;
  auto peaks = Json::array();
  for (const kernels::PeakRate& peak : result.peaks)
    peaks.push_back({{"kind", std::string(kernels::multiply_add_kind_name(peak.kind))},
                     {"instruction", peak.instruction},
                     {"multiply_adds_per_second", peak.multiply_adds_per_second},
                     {"flops_per_second", peak.flops_per_second()}});
  return {{"read_bandwidth",
           {{"best_gb_per_second", bw.best_gb_per_second},
            {"median_gb_per_second", bw.median_gb_per_second},
            {"buffer_bytes", bw.buffer_bytes},
            {"passes", bw.passes},
            {"threads", bw.threads},
            {"instruction", bw.instruction}}},
          {"peak_multiply_add", peaks}};
}

// The GPU of a cuda run; null on the CPU.
Json device_json(const BenchResult& result) {
  if (!result.device) return nullptr;
  const BenchDevice& d = *result.device;
  return {{"name", d.info.name},
          {"compute_capability", std::to_string(d.info.compute_major) + "." + std::to_string(d.info.compute_minor)},
          {"multiprocessors", d.info.multiprocessors},
          {"driver_version", d.info.driver_version},
          {"runtime_version", d.info.runtime_version},
          {"total_bytes", d.info.total_bytes},
          {"memory_after_load", backend_memory_json(d.memory_after_load)},
          {"ceilings",
           {{"copy_bytes_per_second", d.ceilings.copy_bytes_per_second},
            {"bf16_flops_per_second", d.ceilings.bf16_flops_per_second}}}};
}

Json batch_json(const BatchRun& batch) {
  return {{"sequences", batch.sequences},
          {"prompt_tokens", batch.prompt_tokens},
          {"steps", batch.steps},
          {"aggregate_tokens_per_second", spread_json(batch.tokens_per_second)},
          {"speedup_vs_single_sequence", batch.speedup.median},
          {"speedup_per_step", spread_json(batch.speedup)}};
}

Json prefill_json(const Model& model, const BenchResult& result) {
  auto prefills = Json::array();
  for (const PrefillRun& run : result.prefills) {
    const PrefillFigures f = prefill_figures(model, result, run);
    prefills.push_back(
        {{"tokens", run.tokens},
         {"repeats", run.repeats},
         {"tokens_per_second", spread_json(run.tokens_per_second)},
         {"flops", f.flops},
         {"flops_per_second", f.flops_per_second},
         {"peak_kind", f.peak ? Json(std::string(kernels::multiply_add_kind_name(f.peak->kind))) : Json(nullptr)},
         {"peak_instruction", f.peak ? Json(f.peak->instruction) : Json(nullptr)},
         {"peak_flops_per_second", f.peak ? Json(f.peak->flops_per_second()) : Json(nullptr)},
         {"fraction_of_peak", optional_number(f.fraction_of_peak)}});
  }
  return prefills;
}

Json decode_json(const Model& model, const BenchResult& result) {
  const DecodeRun& d = result.decode;
  const DecodeFigures f = decode_figures(model, result);
  Json decode = {{"prompt_tokens", d.prompt_tokens},
                 {"generated_tokens", d.generated_tokens},
                 {"tokens_per_second", spread_json(d.tokens_per_second)},
                 {"mean_tokens_per_second", d.mean_tokens_per_second},
                 {"mean_context_positions", d.mean_positions},
                 {"weight_bytes_per_token", f.weight_bytes},
                 {"kv_bytes_read_per_token", f.kv_bytes},
                 {"bytes_per_token", f.bytes_per_token},
                 {"achieved_gb_per_second", f.gb_per_second},
                 {"bandwidth_alongside", nullptr},
                 {"bandwidth_fraction", optional_number(f.bandwidth_fraction)},
                 {"bandwidth_fraction_of_best_pass", optional_number(f.best_pass_fraction)},
                 {"bandwidth_fraction_per_token", f.paired_fraction ? spread_json(*f.paired_fraction) : Json(nullptr)}};
  if (const auto& alongside = d.bandwidth_alongside)
    decode["bandwidth_alongside"] = {{"best_gb_per_second", alongside->best_gb_per_second},
                                     {"median_gb_per_second", alongside->median_gb_per_second},
                                     {"passes", alongside->passes}};
  return decode;
}

}  // namespace

nlohmann::ordered_json bench_json(const Engine& engine, const BenchResult& result) {
  const Model& model = engine.model();
  const ModelConfig& c = model.config();
  Json out;
  out["command"] = result.command;
  out["machine"] = machine_json(result.machine);
  out["model"] = model_json(model);
  const bool on_cpu = !result.device;
  out["engine"] = {{"backend", engine.backend().name()},
                   {"kernels", on_cpu ? kernels::cpu_kernels().name : engine.backend().name()},
                   {"threads", result.threads},
                   {"max_step_tokens", result.max_step_tokens},
                   {"scratch_bytes", engine.backend().memory().scratch_bytes}};
  out["probes"] = probes_json(result);
  out["device"] = device_json(result);
  out["prefill"] = prefill_json(model, result);
  out["decode"] = decode_json(model, result);
  // "batch" is the first --batch size (the field every result has), "batches" all of them.
  out["batch"] = result.batches.empty() ? Json(nullptr) : batch_json(result.batches.front());
  auto batches = Json::array();
  for (const BatchRun& batch : result.batches) batches.push_back(batch_json(batch));
  out["batches"] = std::move(batches);
  out["memory"] = {{"rss_bytes", result.memory.rss_bytes},
                   {"peak_rss_bytes", result.memory.peak_rss_bytes},
                   {"peak_rss_excludes_probes", result.peak_rss_reset || !result.bandwidth},
                   {"kv_bytes_per_token", c.kv_bytes_per_token()},
                   {"kv_bytes_per_session", result.decode.session_kv_bytes},
                   {"kv_session_capacity_positions", result.decode.session_capacity}};
  return out;
}

void print_bench_table(const Engine& engine, const BenchResult& result) {
  const Model& model = engine.model();
  const std::string dtype(ggml_type_name(model.weights().layers.front().attn_q.type));
  std::printf("model     %s (%s projections, %s)\n", model.path().c_str(), dtype.c_str(),
              gigabytes(static_cast<double>(model.file_size())).c_str());
  std::string flags;
  for (const auto& [name, present] : result.machine.flags)
    if (present) flags += " " + name;
  const std::string signature =
      result.machine.cpu_signature.empty() ? std::string() : " (" + result.machine.cpu_signature + ")";
  std::printf("machine   %s%s, %u hardware threads, %.1f GiB;%s\n", result.machine.cpu_model.c_str(), signature.c_str(),
              result.machine.hardware_threads, static_cast<double>(result.machine.memory_bytes) / (1 << 30),
              flags.c_str());
  if (const auto& device = result.device) {
    std::printf("engine    %s backend on %s (compute %d.%d, %d SMs, %.1f GiB; driver %d, runtime %d)\n",
                engine.backend().name(), device->info.name.c_str(), device->info.compute_major,
                device->info.compute_minor, device->info.multiprocessors,
                static_cast<double>(device->info.total_bytes) / (1 << 30), device->info.driver_version,
                device->info.runtime_version);
    std::printf("ceilings  device copy %.1f GB/s (read + written), BF16 product %.1f TFLOP/s\n",
                device->ceilings.copy_bytes_per_second / 1e9, device->ceilings.bf16_flops_per_second / 1e12);
    std::printf("%s", backend_memory_text(device->memory_after_load).c_str());
  } else {
    std::printf("engine    %s backend, kernels %s, %u threads\n", engine.backend().name(), kernels::cpu_kernels().name,
                result.threads);
  }
  if (result.bandwidth) {
    const kernels::BandwidthResult& bw = *result.bandwidth;
    std::printf("bandwidth %.2f GB/s best, %.2f median (read of %s, %u passes, %s)\n", bw.best_gb_per_second,
                bw.median_gb_per_second, mebibytes(static_cast<double>(bw.buffer_bytes)).c_str(), bw.passes,
                bw.instruction.c_str());
    for (const kernels::PeakRate& peak : result.peaks)
      std::printf("peak      %-9s %8.1f GFLOP/s (%s)\n",
                  std::string(kernels::multiply_add_kind_name(peak.kind)).c_str(), peak.flops_per_second() / 1e9,
                  peak.instruction.c_str());
  }
  std::printf("\n%-22s %10s %10s %10s   %s\n", "tokens/s", "median", "min", "max", "against the machine");
  for (const PrefillRun& run : result.prefills) {
    const PrefillFigures f = prefill_figures(model, result, run);
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.1f GFLOP/s", f.flops_per_second / 1e9);
    std::string versus = rate;
    if (f.peak)
      versus += " = " + percent(*f.fraction_of_peak) + " of " +
                std::string(kernels::multiply_add_kind_name(f.peak->kind)) + " peak";
    const std::string label = "prefill " + std::to_string(run.tokens);
    std::printf("%-22s %10.1f %10.1f %10.1f   %s\n", label.c_str(), run.tokens_per_second.median,
                run.tokens_per_second.min, run.tokens_per_second.max, versus.c_str());
  }
  const DecodeRun& d = result.decode;
  const DecodeFigures f = decode_figures(model, result);
  char rate[96];
  std::snprintf(rate, sizeof rate, "%s/token, %.2f GB/s", gigabytes(f.bytes_per_token).c_str(), f.gb_per_second);
  std::string versus = rate;
  if (f.bandwidth_fraction && f.best_pass_fraction)
    versus += " = " + percent(*f.bandwidth_fraction) + " of bandwidth (" + percent(*f.best_pass_fraction) +
              " of the best pass)";
  else if (f.bandwidth_fraction)
    versus += " = " + percent(*f.bandwidth_fraction) + " of the device copy";
  const std::string decode_label =
      "decode " + std::to_string(d.generated_tokens) + " after " + std::to_string(d.prompt_tokens);
  std::printf("%-22s %10.1f %10.1f %10.1f   %s\n", decode_label.c_str(), d.tokens_per_second.median,
              d.tokens_per_second.min, d.tokens_per_second.max, versus.c_str());
  if (const auto& alongside = d.bandwidth_alongside)
    std::printf("%-22s %10.1f %10s %10.1f   GB/s read, one pass before each decode token\n", "  bandwidth alongside",
                alongside->median_gb_per_second, "", alongside->best_gb_per_second);
  if (const auto& paired = f.paired_fraction)
    std::printf("%-22s %10s %10s %10s   %s of bandwidth token by token (median over the pass before; %s-%s)\n",
                "  paired", "", "", "", percent(paired->median).c_str(), percent(paired->min).c_str(),
                percent(paired->max).c_str());
  for (const BatchRun& b : result.batches) {
    char speedup[128];
    std::snprintf(speedup, sizeof speedup,
                  "%.2fx single-sequence decode (median step over the token before; %.2f-%.2f)", b.speedup.median,
                  b.speedup.min, b.speedup.max);
    const std::string label = "batch " + std::to_string(b.sequences) + " x " + std::to_string(b.steps);
    std::printf("%-22s %10.1f %10.1f %10.1f   %s\n", label.c_str(), b.tokens_per_second.median, b.tokens_per_second.min,
                b.tokens_per_second.max, speedup);
  }
  std::printf("\nmemory    RSS %s, peak %s%s; K/V %llu bytes/token, %s per decode session (capacity %u positions)\n",
              mebibytes(static_cast<double>(result.memory.rss_bytes)).c_str(),
              mebibytes(static_cast<double>(result.memory.peak_rss_bytes)).c_str(),
              result.peak_rss_reset || !result.bandwidth ? "" : " (includes the probe buffer)",
              static_cast<unsigned long long>(model.config().kv_bytes_per_token()),
              mebibytes(static_cast<double>(d.session_kv_bytes)).c_str(), d.session_capacity);
}

}  // namespace kipp::cli
