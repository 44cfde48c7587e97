// `kipp train`: train a Qwen3-architecture model from a YAML config, resume a run, or start
// from existing weights; `kipp average`: the element-wise mean of checkpoints.
#include <signal.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_source.h"
#include "cli/train_dashboard.h"
#include "core/files.h"
#include "core/gpu_stats.h"
#include "train/checkpoint.h"
#include "train/collective.h"
#include "train/init_source.h"
#include "train/train_config.h"
#include "train/train_device.h"
#include "train/trainer.h"
#ifdef KIPP_HAVE_CUDA
#include "backend/cuda/cuda_device.h"
#include "train/cuda/cuda_training_model.h"
#endif

namespace kipp::cli {
namespace {

constexpr const char* kTrainFooter = R"(
The config is YAML (configs/tiny.yaml, small.yaml, medium.yaml; configs/training.yaml lists
every key with its default). --set overrides any key before validation; the value is YAML,
so lists work. Checkpoints go to RUN_DIR/checkpoints/step-N (RUN_DIR = run.dir), with
RUN_DIR/latest and RUN_DIR/best (lowest validation loss) pointing at them; each is a Hugging
Face folder that `kipp convert` turns into GGUF.

--init starts a new run from a checkpoint's weights: a registry name (the folder `kipp pull`
made), an HF checkpoint folder or a GGUF. Its config fills the model section: leave the model
keys out, or any you give must equal the checkpoint's. Its tokenizer.json is the default
tokenizer.

With train.lora.rank > 0 (configs/lora-qwen3-0.6b.yaml) --init names the frozen base and only
LoRA adapters train (QLoRA with a Q8_0 or affine4 GGUF); checkpoints and RUN_DIR/adapter are
PEFT adapter folders, which `kipp lora merge BASE RUN_DIR/adapter -o DIR` folds into the base.

--resume continues RUN_DIR from `latest` with the config saved there (plus any --set): the
following steps are bitwise those of an uninterrupted run on the same thread count.
Ctrl-C or SIGTERM saves a checkpoint and exits; a second Ctrl-C exits at once.

Under `mpirun -np N` (a build with MPI) the run is data-parallel: each rank reads its share of
every step's windows, gradients are summed across ranks, rank 0 alone writes and shows progress
(docs/SCALING.md).

--device cuda (train.device: cuda) trains on an NVIDIA GPU (BF16 products, FP32 sums; parameters,
gradients and AdamW moments stay on the GPU); checkpoints are the CPU run's, so a run may move
between devices on --resume. Not yet with LoRA or mpirun (docs/TRAINING.md).

Examples:
  kipp train --config configs/tiny.yaml --set tokenizer=tokenizer.json --set data.train=[corpus.txt]
  kipp train --config configs/tiny.yaml --set train.max_steps=20 --set run.dir=runs/try
  kipp train --resume runs/try --set train.max_steps=40
  kipp train --config configs/tiny.yaml --init runs/try/latest --set run.dir=runs/finetune
  mpirun -np 2 kipp train --config configs/tiny.yaml --set train.threads=1 --set run.dir=runs/two
  kipp pull Qwen/Qwen3-0.6B
  kipp train --config configs/finetune-qwen3-0.6b.yaml --init Qwen/Qwen3-0.6B --set data.train=[chats.jsonl]
  kipp convert runs/try/latest -o try.gguf)";

std::atomic<bool> g_stop_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

extern "C" void request_stop(int) { g_stop_requested.store(true); }

// SA_RESETHAND: the first SIGINT/SIGTERM asks for a save and a clean stop; a second one ends
// the process at once.
void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = request_stop;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string resume;
  std::string init;
  uint64_t until_step = 0;
  bool plain = false;
  std::string device;
};

// What this process can tell of the GPU; the probe runs only for a cuda run.
train::GpuProbe probe_gpu() {
  train::GpuProbe probe;
#ifdef KIPP_HAVE_CUDA
  probe.built = true;
  if (auto info = cuda_device_info(); !info) probe.usable = make_error(info.message());
#endif
  return probe;
}

// A GPU run's figures: NVML opened once; where it cannot be, every sample says why. Locked, so
// that the dashboard and the run log can share one reader (and so one peak).
std::function<Expected<GpuSample>()> gpu_sampler() {
  struct Shared {
    std::mutex mutex;
    Expected<GpuStats> stats = GpuStats::open();
  };
  auto shared = std::make_shared<Shared>();
  return [shared]() -> Expected<GpuSample> {
    std::lock_guard lock(shared->mutex);
    if (!shared->stats) return make_error(shared->stats.message());
    return shared->stats->sample();
  };
}

std::string duration_text(double seconds) {
  const auto total = uint64_t(seconds + 0.5);
  char text[32];
  if (total >= 3600) {
    std::snprintf(text, sizeof text, "%luh%02lum", (unsigned long)(total / 3600), (unsigned long)(total / 60 % 60));
  } else {
    std::snprintf(text, sizeof text, "%lum%02lus", (unsigned long)(total / 60), (unsigned long)(total % 60));
  }
  return text;
}

// One rank's part of the run (the whole run outside mpirun). Only rank 0 shows progress and
// the summary; any rank's error names the rank.
int train_as_rank(const TrainArgs& args, train::Collective& processes) {
  const bool shows = processes.rank() == 0;
  auto failed = [&processes](const std::string& message) {
    return fail(processes.size() > 1 ? "rank " + std::to_string(processes.rank()) + ": " + message : message);
  };
  train::TrainRun run;
  run.collective = &processes;
  const std::string config_path = args.resume.empty() ? args.config : args.resume + "/config.yaml";
  if (!args.resume.empty() && !file_exists(config_path)) {
    return failed(file_exists(args.resume + "/trainer_state.json")
                      ? "--resume takes the run folder (run.dir, holding config.yaml and latest), not a checkpoint "
                        "folder; " +
                            args.resume + " is a checkpoint"
                      : "--resume " + args.resume + ": no config.yaml there; is it the run.dir of a kipp train run?");
  }
  std::optional<train::InitSource> init;
  if (!args.init.empty()) {
    auto source = open_model_source("--init", args.init);
    if (!source) return failed(source.message());
    init = std::move(*source);
    run.init_path = init->path;
  }
  auto config = train::load_train_config(config_path, args.overrides, init ? &*init : nullptr);
  if (!config) return failed(config.message());
  if (config->train.device == train::TrainDevice::Cuda) {
    if (Status device = train::check_train_device(*config, processes.size(), probe_gpu()); !device.ok())
      return failed(device.message());
#ifdef KIPP_HAVE_CUDA
    run.device_model = train::cuda::create_cuda_training_model;
#endif
  }
  run.config = std::move(*config);
  if (!args.resume.empty()) {
    run.resume = true;
    run.config.run_dir = args.resume;
  }
  if (args.until_step) run.until_step = args.until_step;

  install_stop_handlers();
  if (!shows) {
    auto summary = train::run_training(run, {}, &g_stop_requested);
    return summary ? 0 : failed(summary.message());
  }
  // The dashboard draws on stderr; the summary below stays on stdout.
  const TerminalMode terminal = detect_terminal(stderr, args.plain);
  DashboardOptions options;
  options.run_name = std::filesystem::path(run.config.run_dir).lexically_normal().filename().string();
  options.run_dir = run.config.run_dir;
  options.interactive = terminal.interactive;
  options.color = terminal.color;
  options.terminal_fd = terminal.fd;
  if (run.config.train.device == train::TrainDevice::Cuda) {
    // One reader for the dashboard and the run log, so both see one peak.
    auto gpu = gpu_sampler();
    options.sample_gpu = gpu;
    run.sample_gpu = gpu;
  }
  TrainDashboard dashboard(std::cerr, std::move(options));

  train::TrainEvents events;
  events.on_message = [&dashboard](const std::string& line) { dashboard.on_message(line); };
  events.on_step = [&dashboard](const train::StepReport& r) { dashboard.on_step(r); };
  events.on_eval = [&dashboard](const train::EvalReport& r) { dashboard.on_eval(r); };
  events.on_sample = [&dashboard](const train::SampleReport& s) { dashboard.on_sample(s); };
  events.on_data_progress = [&dashboard](const data::CacheProgress& p) { dashboard.on_data_progress(p); };
  auto summary = train::run_training(run, events, &g_stop_requested);
  dashboard.finish(!summary ? "failed" : summary->interrupted ? "stopped" : "finished");
  if (!summary) return failed(summary.message());
  std::printf("%s after %lu steps (%lu tokens) in %s; last checkpoint %s\n",
              summary->interrupted ? "stopped" : "finished", (unsigned long)summary->steps,
              (unsigned long)summary->tokens_seen, duration_text(summary->elapsed_seconds).c_str(),
              summary->last_checkpoint.empty() ? "none" : summary->last_checkpoint.c_str());
  if (std::isfinite(summary->final_loss)) std::printf("last training loss %.4f\n", summary->final_loss);
  if (std::isfinite(summary->best_val_loss)) {
    std::printf("best validation loss %.4f (perplexity %.2f)\n", summary->best_val_loss,
                std::exp(summary->best_val_loss));
  }
  if (std::isfinite(summary->last_val_loss) && std::isfinite(summary->unigram_baseline)) {
    const double gain = summary->unigram_baseline - summary->last_val_loss;
    std::printf(
        "final validation loss %.4f vs unigram baseline %.4f (%s)\n", summary->last_val_loss, summary->unigram_baseline,
        gain > 0 ? (std::to_string(gain).substr(0, 4) + " nats per token below it: the model uses context").c_str()
                 : "not below it yet: the model has learnt no more than token frequencies");
  }
  return 0;
}

int run_train(const TrainArgs& args) {
  auto processes = train::open_collective();
  if (!processes) return fail(processes.message());
  const int status = train_as_rank(args, **processes);
  // The other ranks may be waiting for this one in a sum: stop them all. Checkpoints are written
  // atomically, so the last complete one stays.
  if (status != 0 && (*processes)->size() > 1) (*processes)->abort(status);
  return status;
}

}  // namespace

void register_train(CLI::App& app, Action& action) {
  auto* command = app.add_subcommand("train", "Train a Qwen3-architecture model from a YAML config");
  command->footer(kTrainFooter);
  auto args = std::make_shared<TrainArgs>();
  auto* config_option = command->add_option("-c,--config", args->config, "Training config (YAML)");
  command->add_option("--set", args->overrides, "Override a config key: section.key=value (repeatable)");
  auto* resume_option = command->add_option("--resume", args->resume, "Continue the run in this folder from 'latest'");
  auto* init_option = command->add_option(
      "--init", args->init,
      "Start from this checkpoint (a registry name such as Qwen/Qwen3-0.6B once pulled, an HF folder or a GGUF); "
      "its config fills the model section");
  command->add_flag("--plain", args->plain,
                    "Plain log lines instead of the live panel (also when stderr is not a terminal or TERM=dumb)");
  command->add_option("--device", args->device, "Where the step runs: cpu or cuda (sets train.device)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  command->add_option("--until-step", args->until_step,
                      "Stop (saving a checkpoint) after this step; the schedule still runs to train.max_steps");
  config_option->excludes(resume_option);
  init_option->excludes(resume_option);
  command->callback([&action, args, config_option, resume_option] {
    if (config_option->count() == 0 && resume_option->count() == 0) {
      action = [] { return fail("train: give --config FILE for a new run or --resume RUN_DIR"); };
      return;
    }
    if (!args->device.empty()) args->overrides.push_back("train.device=" + args->device);
    action = [args] { return run_train(*args); };
  });
}

void register_average(CLI::App& app, Action& action) {
  auto* command =
      app.add_subcommand("average", "Average the weights of checkpoints of one model into a new checkpoint");
  command->footer(R"(
The output is a Hugging Face folder (config.json, model.safetensors, tokenizer) without
optimizer state; `kipp convert` turns it into GGUF.

Example:
  kipp average runs/try/checkpoints/step-00000400 runs/try/checkpoints/step-00000600 -o runs/try/avg)");
  auto inputs = std::make_shared<std::vector<std::string>>();
  auto output = std::make_shared<std::string>();
  command->add_option("checkpoints", *inputs, "Checkpoint folders (two or more)")->required()->expected(2, -1);
  command->add_option("-o,--output", *output, "Output folder (must not exist)")->required();
  command->callback([&action, inputs, output] {
    action = [inputs, output] {
      const Status status = train::average_checkpoints(*inputs, *output);
      if (!status) return fail(status.message());
      std::printf("averaged %zu checkpoints into %s\n", inputs->size(), output->c_str());
      return 0;
    };
  });
}

}  // namespace kipp::cli
