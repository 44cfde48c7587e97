// LoRA training-step benchmark: tokens per second, peak RSS and where the time goes for a LoRA
// fine-tune over a frozen base (a GGUF or HF folder). A step is forward and backward over one
// micro-batch of random tokens (fixed seed) with rank-r adapters on all seven projections, then
// AdamW over the adapters. One warm-up step, then --steps timed ones (median). The breakdown
// times the base model's parts alone on random activations of the step's shape, summed over
// the layers: the projections' forward (base through the kernel table, plus adapters), their
// dx = dy W (base dequantized a block of rows at a time, plus adapters), the adapters' weight
// gradients, and the output head's logits and dx = dlogits E over the step's rows.
//
// Usage: lora_bench BASE [--rank 16] [--batch 4] [--seq 256] [--steps 3] [--precision fp32|bf16] [--recompute]
//        [--json]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench_common.h"
#include "core/process_stats.h"
#include "kernels/cpu/kernels.h"
#include "train/adamw.h"
#include "train/frozen_base.h"
#include "train/init_source.h"
#include "train/lora.h"
#include "train/model_weights.h"
#include "train/training_model.h"

namespace {

using namespace kipp;
using namespace kipp::train;
using kipp::bench::Clock;
using kipp::bench::median;
using kipp::bench::must;
using kipp::bench::seconds_since;

constexpr const char* kProgram = "lora_bench";

double mib(uint64_t bytes) { return double(bytes) / 1048576.0; }

double peak_rss_mib() {
  auto memory = read_process_memory();
  return memory.ok() ? mib(memory->peak_rss_bytes) : 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) kipp::bench::die(kProgram, "usage: lora_bench BASE [--rank 16] [--batch 4] [--seq 256] [--steps 3]");
  const std::string source = argv[1];
  uint32_t rank = 16, batch = 4, seq = 256, steps = 3;
  bool recompute = false, json = false;
  Precision precision = Precision::Fp32;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    auto count = [&] {
      return uint32_t(kipp::bench::parse_count(kProgram, kipp::bench::option_value(kProgram, argc, argv, i), arg));
    };
    if (arg == "--rank") {
      rank = count();
    } else if (arg == "--batch") {
      batch = count();
    } else if (arg == "--seq") {
      seq = count();
    } else if (arg == "--steps") {
      steps = count();
    } else if (arg == "--precision") {
      precision = must(parse_precision(kipp::bench::option_value(kProgram, argc, argv, i)), "--precision");
    } else if (arg == "--recompute") {
      recompute = true;
    } else if (arg == "--json") {
      json = true;
    } else {
      kipp::bench::die(kProgram, "unknown option " + arg);
    }
  }
  const InitSource init = must(read_init_source(source, source), "base");
  const auto open_start = Clock::now();
  const std::unique_ptr<FrozenBase> base = must(FrozenBase::open(init.config, source), "base");
  const double open_seconds = seconds_since(open_start);
  const double rss_after_base = peak_rss_mib();
  const LoraOptions options{rank, 2.0 * rank, 0.0, {kAllLoraTargets.begin(), kAllLoraTargets.end()}};
  const AdapterLayout layout(init.config, options);
  std::vector<float> adapters(layout.total()), grads(layout.total());
  init_adapters(layout, 1, adapters);
  std::mt19937 rng(2);
  std::normal_distribution<float> noise(0.0f, 0.01f);
  for (const ParamTensor& t : layout.tensors()) {
    if (t.name.ends_with(".lora_B.weight")) {
      for (uint64_t i = 0; i < t.count; ++i) adapters[t.offset + i] = noise(rng);
    }
  }
  TrainingModelOptions model_options;
  model_options.max_batch = batch;
  model_options.seq_len = seq;
  model_options.recompute_blocks = recompute;
  model_options.precision = precision;
  auto model = must(TrainingModel::create_lora(*base, layout, model_options), "model");
  AdamW optimizer(layout.tensors(), AdamWOptions{});

  const size_t rows = size_t{batch} * seq;
  std::vector<int32_t> inputs(rows), targets(rows);
  std::uniform_int_distribution<int32_t> id(0, int32_t(init.config.vocab_size) - 1);
  for (size_t i = 0; i < rows; ++i) {
    inputs[i] = id(rng);
    targets[i] = id(rng);
  }
  std::vector<double> times;
  for (uint32_t step = 0; step <= steps; ++step) {
    const auto start = Clock::now();
    std::fill(grads.begin(), grads.end(), 0.0f);
    must(model->forward_backward(adapters, {inputs, targets, batch, seq, step}, 1.0f / float(rows), grads), "step");
    optimizer.step(adapters, grads, 1e-4);
    if (step > 0) times.push_back(seconds_since(start));
  }
  const double step_seconds = median(times);
  const double rss_peak = peak_rss_mib();

  // The parts, summed over the layers, on random activations.
  const ModelConfig& c = init.config;
  auto weights =
      must(make_lora_weights(*base, layout, must(make_linear_products(precision), "products"), rows), "weights");
  weights->begin({adapters.data(), grads.data(), true, 0});
  const size_t widest =
      std::max<size_t>({c.hidden_size, 2 * size_t{c.ffn_size}, c.q_width() + 2 * size_t{c.kv_width()}});
  std::vector<float> x(rows * widest), y(rows * widest), head_in(256 * c.hidden_size),
      logits(256 * size_t{c.vocab_size}), dx(256 * c.hidden_size);
  for (float& v : x) v = noise(rng);
  for (float& v : head_in) v = noise(rng);
  const Block blocks[] = {Block::Qkv, Block::O, Block::GateUp, Block::Down};
  double forward = 0, backward_input = 0, backward_weights = 0;
  for (size_t l = 0; l < c.num_layers; ++l) {
    for (Block b : blocks) {
      auto start = Clock::now();
      weights->forward(l, b, x.data(), rows, b == Block::O || b == Block::Down, y.data());
      forward += seconds_since(start);
      start = Clock::now();
      weights->backward_input(l, b, x.data(), rows, y.data());
      backward_input += seconds_since(start);
      start = Clock::now();
      weights->backward_weights(l, b, x.data(), x.data(), rows);
      backward_weights += seconds_since(start);
    }
  }
  double head_forward = 0, head_backward = 0;
  for (size_t first = 0; first < rows; first += 256) {
    const size_t n = std::min<size_t>(256, rows - first);
    auto start = Clock::now();
    weights->head_forward(head_in.data(), n, logits.data());
    head_forward += seconds_since(start);
    start = Clock::now();
    weights->head_backward(logits.data(), head_in.data(), n, dx.data());
    head_backward += seconds_since(start);
  }

  nlohmann::json result = {{"base", source},
                           {"storage", base->storage()},
                           {"kernels", kernels::cpu_kernels().name},
                           {"rank", rank},
                           {"batch", batch},
                           {"seq_len", seq},
                           {"recompute_blocks", recompute},
                           {"precision", precision_name(precision)},
                           {"adapter_parameters", layout.total()},
                           {"base_mib", mib(base->bytes())},
                           {"workspace_mib", mib(model->workspace_bytes())},
                           {"base_open_s", open_seconds},
                           {"peak_rss_mib_after_base", rss_after_base},
                           {"peak_rss_mib", rss_peak},
                           {"step_s", step_seconds},
                           {"tokens_per_s", double(rows) / step_seconds},
                           {"parts_s",
                            {{"projections_forward", forward},
                             {"projections_dx", backward_input},
                             {"adapter_gradients", backward_weights},
                             {"head_logits", head_forward},
                             {"head_dx", head_backward}}}};
  if (json) {
    std::cout << result.dump() << "\n";
  } else {
    std::cout << result.dump(2) << "\n";
  }
  return 0;
}
