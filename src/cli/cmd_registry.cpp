#include <cstdio>

#include "cli/commands.h"
#include "model/registry.h"

namespace kipp::cli {

void register_registry(CLI::App& app, Action& action) {
  auto* command = app.add_subcommand("registry", "List the pinned Qwen3 dense checkpoints Kipp accepts");
  auto verbose = std::make_shared<bool>(false);
  command->add_flag("-v,--verbose", *verbose, "Also list recorded files, checksums and unconfirmed fields");
  command->callback([&action, verbose] {
    action = [verbose] {
      std::printf("%-30s %-9s %-12s %6s %6s %5s %3s %6s %7s %8s %5s\n", "checkpoint", "variant", "revision", "hidden",
                  "layers", "heads", "kv", "ffn", "context", "rope", "tied");
      for (const auto& entry : Registry::builtin().entries()) {
        const auto& c = entry.config;
        std::printf("%-30s %-9s %-12s %6u %6u %5u %3u %6u %7u %8.0f %5s%s\n", entry.id.c_str(),
                    std::string(variant_name(entry.variant)).c_str(), entry.revision.substr(0, 12).c_str(),
                    c.hidden_size, c.num_layers, c.num_heads, c.num_kv_heads, c.ffn_size, c.context_length,
                    c.rope_theta, c.tie_embeddings ? "yes" : "no",
                    entry.unconfirmed.empty() ? "" : "  (has unconfirmed fields)");
        if (!*verbose) continue;
        std::printf("    revision %s, stop tokens", entry.revision.c_str());
        for (uint32_t id : entry.stop_token_ids) std::printf(" %u", id);
        std::printf("\n");
        for (const auto& file : entry.files) {
          std::printf("    %-40s %14s  %s\n", file.name.c_str(),
                      file.size ? std::to_string(*file.size).c_str() : "size ?",
                      file.sha256 ? file.sha256->c_str() : "sha256 ?");
        }
        for (const auto& field : entry.unconfirmed) std::printf("    unconfirmed: %s\n", field.c_str());
        if (!entry.notes.empty()) std::printf("    note: %s\n", entry.notes.c_str());
      }
      return 0;
    };
  });
}

}  // namespace kipp::cli
