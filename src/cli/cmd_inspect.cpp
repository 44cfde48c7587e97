#include <cstdio>

#include "cli/backend_flag.h"
#include "cli/backend_memory.h"
#include "cli/commands.h"
#include "core/mapped_file.h"
#include "model/model.h"
#include "runtime/engine.h"

namespace kipp::cli {
namespace {

std::string dims_text(const std::vector<uint64_t>& dims) {
  std::string out;
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? " x " : "") + std::to_string(dims[i]);
  return out;
}

void print_tensors(const GgufFile& file) {
  std::printf("\n%-32s %-6s %-18s %14s %14s\n", "tensor", "type", "dims (ggml order)", "offset", "bytes");
  for (const auto& tensor : file.tensors()) {
    std::printf("%-32s %-6s %-18s %14llu %14llu\n", tensor.name.c_str(),
                std::string(ggml_type_name(tensor.type)).c_str(), dims_text(tensor.dims).c_str(),
                static_cast<unsigned long long>(tensor.offset), static_cast<unsigned long long>(tensor.size_bytes));
  }
}

void print_metadata(const GgufFile& file) {
  std::printf("\nmetadata (%zu keys):\n", file.metadata().size());
  for (const auto& entry : file.metadata()) {
    std::printf("  %-42s %s\n", entry.key.c_str(), entry.value.describe().c_str());
  }
}

int inspect_raw(const std::string& path, bool show_tensors) {
  auto mapping = MappedFile::open(path);
  if (!mapping.ok()) return fail(mapping.message());
  auto file = GgufFile::parse(mapping->bytes());
  if (!file.ok()) return fail(path + ": " + file.message());
  std::printf("%s: GGUF v%u, %zu metadata keys, %zu tensors, alignment %u, data at %llu (not validated as a model)\n",
              path.c_str(), file->version(), file->metadata().size(), file->tensors().size(), file->alignment(),
              static_cast<unsigned long long>(file->data_offset()));
  print_metadata(*file);
  if (show_tensors) print_tensors(*file);
  return 0;
}

int inspect_model(const std::string& path, bool verify, bool show_tensors, bool show_metadata) {
  auto model = Model::open(path, LoadOptions{.verify_content_hash = verify});
  if (!model.ok()) return fail(model.message());
  const auto& c = model->config();
  const auto& p = model->provenance();
  std::printf("file         %s (%.1f MiB)\n", path.c_str(),
              static_cast<double>(model->file_size()) / (1024.0 * 1024.0));
  if (p.kind == ProvenanceKind::Registry) {
    std::printf("provenance   registry: %s @ %s\n", p.repository.c_str(), p.revision.c_str());
  } else {
    std::printf("provenance   local (config recorded in the file)\n");
  }
  std::printf("variant      %s\n", std::string(variant_name(p.variant)).c_str());
  std::printf("content      %s (%s)\n", p.content_hash.c_str(), verify ? "verified" : "not verified");
  std::printf("quant        %s\n", std::string(quant_scheme_name(p.scheme)).c_str());
  std::printf("dims         hidden %u, layers %u, heads %u (kv %u), head_dim %u, ffn %u, vocab %u\n", c.hidden_size,
              c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim, c.ffn_size, c.vocab_size);
  std::printf("attention    width %llu (q), %llu (kv)\n", static_cast<unsigned long long>(c.q_width()),
              static_cast<unsigned long long>(c.kv_width()));
  std::printf("context      %u tokens, rope theta %.0f, rms eps %g\n", c.context_length, c.rope_theta, c.rms_norm_eps);
  std::printf("embeddings   %s\n", c.tie_embeddings ? "tied (output = token_embd^T)" : "untied (output.weight)");
  std::printf("parameters   %llu\n", static_cast<unsigned long long>(c.parameter_count()));
  std::printf("tokens       bos %u, eos %u, stop", c.bos_token_id, c.eos_token_id);
  for (uint32_t id : p.stop_token_ids) std::printf(" %u", id);
  std::printf("; %zu merges; chat template %s\n", model->tokenizer().merges.size(),
              model->tokenizer().chat_template ? "yes" : "no");
  std::printf("kv cache     %llu bytes per token (BF16 K+V, all layers)\n",
              static_cast<unsigned long long>(c.kv_bytes_per_token()));
  if (p.dropped_tied_lm_head) std::printf("note         source shipped a tied lm_head.weight; dropped at conversion\n");
  if (show_metadata) print_metadata(model->gguf());
  if (show_tensors) print_tensors(model->gguf());
  return 0;
}

// Opens the model on `backend` (the file was verified already, if asked) and prints what the
// backend holds once loaded, before any session.
int inspect_backend(const std::string& path, BackendKind backend) {
  EngineOptions options;
  options.backend = backend;
  options.verify_content_hash = false;
  auto engine = Engine::open(path, options);
  if (!engine.ok()) return fail(engine.message());
  std::printf("\n%s", backend_memory_text((*engine)->backend().memory()).c_str());
  return 0;
}

}  // namespace

void register_inspect(CLI::App& app, Action& action) {
  auto* command = app.add_subcommand("inspect", "Validate a Kipp GGUF and print provenance, dims and tensors");
  auto path = std::make_shared<std::string>();
  auto no_verify = std::make_shared<bool>(false);
  auto no_tensors = std::make_shared<bool>(false);
  auto metadata = std::make_shared<bool>(false);
  auto raw = std::make_shared<bool>(false);
  auto backend = std::make_shared<BackendKind>(BackendKind::Cpu);
  command->add_option("MODEL", *path, "GGUF file")->required();
  command->add_flag("--no-verify", *no_verify, "Skip re-hashing the tensor data against kipp.content_hash");
  command->add_flag("--no-tensors", *no_tensors, "Do not print the tensor table");
  command->add_flag("--metadata", *metadata, "Print every metadata key");
  command->add_flag("--raw", *raw, "Parse the GGUF container only (any GGUF, no model validation)");
  auto* backend_option = add_backend_option(*command, *backend);
  backend_option->description("Also open the model on this backend and print the memory it holds: " +
                              backend_option->get_description());
  backend_option->excludes(command->get_option("--raw"));
  command->callback([&action, path, no_verify, no_tensors, metadata, raw, backend, backend_option] {
    const bool on_backend = backend_option->count() > 0;
    action = [=] {
      if (*raw) return inspect_raw(*path, !*no_tensors);
      const int inspected = inspect_model(*path, !*no_verify, !*no_tensors, *metadata);
      return inspected != 0 || !on_backend ? inspected : inspect_backend(*path, *backend);
    };
  });
}

}  // namespace kipp::cli
