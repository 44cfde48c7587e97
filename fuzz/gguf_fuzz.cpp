// libFuzzer target for GgufFile::parse (build with `scripts/fuzz.sh`).
//
// Beyond "no crash, no sanitizer report", it checks properties every accepted input must have:
// tensor views have the declared size, lookups find what the directory lists, and the writer
// reproduces the file: rewriting parses back to the same metadata, shapes and data, and
// rewriting that again is byte-identical.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "format/gguf.h"

namespace {

void check(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = kipp::GgufFile::parse({data, size});
  if (!parsed.ok()) {
    check(parsed.message().rfind("GGUF ", 0) == 0);  // every error says where it happened
    return 0;
  }
  const kipp::GgufFile& file = *parsed;

  size_t described = 0;
  for (const auto& entry : file.metadata()) {
    described += entry.value.describe().size();
    check(file.find(entry.key) == &entry.value);
  }
  uint8_t checksum = 0;
  for (const auto& tensor : file.tensors()) {
    const auto view = file.tensor_data(tensor);
    check(view.size() == tensor.size_bytes);
    for (uint8_t byte : view) checksum = static_cast<uint8_t>(checksum ^ byte);
    check(file.find_tensor(tensor.name) == &tensor);
  }
  volatile size_t sink = described + checksum;
  (void)sink;

  auto rewritten = kipp::reserialize_gguf(file);
  check(rewritten.ok());
  auto reparsed = kipp::GgufFile::parse(*rewritten);
  check(reparsed.ok());
  check(reparsed->alignment() == file.alignment());
  check(reparsed->metadata().size() == file.metadata().size());
  for (size_t i = 0; i < file.metadata().size(); ++i) {
    check(reparsed->metadata()[i].key == file.metadata()[i].key);
    check(reparsed->metadata()[i].value == file.metadata()[i].value);
  }
  check(reparsed->tensors().size() == file.tensors().size());
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const auto& before = file.tensors()[i];
    const auto& after = reparsed->tensors()[i];
    check(after.name == before.name && after.dims == before.dims && after.type == before.type &&
          after.size_bytes == before.size_bytes);
    const auto old_view = file.tensor_data(before);
    const auto new_view = reparsed->tensor_data(after);
    check(std::equal(old_view.begin(), old_view.end(), new_view.begin(), new_view.end()));
  }
  auto again = kipp::reserialize_gguf(*reparsed);
  check(again.ok() && *again == *rewritten);
  return 0;
}
