// libFuzzer target for the GBNF front end (grammar/grammar.h); build and run with
// `scripts/fuzz.sh SECONDS gbnf`. Any input is a grammar text: compiling must give a grammar or
// an error naming a place, never a crash; a grammar that compiles is walked by a matcher.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "grammar_fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto grammar = kipp::grammar::compile_gbnf(text);
  if (!grammar.ok()) {
    kipp::fuzzing::check(grammar.message().rfind("GBNF", 0) == 0);
    return 0;
  }
  kipp::fuzzing::drive_matcher(*grammar, data, size);
  return 0;
}
