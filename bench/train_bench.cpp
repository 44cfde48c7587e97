// Training-step benchmark: tokens per second and peak RSS of Kipp's CPU training model on
// one of the training configs (configs/*.yaml supplies the model dimensions). Each step is
// what `kipp train` does per optimizer step with grad_accum 1: zero the gradients, forward and
// backward over one micro-batch of random tokens (fixed seed), clip the gradient norm to 1.0
// and apply AdamW. One warm-up step, then --steps timed steps; the median, min and max are
// reported. Peak RSS is getrusage's ru_maxrss of the whole process.
//
// Usage: train_bench --config configs/tiny.yaml [--vocab 32000] [--seq 256] [--batch 8]
//                    [--steps 5] [--threads 0 (all)] [--recompute] [--json]
// bench/train_vs_torch.py runs it next to PyTorch and writes bench/results/train-cpu.json.
#include <cblas.h>
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench_common.h"
#include "train/adamw.h"
#include "train/parameters.h"
#include "train/train_config.h"
#include "train/training_model.h"

namespace {

using kipp::bench::Clock;
using kipp::bench::median;
using kipp::bench::must;
using kipp::bench::seconds_since;

[[noreturn]] void die(const std::string& message) { kipp::bench::die("train_bench", message); }

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

uint32_t parse_count(const std::string& option, const std::string& text) {
  try {
    size_t used = 0;
    const unsigned long value = std::stoul(text, &used);
    if (used == text.size() && value <= UINT32_MAX) return static_cast<uint32_t>(value);
  } catch (const std::exception&) {
  }
  die(option + ": expected a non-negative integer, got '" + text + "'");
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path;
  uint32_t vocab = 32000, seq = 256, batch = 8, steps = 5, threads = 0;
  bool recompute = false, json_only = false;
  kipp::train::Precision precision = kipp::train::Precision::Fp32;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&] { return kipp::bench::option_value("train_bench", argc, argv, i); };
    if (arg == "--config")
      config_path = value();
    else if (arg == "--vocab")
      vocab = parse_count(arg, value());
    else if (arg == "--seq")
      seq = parse_count(arg, value());
    else if (arg == "--batch")
      batch = parse_count(arg, value());
    else if (arg == "--steps")
      steps = parse_count(arg, value());
    else if (arg == "--threads")
      threads = parse_count(arg, value());
    else if (arg == "--recompute")
      recompute = true;
    else if (arg == "--precision")
      precision = must(kipp::train::parse_precision(value()), "--precision");
    else if (arg == "--json")
      json_only = true;
    else if (arg == "--help" || arg == "-h") {
      std::cout << "usage: train_bench --config configs/X.yaml [--vocab 32000] [--seq 256] [--batch 8] [--steps 5] "
                   "[--threads 0 (all)] [--recompute] [--precision fp32|bf16] [--json]\n";
      return 0;
    } else
      die("unknown argument " + arg);
  }
  if (config_path.empty()) die("--config is required");
  if (vocab < 2 || seq == 0 || batch == 0 || steps == 0) die("--vocab >= 2, --seq, --batch and --steps > 0 needed");

  const int thread_count = threads ? int(threads) : omp_get_num_procs();
  omp_set_num_threads(thread_count);
  openblas_set_num_threads(thread_count);

  // Only the model section matters here; the tokenizer and data keys just have to be present.
  kipp::train::TrainConfig config =
      must(kipp::train::load_train_config(config_path, {"tokenizer=/dev/null", "data.train=[/dev/null]"}),
           "loading " + config_path);
  config.model.dims.vocab_size = vocab;
  config.model.dims.context_length = std::max(config.model.dims.context_length, seq);
  const kipp::ModelConfig model_config = config.model_config(0, 1);
  if (const kipp::Status valid = model_config.validate(); !valid.ok()) die(valid.message());
  const kipp::train::ParameterLayout layout(model_config);

  kipp::train::TrainingModelOptions model_options;
  model_options.max_batch = batch;
  model_options.seq_len = seq;
  model_options.recompute_blocks = recompute;
  model_options.precision = precision;
  std::unique_ptr<kipp::train::TrainingModel> model =
      must(kipp::train::TrainingModel::create(layout, model_options), "creating the training model");

  std::vector<float> params(layout.total()), grads(layout.total());
  kipp::train::init_parameters(layout, config.init(), params);
  kipp::train::AdamW optimizer(layout.tensors(), config.adamw());

  // Random inputs and targets, the same for every run (std::mt19937 is fully specified).
  const size_t tokens = size_t(batch) * seq;
  std::vector<int32_t> inputs(tokens), targets(tokens);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> pick(0, int32_t(vocab - 1));
  for (size_t i = 0; i < tokens; ++i) {
    inputs[i] = pick(rng);
    targets[i] = pick(rng);
  }
  kipp::train::TokenBatch token_batch;
  token_batch.inputs = inputs;
  token_batch.targets = targets;
  token_batch.batch = batch;
  token_batch.seq_len = seq;

  const double lr = 3e-4;
  std::vector<double> step_seconds, losses;
  for (uint32_t step = 0; step <= steps; ++step) {  // step 0 is the warm-up
    const auto start = Clock::now();
    std::fill(grads.begin(), grads.end(), 0.0f);
    const kipp::train::LossSums sums =
        must(model->forward_backward(params, token_batch, 1.0f / float(tokens), grads), "forward_backward");
    kipp::train::clip_gradient_norm(grads, 1.0);
    optimizer.step(params, grads, lr);
    const double seconds = seconds_since(start);
    if (step > 0) step_seconds.push_back(seconds);
    losses.push_back(sums.loss_sum / double(sums.counted));
  }

  std::vector<double> rates;
  for (double s : step_seconds) rates.push_back(double(tokens) / s);
  nlohmann::json result;
  result["implementation"] = "kipp";
  kipp::bench::record_machine_and_command(result, "train_bench", argc, argv);
  result["config"] = config_path;
  result["model"] = {{"vocab", vocab},
                     {"d_model", model_config.hidden_size},
                     {"layers", model_config.num_layers},
                     {"heads", model_config.num_heads},
                     {"kv_heads", model_config.num_kv_heads},
                     {"head_dim", model_config.head_dim},
                     {"d_ff", model_config.ffn_size},
                     {"tied", model_config.tie_embeddings},
                     {"rope_theta", model_config.rope_theta},
                     {"norm_eps", model_config.rms_norm_eps},
                     {"parameters", layout.total()}};
  result["batch"] = batch;
  result["seq"] = seq;
  result["tokens_per_step"] = tokens;
  result["threads"] = thread_count;
  result["recompute_blocks"] = recompute;
  result["precision"] = std::string(kipp::train::precision_name(precision));
  result["timed_steps"] = steps;
  result["step_s_median"] = median(step_seconds);
  result["tokens_per_s_median"] = median(rates);
  result["tokens_per_s_min"] = *std::min_element(rates.begin(), rates.end());
  result["tokens_per_s_max"] = *std::max_element(rates.begin(), rates.end());
  result["peak_rss_mib"] = peak_rss_mib();
  result["workspace_mib"] = double(model->workspace_bytes()) / (1024.0 * 1024.0);
  result["state_mib"] = double(layout.total()) * 4 * sizeof(float) / (1024.0 * 1024.0);  // params, grads, m, v
  result["loss_first"] = losses.front();
  result["loss_last"] = losses.back();
  // --json: one line, for a driver to parse; otherwise indented.
  std::cout << (json_only ? result.dump() : result.dump(2)) << "\n";
  return 0;
}
