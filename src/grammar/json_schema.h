// The JSON Schema front end inside the grammar layer: compiles a schema into an existing
// builder (the tool-call grammar holds one schema per tool) and returns its root rule.
#pragma once

#include <string_view>

#include "grammar/grammar_ir.h"

namespace kipp::grammar {

Expected<uint32_t> compile_json_schema_into(GrammarBuilder& builder, std::string_view schema_json);

}  // namespace kipp::grammar
