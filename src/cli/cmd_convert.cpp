#include <chrono>
#include <cstdio>

#include "chat/chat_template.h"
#include "cli/commands.h"
#include "convert/converter.h"
#include "core/process_stats.h"

namespace kipp::cli {
namespace {

double peak_rss_mib() {
  const auto memory = read_process_memory();
  return memory ? static_cast<double>(memory->peak_rss_bytes) / (1024.0 * 1024.0) : 0.0;
}

}  // namespace

void register_convert(CLI::App& app, Action& action) {
  auto* command = app.add_subcommand("convert", "Convert a Hugging Face Qwen3 checkpoint folder to a Kipp GGUF");
  auto options = std::make_shared<ConvertOptions>();
  auto quant = std::make_shared<std::string>("bf16");
  auto repository = std::make_shared<std::string>();
  auto revision = std::make_shared<std::string>();
  auto variant = std::make_shared<std::string>();
  auto chat_format = std::make_shared<std::string>();
  command->add_option("HF_DIR", options->input_dir, "Folder with config.json, safetensors and tokenizer files")
      ->required()
      ->check(CLI::ExistingDirectory);
  command->add_option("-o,--output", options->output_path, "GGUF file to write")->required();
  command->add_option("--quant", *quant, "Weight format of the seven per-layer projections")
      ->check(CLI::IsMember({"bf16", "q8_0", "affine4"}))
      ->capture_default_str();
  command->add_option("--repo", *repository,
                      "Registry repository to stamp (e.g. Qwen/Qwen3-0.6B); files must match the registry");
  command->add_option("--revision", *revision, "Pinned revision for --repo");
  command->add_option("--variant", *variant, "Variant of a local model (default: instruct if it has a chat template)")
      ->check(CLI::IsMember({"base", "instruct", "thinking"}));
  command->add_option("--name", options->name, "general.name written into the file");
  std::vector<std::string> format_names;
  for (std::string_view name : chat_format_names()) format_names.emplace_back(name);
  command
      ->add_option("--chat-format", *chat_format,
                   "Chat format a locally trained model uses, recorded as kipp.chat_format")
      ->check(CLI::IsMember(format_names));
  command->callback([&action, options, quant, repository, revision, variant, chat_format] {
    action = [options, quant, repository, revision, variant, chat_format] {
      options->scheme = *parse_quant_scheme(*quant);
      if (!repository->empty()) options->repository = *repository;
      if (!revision->empty()) options->revision = *revision;
      if (!variant->empty()) options->variant = parse_variant(*variant);
      if (!chat_format->empty()) options->chat_format = *chat_format;
      options->progress = [](const std::string& line) { std::fprintf(stderr, "convert: %s\n", line.c_str()); };
      const auto start = std::chrono::steady_clock::now();
      auto result = convert_checkpoint(*options);
      if (!result.ok()) return fail(result.message());
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const auto& report = result.value();
      if (!report.notes.empty()) std::printf("note: %s\n", report.notes.c_str());
      std::printf("wrote %s: %llu tensors, %.1f MiB, scheme %s, provenance %s%s, in %.1f s, peak RSS %.0f MiB\n",
                  options->output_path.c_str(), static_cast<unsigned long long>(report.tensor_count),
                  static_cast<double>(report.output_bytes) / (1024.0 * 1024.0),
                  std::string(quant_scheme_name(report.provenance.scheme)).c_str(),
                  report.provenance.kind == ProvenanceKind::Registry ? "registry " : "local",
                  report.provenance.kind == ProvenanceKind::Registry ? report.provenance.repository.c_str() : "",
                  seconds, peak_rss_mib());
      return 0;
    };
  });
}

}  // namespace kipp::cli
