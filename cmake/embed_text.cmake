# Writes OUTPUT: a C++ file defining kipp::embedded_registry_json() returning INPUT's text.
file(READ ${INPUT} KIPP_TEXT)
set(KIPP_DELIM "kipp_embed")
file(WRITE ${OUTPUT} "// Generated from ${INPUT}; do not edit.\n#include <string_view>\nnamespace kipp {\nstd::string_view embedded_registry_json() {\n  static constexpr char text[] = R\"${KIPP_DELIM}(${KIPP_TEXT})${KIPP_DELIM}\";\n  return {text, sizeof(text) - 1};\n}\n}  // namespace kipp\n")
