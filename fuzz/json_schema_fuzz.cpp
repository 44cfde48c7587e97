// libFuzzer target for the JSON Schema compiler (grammar/grammar.h); build and run with
// `scripts/fuzz.sh SECONDS json_schema`. Any input is a schema text: compiling must give a
// grammar or an error, never a crash; a grammar that compiles is walked by a matcher.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "grammar_fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto grammar = kipp::grammar::compile_json_schema(text);
  if (!grammar.ok()) {
    kipp::fuzzing::check(!grammar.message().empty());
    return 0;
  }
  kipp::fuzzing::drive_matcher(*grammar, data, size);
  return 0;
}
