// `kipp lora merge BASE ADAPTER -o OUT`: fold a LoRA adapter (PEFT layout) into its base and
// write an HF checkpoint folder that `kipp convert` turns into a GGUF.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/model_source.h"
#include "train/lora_merge.h"

namespace kipp::cli {
namespace {

constexpr const char* kMergeFooter = R"(
BASE is the model the adapter was trained on: a registry name (the folder `kipp pull` made), an
HF checkpoint folder or a GGUF (Q8_0 / affine4 are dequantized: a QLoRA base). ADAPTER is a PEFT
LoRA folder (adapter_config.json + adapter_model.safetensors): the `adapter` folder of a kipp
LoRA run, one of its checkpoints, or one PEFT saved. Every targeted projection becomes
W0 + (lora_alpha / r) * B A; model.safetensors keeps the base folder's dtype (BF16 for a GGUF
base). The tokenizer files come from the base folder, else the adapter folder, else --tokenizer.

Examples:
  kipp lora merge Qwen/Qwen3-0.6B runs/lora/adapter -o merged
  kipp convert merged merged.gguf
  kipp generate merged.gguf -p "Hello")";

struct MergeArgs {
  std::string base, adapter, output, tokenizer;
};

int run_merge(const MergeArgs& args) {
  auto base = open_model_source("BASE", args.base);
  if (!base) return fail(base.message());
  train::MergeOptions options;
  options.tokenizer_dir = args.tokenizer;
  options.on_progress = [](const std::string& line) { std::fprintf(stderr, "lora merge: %s\n", line.c_str()); };
  auto summary = train::merge_lora(*base, args.adapter, args.output, options);
  if (!summary) return fail(summary.message());
  std::printf("merged %lu projections of %s into %s (model.safetensors %s, %.1f MB); next: kipp convert %s OUT.gguf\n",
              (unsigned long)summary->merged_tensors, args.adapter.c_str(), args.output.c_str(), summary->dtype.c_str(),
              double(summary->bytes) / 1e6, args.output.c_str());
  return 0;
}

}  // namespace

void register_lora(CLI::App& app, Action& action) {
  auto* lora = app.add_subcommand("lora", "LoRA adapters: merge one into its base model");
  lora->require_subcommand(1);
  auto* merge = lora->add_subcommand("merge", "Fold a LoRA adapter into its base; writes an HF checkpoint folder");
  merge->footer(kMergeFooter);
  auto args = std::make_shared<MergeArgs>();
  merge->add_option("base", args->base, "Base model: registry name, HF folder or GGUF")->required();
  merge->add_option("adapter", args->adapter, "PEFT LoRA adapter folder")->required();
  merge->add_option("-o,--output", args->output, "Output folder (must not exist)")->required();
  merge->add_option("--tokenizer", args->tokenizer, "Folder with tokenizer.json when neither input has one");
  merge->callback([&action, args] { action = [args] { return run_merge(*args); }; });
}

}  // namespace kipp::cli
