// libFuzzer target for the Parquet reader (format/parquet.h) and the Parquet dataset source
// (data/parquet_records.cpp); build and run with `scripts/fuzz.sh SECONDS parquet`.
//
// The reader memory-maps a path, so the input goes to a scratch file first. It then does what
// the dataset readers do: lists the columns, streams every string column to its end (one
// column reader each, then all of them row-aligned), and reads the file as records (format
// auto, parquet and alpaca). Errors are expected and ignored; what must never happen is a
// crash, a sanitizer report, or an error that does not say which file it is about.
//
// Note: the mapping's last page is zero-filled past the end of the file, so an overread of up
// to a page there is invisible to ASan; inputs whose size is a multiple of the page size catch
// overreads at the very end (they fault).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/records.h"
#include "format/parquet.h"
#include "fuzz_temp_file.h"

namespace {

void check(bool condition) {
  if (!condition) __builtin_trap();
}

// Bounded like the readers are; small enough that an input claiming a huge page costs little.
constexpr uint64_t kMaxPageBytes = uint64_t{16} << 20;
// Stop after this many values per reader: a tiny file can claim billions of null rows.
constexpr uint64_t kMaxValues = 200000;

volatile size_t g_sink = 0;

void consume(const std::optional<std::string_view>& value) {
  if (value) g_sink = g_sink + value->size() + (value->empty() ? 0 : static_cast<uint8_t>(value->front()));
}

// Reads the file's columns; returns whether to read it as records too: not when its row groups
// claim many rows (RecordReader skips malformed rows, e.g. nulls, inside one next() call, so a
// tiny file whose RLE run claims billions of null rows keeps it busy: by design, not a bug), nor
// when a page is over kMaxPageBytes (the records path allows 1 GiB pages, and an input claiming
// one would spend its time zero-filling the buffer).
bool read_columns(const std::string& path) {
  kipp::parquet::ReadLimits limits;
  limits.max_page_bytes = kMaxPageBytes;
  limits.max_footer_bytes = kMaxPageBytes;
  auto opened = kipp::parquet::ParquetFile::open(path, limits);
  if (!opened.ok()) {
    check(opened.message().find(path) != std::string::npos);
    return false;
  }
  std::shared_ptr<const kipp::parquet::ParquetFile> file = *opened;
  const std::vector<std::string> names = file->column_names();
  check(names.size() == file->columns().size());
  uint64_t total_rows = 0;
  for (const auto& group : file->row_groups()) {
    check(group.chunks.size() == file->row_groups().front().chunks.size());
    total_rows += static_cast<uint64_t>(std::min<int64_t>(group.num_rows, int64_t{1} << 40));
  }
  bool big_page = false;
  std::vector<std::string> strings;
  for (const auto& column : file->columns()) {
    auto found = file->find_column(column.name);
    check(found.ok());
    g_sink = g_sink + column.name.size() + column.leaf_index + kipp::parquet::physical_type_name(column.type).size();
    auto reader = kipp::parquet::StringColumnReader::open(file, column.name);
    if (!reader.ok()) continue;
    if (strings.end() == std::find(strings.begin(), strings.end(), column.name)) strings.push_back(column.name);
    std::optional<std::string_view> value;
    uint64_t values = 0;
    while (values < kMaxValues) {
      auto more = (*reader)->next(value);
      if (!more.ok()) {
        check(more.message().find(path) != std::string::npos);
        // A page over our 16 MiB limit would be read under the records path's default 1 GiB one.
        if (more.message().find("exceeds the limit") != std::string::npos) big_page = true;
        break;
      }
      if (!*more) break;
      consume(value);
      ++values;
    }
    check((*reader)->rows_read() == values);
    g_sink = g_sink + (*reader)->peak_buffer_bytes() + (*reader)->page_stats().data_pages_v1;
  }
  (void)file->find_column("no such column");
  if (strings.empty()) return total_rows <= kMaxValues && !big_page;
  auto rows = kipp::parquet::StringRowReader::open(file, strings);
  if (!rows.ok()) return total_rows <= kMaxValues && !big_page;
  std::vector<std::optional<std::string_view>> row;
  uint64_t count = 0;
  while (count < kMaxValues) {
    auto more = (*rows)->next(row);
    if (!more.ok() || !*more) break;
    check(row.size() == strings.size());
    for (const auto& value : row) consume(value);
    ++count;
  }
  g_sink = g_sink + (*rows)->peak_buffer_bytes();
  return total_rows <= kMaxValues && !big_page;
}

// The dataset side: format detection from the columns, then records, non-strict and strict.
void read_records(const std::string& path, kipp::data::DatasetFormat format, bool strict) {
  kipp::data::DatasetOptions options;
  options.format = format;
  options.strict = strict;
  auto reader =
      kipp::data::RecordReader::open({path}, options, [](const std::string& line) { g_sink = g_sink + line.size(); });
  if (!reader.ok()) return;
  kipp::data::Record record;
  for (uint64_t i = 0; i < kMaxValues; ++i) {
    auto more = (*reader)->next(record);
    if (!more.ok() || !*more) break;
    g_sink = g_sink + record.text.size() + record.messages.size();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = kipp::fuzz::write_temp_file(data, size, ".parquet");
  if (!read_columns(path)) return 0;
  read_records(path, kipp::data::DatasetFormat::Auto, false);
  read_records(path, kipp::data::DatasetFormat::Parquet, true);
  read_records(path, kipp::data::DatasetFormat::Alpaca, false);
  return 0;
}
