#include <cstdio>
#include <cstdlib>
#include <memory>

#include "cli/commands.h"
#include "pull/progress.h"
#include "pull/pull.h"

namespace kipp::cli {
namespace {

constexpr const char* kPullFooter = R"(
A registry ID (`kipp registry` lists them; the name alone, e.g. Qwen3-0.6B, is enough) is
downloaded at its pinned revision, each file verified against the size and SHA-256 the
registry records (and the SHA-256 ETag the Hub sends where the registry has none), then
converted into a GGUF with registry provenance.

--repo OWNER/NAME --revision REV pulls any other repository instead, e.g. your own upload or
a test server. Kipp can only check such files against the sizes and SHA-256 ETags the server
sends, so the manifest says "registry": false and the GGUF gets LOCAL provenance (its full
config and a content hash), never a registry stamp. (--repo naming a registry checkpoint at
its pinned revision is treated as that registry ID.)

Files go to DIR/<file>.part first and move to their final name only once verified; an
interrupted pull resumes from the .part files, and files already present and verified are not
downloaded again. DIR/kipp-pull.json records what was verified.

Environment:
  HF_TOKEN            sent as `Authorization: Bearer ...` (gated or private repositories)
  KIPP_HUB_BASE_URL   the Hub's address (default https://huggingface.co); --base-url wins
  KIPP_MODELS_DIR     where DIR defaults to (default ~/.cache/kipp/models))";

std::string cli_scheme_name(QuantScheme scheme) {
  return scheme == QuantScheme::Affine4 ? "affine4" : std::string(quant_scheme_name(scheme));
}

}  // namespace

void register_pull(CLI::App& app, Action& action) {
  auto* command = app.add_subcommand(
      "pull", "Download a pinned registry checkpoint from the Hugging Face Hub, verify it and convert it to GGUF");
  command->footer(kPullFooter);
  auto options = std::make_shared<PullOptions>();
  auto quant = std::make_shared<std::string>("bf16");
  auto no_convert = std::make_shared<bool>(false);
  command->add_option("ID", options->id, "Registry checkpoint, e.g. Qwen/Qwen3-0.6B or Qwen3-0.6B");
  command->add_option("--repo", options->repository,
                      "Pull this OWNER/NAME instead of a registry ID: verified against the server only, "
                      "converted with local provenance");
  command->add_option("--revision", options->revision, "Commit, tag or branch to pull with --repo");
  command->add_option("--dir", options->dir,
                      "Folder for the downloaded files (default: $KIPP_MODELS_DIR or ~/.cache/kipp/models, then "
                      "OWNER--NAME@REV12)");
  command->add_option("-o,--output", options->output_path,
                      "GGUF file to write (default: DIR/<name>.gguf, DIR/<name>-<quant>.gguf when quantized)");
  command->add_option("--quant", *quant, "Weight format of the seven per-layer projections")
      ->check(CLI::IsMember({"bf16", "q8_0", "affine4"}))
      ->capture_default_str();
  command->add_flag("--no-convert", *no_convert, "Only download and verify; do not write a GGUF");
  command->add_option("--base-url", options->base_url,
                      "Hub address (default: $KIPP_HUB_BASE_URL or https://huggingface.co)");
  command->callback([&action, options, quant, no_convert] {
    action = [options, quant, no_convert] {
      options->scheme = *parse_quant_scheme(*quant);
      options->convert = !*no_convert;
      if (const char* token = std::getenv("HF_TOKEN")) options->hf_token = token;
      auto printer = std::make_shared<ProgressPrinter>(stderr, stream_is_terminal(stderr));
      options->progress = [printer](const DownloadProgress& progress) { printer->update(progress); };
      options->log = [printer](const std::string& line) {
        printer->interrupt();
        std::fprintf(stderr, "pull: %s\n", line.c_str());
      };
      auto result = pull_checkpoint(*options);
      printer->interrupt();
      if (!result.ok()) return fail(result.message());
      const PullReport& report = result.value();
      size_t downloaded = 0;
      uint64_t total_bytes = 0;
      for (const auto& file : report.files) {
        downloaded += file.downloaded ? 1 : 0;
        total_bytes += file.size;
      }
      std::printf("pulled %s@%s into %s: %zu files, %s (%zu downloaded, %zu already verified), %s\n",
                  report.repository.c_str(), report.revision.substr(0, 12).c_str(), report.dir.c_str(),
                  report.files.size(), format_bytes(total_bytes).c_str(), downloaded, report.files.size() - downloaded,
                  report.registry ? "verified against the registry" : "NOT a registry checkpoint (local provenance)");
      if (report.converted) {
        const ConvertReport& converted = *report.converted;
        if (!converted.notes.empty()) std::printf("note: %s\n", converted.notes.c_str());
        std::printf("wrote %s: %llu tensors, %s, scheme %s, provenance %s\n", report.output_path.c_str(),
                    static_cast<unsigned long long>(converted.tensor_count),
                    format_bytes(converted.output_bytes).c_str(), cli_scheme_name(converted.provenance.scheme).c_str(),
                    converted.provenance.kind == ProvenanceKind::Registry
                        ? ("registry " + converted.provenance.repository).c_str()
                        : "local");
      }
      return 0;
    };
  });
}

}  // namespace kipp::cli
