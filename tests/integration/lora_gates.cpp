// Gates of the LoRA training model (a frozen base through the kernel table, FP32 adapters):
//   lora_gates PYTHON LORA_REFERENCE_SCRIPT MODELS_DIR SCRATCH_DIR
// On the tiny synthetic model as a BF16, a Q8_0 and an affine4 GGUF, rank 4, B drawn non-zero
// (PEFT's zero B would leave dA = 0), all seven targets and the subset {q, v, down}:
// (a) the summed loss of one micro-batch and the gradient of every lora_A and lora_B against
//     tools/lora_reference.py (PyTorch autograd on the base dequantized exactly as stored): with
//     the reference kernel table (FP32 activations, as PyTorch) within 1e-5 relative for the loss
//     and 1e-4 of each tensor's largest |gradient|; with a fast table, whose products round the
//     activations first as the engine does (BF16 for a BF16 base: within 2e-3 and 5e-2; Q8 blocks
//     of 32 for a quantized one, the gradient then that of the rounded forward: 5e-3 and 0.15);
// (b) recompute_blocks: loss and gradients bitwise equal to (a).
// On the BF16 base also: B = 0 gives the base's logits (bitwise the same for any set of
// targets, and the full FP32 training model on the dequantized weights within the bound of
// (a)); dropout draws the same masks for the same noise key (bitwise), others for another key,
// and none when evaluating. The same BF16 weights read from the HF folder the GGUF was converted
// from give bitwise the same loss and adapter gradients.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/files.h"
#include "format/safetensors.h"
#include "gate_report.h"
#include "hf_config_text.h"
#include "kernels/cpu/kernels.h"
#include "tensor_compare.h"
#include "train/frozen_base.h"
#include "train/init_source.h"
#include "train/lora.h"
#include "train/parameters.h"
#include "train/training_model.h"

namespace {

using namespace kipp;
using namespace kipp::train;
namespace fs = std::filesystem;

constexpr uint32_t kRank = 4;
constexpr double kAlpha = 8.0;
constexpr uint32_t kBatch = 2, kSeqLen = 24;

struct Tolerances {
  double loss, gradient;
};

Tolerances tolerances(const FrozenBase& base) {
  if (std::string(kernels::cpu_kernels().name) == "reference") return {1e-5, 1e-4};
  if (base.storage() == "bf16") return {2e-3, 5e-2};
  return {5e-3, 0.15};
}

struct Tools {
  std::string python, script;
  fs::path models, scratch;
};

using gates::checks_failed;
using gates::checks_run;
using gates::compare_tensors;
using gates::hf_config_text;
using gates::report;
using gates::scientific;

void random_batch(uint32_t vocab, std::vector<int32_t>& inputs, std::vector<int32_t>& targets) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> id(0, int32_t(vocab) - 1);
  for (uint32_t i = 0; i < kBatch * kSeqLen; ++i) {
    inputs.push_back(id(rng));
    targets.push_back(i % kSeqLen < 3 || rng() % 6 == 0 ? kIgnoreTarget : id(rng));
  }
}

// PEFT's initialization, then B drawn too, so that every gradient is non-zero.
std::vector<float> gate_adapters(const AdapterLayout& layout) {
  std::vector<float> values(layout.total());
  init_adapters(layout, 7, values);
  std::mt19937 rng(13);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  for (const ParamTensor& t : layout.tensors()) {
    if (!t.name.ends_with(".lora_B.weight")) continue;
    for (uint64_t i = 0; i < t.count; ++i) values[t.offset + i] = noise(rng);
  }
  return values;
}

Status save_adapters(const AdapterLayout& layout, std::span<const float> values, const std::string& path) {
  std::vector<SafetensorsWriteTensor> tensors;
  for (const ParamTensor& t : layout.tensors()) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(values.data() + t.offset);
    tensors.push_back({t.name, SafetensorsDtype::F32, t.shape, std::span<const uint8_t>(bytes, t.count * 4)});
  }
  return write_safetensors(path, tensors, {});
}

Status write_batch(const std::string& path, const std::vector<int32_t>& inputs, const std::vector<int32_t>& targets) {
  auto bytes = [](const std::vector<int32_t>& v) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(int32_t));
  };
  const std::vector<uint64_t> shape = {kBatch, kSeqLen};
  return write_safetensors(path, {{"inputs", SafetensorsDtype::I32, shape, bytes(inputs)},
                                  {"targets", SafetensorsDtype::I32, shape, bytes(targets)}});
}

std::unique_ptr<TrainingModel> lora_model(const FrozenBase& base, const AdapterLayout& adapters, bool recompute) {
  TrainingModelOptions options;
  options.max_batch = kBatch;
  options.seq_len = kSeqLen;
  options.recompute_blocks = recompute;
  auto model = TrainingModel::create_lora(base, adapters, options);
  if (!model.ok()) {
    report(false, "create_lora", model.message());
    return nullptr;
  }
  return std::move(*model);
}

void gate_gradients(const Tools& tools, const std::string& label, const FrozenBase& base, const LoraOptions& options,
                    const fs::path& dir) {
  const AdapterLayout layout(base.config(), options);
  const std::vector<float> adapters = gate_adapters(layout);
  std::vector<int32_t> inputs, targets;
  random_batch(base.config().vocab_size, inputs, targets);
  const std::string adapters_path = (dir / (label + "_adapters.safetensors")).string();
  const std::string batch_path = (dir / "batch.safetensors").string();
  const std::string out_path = (dir / (label + "_reference.safetensors")).string();
  Status written = save_adapters(layout, adapters, adapters_path);
  if (written.ok()) written = write_batch(batch_path, inputs, targets);
  if (!written.ok()) return report(false, label + " setup", written.message());
  char alpha[32];
  std::snprintf(alpha, sizeof alpha, "%.17g", options.alpha);
  const std::string command = "OMP_NUM_THREADS=1 '" + tools.python + "' '" + tools.script + "' --config '" +
                              (dir / "config.json").string() + "' --weights '" +
                              (dir / "weights.safetensors").string() + "' --adapters '" + adapters_path + "' --alpha " +
                              alpha + " --batch '" + batch_path + "' --out '" + out_path + "'";
  if (std::system(command.c_str()) != 0) return report(false, label + " reference", "command failed: " + command);
  auto reference = SafetensorsFile::open(out_path);
  if (!reference.ok()) return report(false, label + " reference", reference.message());
  const double ref_loss = std::stod(reference->metadata().at("loss_sum"));
  const uint64_t ref_counted = std::stoull(reference->metadata().at("counted"));

  auto plain = lora_model(base, layout, false);
  auto recompute = lora_model(base, layout, true);
  if (!plain || !recompute) return;
  const TokenBatch batch{inputs, targets, kBatch, kSeqLen, 0};
  std::vector<float> grads(layout.total(), 0.0f), recompute_grads(layout.total(), 0.0f);
  auto sums = plain->forward_backward(adapters, batch, 1.0f, grads);
  auto recompute_sums = recompute->forward_backward(adapters, batch, 1.0f, recompute_grads);
  if (!sums.ok() || !recompute_sums.ok()) {
    return report(false, label + " forward_backward", sums.ok() ? recompute_sums.message() : sums.message());
  }
  const Tolerances bound = tolerances(base);
  const double loss_error = std::fabs(sums->loss_sum - ref_loss) / std::fabs(ref_loss);
  report(loss_error <= bound.loss && sums->counted == ref_counted, label + " loss",
         "kipp " + std::to_string(sums->loss_sum) + ", torch " + std::to_string(ref_loss) + " over " +
             std::to_string(sums->counted) + "/" + std::to_string(ref_counted) + " targets, relative error " +
             scientific(loss_error) + " (bound " + scientific(bound.loss) + ")");
  compare_tensors(label + " adapter gradients", layout.tensors(), grads, *reference, bound.gradient);
  const bool same = recompute_sums->loss_sum == sums->loss_sum &&
                    std::memcmp(grads.data(), recompute_grads.data(), grads.size() * sizeof(float)) == 0;
  report(same, label + " recompute_blocks", same ? "loss and gradients bitwise equal" : "results differ");
}

// B = 0: the base's logits, whatever the adapters' targets and A are.
void gate_zero_b(const FrozenBase& base, const std::vector<float>& dequantized) {
  const ModelConfig& c = base.config();
  std::vector<int32_t> inputs, targets;
  random_batch(c.vocab_size, inputs, targets);
  const size_t count = size_t{kBatch} * kSeqLen * c.vocab_size;
  std::vector<float> all_logits(count), subset_logits(count), full_logits(count);
  const auto zero_b_logits = [&](const std::vector<LoraTarget>& chosen, uint64_t seed, std::vector<float>& out) {
    const AdapterLayout layout(c, {kRank, kAlpha, 0.0, chosen});
    std::vector<float> adapters(layout.total());
    init_adapters(layout, seed, adapters);
    auto model = lora_model(base, layout, false);
    if (!model) return false;
    Status s = model->logits(adapters, inputs, kBatch, kSeqLen, out);
    if (!s.ok()) report(false, "zero B logits", s.message());
    return s.ok();
  };
  if (!zero_b_logits({kAllLoraTargets.begin(), kAllLoraTargets.end()}, 3, all_logits)) return;
  if (!zero_b_logits({LoraTarget::O}, 4, subset_logits)) return;
  const bool same = std::memcmp(all_logits.data(), subset_logits.data(), count * sizeof(float)) == 0;
  report(same, "zero B logits, all targets vs o only", same ? "bitwise equal" : "differ");

  TrainingModelOptions options;
  options.max_batch = kBatch;
  options.seq_len = kSeqLen;
  auto full = TrainingModel::create(ParameterLayout(c), options);
  if (!full.ok()) return report(false, "full model", full.message());
  if (Status s = (*full)->logits(dequantized, inputs, kBatch, kSeqLen, full_logits); !s.ok()) {
    return report(false, "full model logits", s.message());
  }
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < count; ++i) {
    max_ref = std::max(max_ref, std::fabs(double(full_logits[i])));
    const double diff = std::fabs(double(all_logits[i]) - double(full_logits[i]));
    if (!(diff <= max_diff)) max_diff = diff;
  }
  const double relative = max_diff / max_ref;
  const double bound = tolerances(base).gradient;
  report(relative <= bound, "zero B logits vs the full FP32 model on the dequantized base",
         "max |diff| / max |logit| " + scientific(relative) + " (bound " + scientific(bound) + ")");
}

void gate_dropout(const FrozenBase& base) {
  const ModelConfig& c = base.config();
  const AdapterLayout dropped(c, {kRank, kAlpha, 0.3, {kAllLoraTargets.begin(), kAllLoraTargets.end()}});
  const AdapterLayout plain(c, {kRank, kAlpha, 0.0, {kAllLoraTargets.begin(), kAllLoraTargets.end()}});
  const std::vector<float> adapters = gate_adapters(dropped);
  std::vector<int32_t> inputs, targets;
  random_batch(c.vocab_size, inputs, targets);
  auto model = lora_model(base, dropped, false);
  auto plain_model = lora_model(base, plain, false);
  if (!model || !plain_model) return;
  auto run = [&](uint64_t key, std::vector<float>& grads) {
    grads.assign(dropped.total(), 0.0f);
    auto sums = model->forward_backward(adapters, {inputs, targets, kBatch, kSeqLen, key}, 1.0f, grads);
    return sums.ok() ? sums->loss_sum : std::nan("");
  };
  std::vector<float> first, again, other;
  const double loss_first = run(5, first), loss_again = run(5, again), loss_other = run(6, other);
  const bool same = loss_first == loss_again && first == again;
  report(same, "dropout, same noise key", same ? "loss and gradients bitwise equal" : "differ");
  report(loss_other != loss_first && other != first, "dropout, another noise key",
         "loss " + std::to_string(loss_first) + " vs " + std::to_string(loss_other));
  auto eval_dropped = model->evaluate(adapters, {inputs, targets, kBatch, kSeqLen, 5});
  auto eval_plain = plain_model->evaluate(adapters, {inputs, targets, kBatch, kSeqLen, 5});
  const bool no_dropout = eval_dropped.ok() && eval_plain.ok() && eval_dropped->loss_sum == eval_plain->loss_sum;
  report(no_dropout, "dropout off when evaluating", no_dropout ? "loss bitwise equal to dropout 0" : "differs");
}

// One forward_backward of the all-targets adapters over `base`.
bool lora_step(const FrozenBase& base, double& loss, std::vector<float>& grads) {
  const AdapterLayout layout(base.config(), {kRank, kAlpha, 0.0, {kAllLoraTargets.begin(), kAllLoraTargets.end()}});
  const std::vector<float> adapters = gate_adapters(layout);
  std::vector<int32_t> inputs, targets;
  random_batch(base.config().vocab_size, inputs, targets);
  auto model = lora_model(base, layout, false);
  if (!model) return false;
  grads.assign(layout.total(), 0.0f);
  auto sums = model->forward_backward(adapters, {inputs, targets, kBatch, kSeqLen, 0}, 1.0f, grads);
  if (!sums.ok()) report(false, "forward_backward", sums.message());
  loss = sums.ok() ? sums->loss_sum : 0.0;
  return sums.ok();
}

void gate_hf_folder(const fs::path& models) {
  const std::string gguf = (models / "tiny-bf16.gguf").string(), folder = (models / "tiny-hf").string();
  auto source = read_init_source(folder, folder);
  if (!source.ok()) return report(false, "HF folder base", source.message());
  auto from_folder = FrozenBase::open(source->config, folder);
  auto from_gguf = FrozenBase::open(source->config, gguf);
  if (!from_folder.ok() || !from_gguf.ok()) {
    return report(false, "HF folder base", from_folder.ok() ? from_gguf.message() : from_folder.message());
  }
  double folder_loss = 0, gguf_loss = 0;
  std::vector<float> folder_grads, gguf_grads;
  if (!lora_step(**from_folder, folder_loss, folder_grads) || !lora_step(**from_gguf, gguf_loss, gguf_grads)) return;
  const bool same = folder_loss == gguf_loss && folder_grads == gguf_grads;
  report(
      same && (*from_folder)->storage() == "bf16", "HF folder base vs its BF16 GGUF",
      std::string(same ? "loss and gradients bitwise equal" : "differ") + ", stored as " + (*from_folder)->storage());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: lora_gates PYTHON LORA_REFERENCE_SCRIPT MODELS_DIR SCRATCH_DIR\n");
    return 2;
  }
  const Tools tools{argv[1], argv[2], argv[3], argv[4]};
  const auto start = std::chrono::steady_clock::now();
  std::printf("kernel table: %s\n", kernels::cpu_kernels().name);
  for (const char* quant : {"bf16", "q8_0", "affine4"}) {
    const std::string path = (tools.models / ("tiny-" + std::string(quant) + ".gguf")).string();
    const fs::path dir = tools.scratch / quant;
    std::error_code error;
    fs::create_directories(dir, error);
    auto source = read_init_source(path, path);
    if (!source.ok()) {
      report(false, std::string(quant) + " base", source.message());
      continue;
    }
    auto base = FrozenBase::open(source->config, path);
    if (!base.ok()) {
      report(false, std::string(quant) + " base", base.message());
      continue;
    }
    const ParameterLayout layout(source->config);
    std::vector<float> dequantized(layout.total());
    Status written = load_parameters(layout, path, dequantized);
    if (written.ok()) written = write_text_file_atomic((dir / "config.json").string(), hf_config_text(source->config));
    if (written.ok()) written = save_parameters(layout, dequantized, (dir / "weights.safetensors").string());
    if (!written.ok()) {
      report(false, std::string(quant) + " setup", written.message());
      continue;
    }
    std::printf("%s base: %s, %.1f MiB held\n", quant, (*base)->storage().c_str(), double((*base)->bytes()) / 1048576);
    const std::vector<LoraTarget> all(kAllLoraTargets.begin(), kAllLoraTargets.end());
    gate_gradients(tools, std::string(quant) + " all targets", **base, {kRank, kAlpha, 0.0, all}, dir);
    gate_gradients(tools, std::string(quant) + " q,v,down", **base,
                   {kRank, kAlpha, 0.0, {LoraTarget::Q, LoraTarget::V, LoraTarget::Down}}, dir);
    if (std::string(quant) == "bf16") {
      gate_zero_b(**base, dequantized);
      gate_dropout(**base);
    }
  }
  gate_hf_folder(tools.models);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("lora_gates: %d checks, %d failed, %.1f s\n", checks_run, checks_failed, seconds);
  return checks_failed == 0 && checks_run > 0 ? 0 : 1;
}
