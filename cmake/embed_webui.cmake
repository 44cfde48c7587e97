# Writes OUTPUT: a C++ file defining kipp::server::embedded_web_assets(), every *.gz file under
# INPUT_DIR (webui/dist) as {"/path" without .gz, gzip bytes, ETag from the bytes' SHA-256}.
# Pure CMake, so a cross build needs no program run on the build machine.
file(GLOB_RECURSE kipp_files RELATIVE ${INPUT_DIR} ${INPUT_DIR}/*.gz)
list(SORT kipp_files)
set(kipp_arrays "")
set(kipp_table "")
set(kipp_index 0)
foreach(kipp_file IN LISTS kipp_files)
  file(READ ${INPUT_DIR}/${kipp_file} kipp_hex HEX)
  file(SHA256 ${INPUT_DIR}/${kipp_file} kipp_digest)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," kipp_bytes "${kipp_hex}")
  string(REGEX REPLACE "\\.gz$" "" kipp_path "${kipp_file}")
  string(SUBSTRING ${kipp_digest} 0 32 kipp_etag)
  string(APPEND kipp_arrays "const unsigned char asset${kipp_index}[] = {${kipp_bytes}};\n")
  string(APPEND kipp_table
         "      {\"/${kipp_path}\", {reinterpret_cast<const char*>(asset${kipp_index}), sizeof asset${kipp_index}}, \"\\\"${kipp_etag}\\\"\"},\n")
  math(EXPR kipp_index "${kipp_index} + 1")
endforeach()
if(kipp_index EQUAL 0)
  set(kipp_body "  return {};\n")
else()
  set(kipp_body "  static const WebAsset assets[] = {\n${kipp_table}  };\n  return assets;\n")
endif()
file(WRITE ${OUTPUT}
     "// Generated from webui/dist by cmake/embed_webui.cmake; do not edit.\n"
     "#include \"server/web_ui.h\"\n\nnamespace kipp::server {\nnamespace {\n${kipp_arrays}}  // namespace\n\n"
     "std::span<const WebAsset> embedded_web_assets() {\n${kipp_body}}\n\n}  // namespace kipp::server\n")
