// The Qwen3 tool-call block: one to max_calls calls separated by "\n", each
//   <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
// with the separators ", " and ": " as the chat template writes them, and ARGS compact JSON of
// the tool's parameters schema.
#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/grammar_ir.h"
#include "grammar/json_schema.h"
#include "grammar/json_values.h"

namespace kipp::grammar {

Expected<GrammarPtr> compile_tool_calls(std::span<const ToolSpec> tools, uint32_t max_calls) {
  using B = GrammarBuilder;
  if (tools.empty()) return make_error("tool calls need at least one tool");
  if (max_calls == 0) return make_error("tool calls need max_calls of at least 1");
  GrammarBuilder b;
  JsonRules rules(b);
  const uint32_t call = b.new_rule("tool call");
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (tools[i].name.empty()) return make_error(where + ": the tool has no name");
    uint32_t arguments = 0;
    if (tools[i].parameters_schema.find_first_not_of(" \t\r\n") == std::string::npos) {
      arguments = rules.any_object();
    } else {
      auto compiled = compile_json_schema_into(b, tools[i].parameters_schema);
      if (!compiled.ok()) return make_error(where + " (" + tools[i].name + "): " + compiled.message());
      arguments = *compiled;
    }
    B::Sequence seq;
    b.append_literal(seq, "<tool_call>\n{\"name\": " + nlohmann::json(tools[i].name).dump() + ", \"arguments\": ");
    seq.push_back(B::ref(arguments));
    b.append_literal(seq, "}\n</tool_call>");
    b.add_alternative(call, seq);
  }
  const uint32_t more = b.new_rule("more tool calls");
  B::Sequence next{b.byte('\n'), B::ref(call)};
  b.add_alternative(more, next);
  const uint32_t root = b.sequence_rule("tool calls", {B::ref(call), B::repeat(more, 0, max_calls - 1)});
  auto grammar = b.finish(root);
  if (!grammar.ok()) return make_error("tool calls: " + grammar.message());
  return grammar;
}

}  // namespace kipp::grammar
