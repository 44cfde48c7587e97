// The Parquet reader (format/parquet.h) and ParquetRecordSource (data/records.h).
//
// Two kinds of input:
// - Files independent writers made (tools/parquet_fixtures/make_fixtures.mjs: DuckDB, and
//   arrow-rs through parquet-wasm for DATA_PAGE_V2 pages), in the folder KIPP_PARQUET_FIXTURES
//   names, with the values the writers were given as JSONL sidecars.
//   Unset (the unit binary run alone): those tests skip. Set but a file missing: they fail.
// - Small files built here byte by byte (a Thrift compact writer written from the spec), to
//   reach what DuckDB never writes: REQUIRED columns, DELTA_BYTE_ARRAY, unknown fields from a
//   newer writer, and hostile sizes.
#include <gtest/gtest.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/records.h"
#include "format/parquet.h"

namespace kipp::parquet {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// ---- Fixtures --------------------------------------------------------------------------------

// The path of fixture `name`, or "" when KIPP_PARQUET_FIXTURES is unset.
std::string fixture_path(const std::string& name) {
  const char* dir = std::getenv("KIPP_PARQUET_FIXTURES");
  if (dir == nullptr || *dir == '\0') return {};
  return std::string(dir) + "/" + name;
}

// Skips without KIPP_PARQUET_FIXTURES; fails when it is set and the file is missing.
#define REQUIRE_FIXTURE(var, name)                                                                                    \
  const std::string var = fixture_path(name);                                                                         \
  if (var.empty()) GTEST_SKIP() << "KIPP_PARQUET_FIXTURES is not set (ctest sets it; see tests/cmake/parquet.cmake)"; \
  ASSERT_TRUE(fs::is_regular_file(var)) << var << " is missing (KIPP_PARQUET_FIXTURES is set)"

std::vector<json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) rows.push_back(json::parse(line));
  }
  return rows;
}

std::optional<std::string> expected_value(const json& row, const std::string& key) {
  const json& value = row.at(key);
  if (value.is_null()) return std::nullopt;
  return value.get<std::string>();
}

std::optional<std::string> owned(const std::optional<std::string_view>& value) {
  if (!value) return std::nullopt;
  return std::string(*value);
}

std::string temp_file(const std::string& name) {
  const fs::path dir = fs::path(testing::TempDir()) / "kipp_parquet_test";
  fs::create_directories(dir);
  return (dir / name).string();
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void patch_byte(const std::string& path, size_t offset, uint8_t value) {
  std::fstream file(path, std::ios::binary | std::ios::in | std::ios::out);
  file.seekp(static_cast<std::streamoff>(offset));
  file.put(static_cast<char>(value));
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Reads every value of a string column; the error message when reading fails.
Expected<std::vector<std::optional<std::string>>> read_column(const std::string& path, const std::string& column,
                                                              const ReadLimits& limits = {}) {
  KIPP_ASSIGN_OR_RETURN(auto file, ParquetFile::open(path, limits));
  KIPP_ASSIGN_OR_RETURN(auto reader, StringColumnReader::open(file, column));
  std::vector<std::optional<std::string>> values;
  std::optional<std::string_view> value;
  while (true) {
    KIPP_ASSIGN_OR_RETURN(const bool more, reader->next(value));
    if (!more) break;
    values.push_back(owned(value));
    if (values.size() > file->num_rows() + 1) return make_error("read more rows than the file has");
  }
  return values;
}

// ---- DuckDB fixtures: every codec and page version ---------------------------------------------

struct Variant {
  std::string codec;
  std::string version;
};

void PrintTo(const Variant& variant, std::ostream* out) { *out << variant.codec << " " << variant.version; }

class ParquetCodecTest : public testing::TestWithParam<Variant> {};

TEST_P(ParquetCodecTest, MatchesWhatDuckDbWasGiven) {
  const Variant& variant = GetParam();
  REQUIRE_FIXTURE(path, "text_" + variant.codec + "_" + variant.version + ".parquet");
  REQUIRE_FIXTURE(expected_path, "text.expected.jsonl");
  const std::vector<json> expected = read_jsonl(expected_path);
  ASSERT_EQ(expected.size(), 5000u);

  auto file = ParquetFile::open(path);
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_EQ((*file)->num_rows(), expected.size());
  EXPECT_EQ((*file)->column_names(), (std::vector<std::string>{"id", "text", "category"}));
  EXPECT_GE((*file)->row_groups().size(), 2u);

  auto rows = StringRowReader::open(*file, {"text", "category"});
  ASSERT_TRUE(rows.ok()) << rows.message();
  std::vector<std::optional<std::string_view>> row;
  size_t index = 0, nulls = 0, empties = 0, non_ascii = 0;
  while (true) {
    auto more = (*rows)->next(row);
    ASSERT_TRUE(more.ok()) << more.message();
    if (!*more) break;
    ASSERT_LT(index, expected.size());
    const auto want_text = expected_value(expected[index], "text");
    ASSERT_EQ(owned(row[0]), want_text) << "row " << index + 1;
    ASSERT_EQ(owned(row[1]), expected_value(expected[index], "category")) << "row " << index + 1;
    nulls += !want_text;
    empties += want_text && want_text->empty();
    non_ascii += want_text && std::any_of(want_text->begin(), want_text->end(), [](char c) { return c & 0x80; });
    ++index;
  }
  EXPECT_EQ(index, expected.size());
  // The fixture exercises what it claims to.
  EXPECT_GT(nulls, 100u);
  EXPECT_GT(empties, 100u);
  EXPECT_GT(non_ascii, 100u);

  const PageStats& text = (*rows)->column(0).page_stats();
  const PageStats& category = (*rows)->column(1).page_stats();
  EXPECT_EQ(text.row_groups, (*file)->row_groups().size());
  // DuckDB writes data page v1 either way (DATA_PAGE_V2: ArrowRsDataPageV2EveryCodec, ParquetBuilt);
  // PARQUET_VERSION v2 switches the string encoding to DELTA_LENGTH_BYTE_ARRAY.
  EXPECT_GT(text.data_pages_v1, 0u);
  EXPECT_EQ(text.dictionary_pages, 0u);
  EXPECT_EQ(text.encodings, variant.version == "v1" ? 1u << 0 : 1u << 6) << text.encodings;
  // Low cardinality: a dictionary page per row group.
  EXPECT_GE(category.dictionary_pages, (*file)->row_groups().size());
  EXPECT_NE(category.encodings & ((1u << 2) | (1u << 8)), 0u) << category.encodings;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ParquetCodecTest,
                         testing::Values(Variant{"uncompressed", "v1"}, Variant{"uncompressed", "v2"},
                                         Variant{"snappy", "v1"}, Variant{"snappy", "v2"}, Variant{"gzip", "v1"},
                                         Variant{"gzip", "v2"}, Variant{"zstd", "v1"}, Variant{"zstd", "v2"}),
                         [](const testing::TestParamInfo<Variant>& param_info) {
                           return param_info.param.codec + "_" + param_info.param.version;
                         });

// ---- arrow-rs fixtures: DATA_PAGE_V2 pages, every codec ---------------------------------------

// text_<codec>_arrow_page_v2.parquet: the rows of text.expected.jsonl written by arrow-rs
// (parquet-wasm, WriterVersion V2) in DATA_PAGE_V2 pages only, the strings three times over, one
// column per encoding, and `category` dictionary-encoded; several pages per column chunk.
TEST(ParquetFixtures, ArrowRsDataPageV2EveryCodec) {
  REQUIRE_FIXTURE(expected_path, "text.expected.jsonl");
  const std::vector<json> expected = read_jsonl(expected_path);
  ASSERT_EQ(expected.size(), 5000u);
  // The string columns the test reads, and the one data page encoding each must use.
  const std::vector<std::pair<std::string, uint32_t>> columns = {
      {"text", 1u << 7},               // DELTA_BYTE_ARRAY
      {"text_plain", 1u << 0},         // PLAIN
      {"text_delta_length", 1u << 6},  // DELTA_LENGTH_BYTE_ARRAY
      {"category", 1u << 8},           // RLE_DICTIONARY
  };
  std::vector<std::string> names;
  for (const auto& column : columns) names.push_back(column.first);

  for (const std::string codec : {"uncompressed", "snappy", "gzip", "zstd"}) {
    SCOPED_TRACE(codec);
    REQUIRE_FIXTURE(path, "text_" + codec + "_arrow_page_v2.parquet");
    auto file = ParquetFile::open(path);
    ASSERT_TRUE(file.ok()) << file.message();
    // Written by arrow-rs, not by DuckDB nor by this test.
    EXPECT_EQ((*file)->created_by().rfind("parquet-rs version ", 0), 0u) << (*file)->created_by();
    EXPECT_EQ((*file)->num_rows(), expected.size());
    EXPECT_EQ((*file)->column_names(),
              (std::vector<std::string>{"id", "text", "category", "text_plain", "text_delta_length"}));
    const size_t row_groups = (*file)->row_groups().size();
    EXPECT_GE(row_groups, 2u);
    const int32_t want_codec = codec == "uncompressed" ? 0 : codec == "snappy" ? 1 : codec == "gzip" ? 2 : 6;
    for (const RowGroupMeta& group : (*file)->row_groups()) {
      for (const ColumnChunkMeta& chunk : group.chunks) EXPECT_EQ(chunk.codec, want_codec);
    }

    auto rows = StringRowReader::open(*file, names);
    ASSERT_TRUE(rows.ok()) << rows.message();
    std::vector<std::optional<std::string_view>> row;
    size_t index = 0, nulls = 0, empties = 0, non_ascii = 0;
    while (true) {
      auto more = (*rows)->next(row);
      ASSERT_TRUE(more.ok()) << more.message();
      if (!*more) break;
      ASSERT_LT(index, expected.size());
      const auto want_text = expected_value(expected[index], "text");
      for (size_t i = 0; i < 3; ++i) ASSERT_EQ(owned(row[i]), want_text) << names[i] << " row " << index + 1;
      ASSERT_EQ(owned(row[3]), expected_value(expected[index], "category")) << "row " << index + 1;
      nulls += !want_text;
      empties += want_text && want_text->empty();
      non_ascii += want_text && std::any_of(want_text->begin(), want_text->end(), [](char c) { return c & 0x80; });
      ++index;
    }
    EXPECT_EQ(index, expected.size());
    EXPECT_GT(nulls, 100u);
    EXPECT_GT(empties, 100u);
    EXPECT_GT(non_ascii, 100u);

    // The file is what it claims to be: DATA_PAGE_V2 pages only, several per column chunk for
    // the strings, each column in its encoding; `category` has a dictionary page per chunk.
    for (size_t i = 0; i < columns.size(); ++i) {
      SCOPED_TRACE(columns[i].first);
      const PageStats& stats = (*rows)->column(i).page_stats();
      EXPECT_EQ(stats.row_groups, row_groups);
      EXPECT_EQ(stats.data_pages_v1, 0u);
      EXPECT_GE(stats.data_pages_v2, row_groups);
      if (i < 3) {
        EXPECT_GE(stats.data_pages_v2, 4 * row_groups) << "expected several data pages per column chunk";
        EXPECT_EQ(stats.dictionary_pages, 0u);
      } else {
        EXPECT_EQ(stats.dictionary_pages, row_groups);
      }
      EXPECT_EQ(stats.encodings, columns[i].second) << stats.encodings;
    }
  }
}

// The value make_fixtures.mjs has DuckDB compute for row i of many.parquet (see
// many.expected.json there).
std::optional<std::string> many_value(uint64_t i) {
  if (i % 1000 == 999) return std::nullopt;
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "row %llu %08llx%08llx%04llx", static_cast<unsigned long long>(i),
                static_cast<unsigned long long>(i * 2654435761ull % 4294967296ull),
                static_cast<unsigned long long>((i * 40503ull + 12345ull) % 4294967296ull),
                static_cast<unsigned long long>((i * 97ull + 7ull) % 65536ull));
  return std::string(buffer);
}

TEST(ParquetFixtures, ManyRowGroupsStayWithinOnePageOfMemory) {
  REQUIRE_FIXTURE(path, "many.parquet");
  REQUIRE_FIXTURE(expected_path, "many.expected.json");
  const uint64_t rows = json::parse(std::ifstream(expected_path)).at("rows").get<uint64_t>();
  auto file = ParquetFile::open(path);
  ASSERT_TRUE(file.ok()) << file.message();
  auto reader = StringColumnReader::open(*file, "text");
  ASSERT_TRUE(reader.ok()) << reader.message();
  std::optional<std::string_view> value;
  uint64_t index = 0;
  while (true) {
    auto more = (*reader)->next(value);
    ASSERT_TRUE(more.ok()) << more.message();
    if (!*more) break;
    ASSERT_LT(index, rows);
    ASSERT_EQ(owned(value), many_value(index)) << "row " << index + 1;
    ++index;
  }
  EXPECT_EQ(index, rows);
  const PageStats& stats = (*reader)->page_stats();
  EXPECT_GE(stats.row_groups, 100u);
  EXPECT_GE(stats.data_pages_v1, stats.row_groups);
  // The reader held one page (compressed and decompressed) at a time, not the file.
  const size_t file_size = (*file)->mapping().size();
  EXPECT_GT(file_size, 3u << 20);
  EXPECT_GT((*reader)->peak_buffer_bytes(), 0u);
  EXPECT_LT((*reader)->peak_buffer_bytes(), file_size / 16) << "peak " << (*reader)->peak_buffer_bytes();
}

TEST(ParquetFixtures, NestedColumnsAreListedAndRefused) {
  REQUIRE_FIXTURE(path, "nested.parquet");
  auto file = ParquetFile::open(path);
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_EQ((*file)->column_names(), (std::vector<std::string>{"text", "nested", "tags"}));
  for (const char* column : {"nested", "tags"}) {
    auto reader = StringColumnReader::open(*file, column);
    ASSERT_FALSE(reader.ok()) << column;
    EXPECT_NE(reader.message().find(std::string("\"") + column + "\" is nested"), std::string::npos)
        << reader.message();
  }
  auto values = read_column(path, "text");
  ASSERT_TRUE(values.ok()) << values.message();
  ASSERT_EQ(values->size(), 10u);
  EXPECT_EQ((*values)[9], "flat 9");
}

TEST(ParquetFixtures, NonStringAndMissingColumnsAreErrors) {
  REQUIRE_FIXTURE(path, "text_snappy_v1.parquet");
  auto file = ParquetFile::open(path);
  ASSERT_TRUE(file.ok()) << file.message();
  auto id = StringColumnReader::open(*file, "id");
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.message().find("\"id\" has type INT64, not BYTE_ARRAY"), std::string::npos) << id.message();
  auto missing = StringColumnReader::open(*file, "body");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("no column \"body\" (the file has: \"id\", \"text\", \"category\")"),
            std::string::npos)
      << missing.message();
  EXPECT_EQ(missing.message().rfind(path, 0), 0u) << missing.message();
}

// ---- Malformed files -------------------------------------------------------------------------

// Opens and reads every string column; returns the first error, or "" when all of it read.
// Fails the test when an error does not name the file.
std::string read_everything(const std::string& path) {
  auto file = ParquetFile::open(path);
  if (!file.ok()) {
    EXPECT_EQ(file.message().rfind(path, 0), 0u) << file.message();
    return file.message();
  }
  for (const ColumnInfo& column : (*file)->columns()) {
    if (column.nested || column.type != static_cast<int32_t>(PhysicalType::ByteArray)) continue;
    auto values = read_column(path, column.name);
    if (!values.ok()) {
      EXPECT_EQ(values.message().rfind(path, 0), 0u) << values.message();
      return values.message();
    }
  }
  return {};
}

TEST(ParquetMalformed, TruncatedFilesAreErrors) {
  REQUIRE_FIXTURE(source, "text_snappy_v1.parquet");
  const std::vector<uint8_t> bytes = read_bytes(source);
  const size_t n = bytes.size();
  const std::string path = temp_file("truncated.parquet");
  for (const size_t cut : {size_t{0}, size_t{1}, size_t{4}, size_t{8}, size_t{11}, size_t{12}, n / 3, n / 2, n - 100,
                           n - 9, n - 8, n - 5, n - 4, n - 1}) {
    write_bytes(path, std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(cut)));
    const std::string error = read_everything(path);
    EXPECT_FALSE(error.empty()) << "cut at " << cut;
    if (cut < 12) {
      EXPECT_NE(error.find("too small"), std::string::npos) << error;
    }
  }
}

TEST(ParquetMalformed, ZeroLengthAndWrongMagic) {
  const std::string empty = temp_file("empty.parquet");
  write_bytes(empty, {});
  auto file = ParquetFile::open(empty);
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.message().find(empty + ": not a Parquet file: 0 bytes"), std::string::npos) << file.message();

  const std::string csv = temp_file("not_parquet.parquet");
  const std::string text = "id,text\n1,hello world this is not parquet\n";
  write_bytes(csv, std::vector<uint8_t>(text.begin(), text.end()));
  file = ParquetFile::open(csv);
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.message().find("does not start with the magic \"PAR1\""), std::string::npos) << file.message();

  REQUIRE_FIXTURE(source, "alpaca.parquet");
  std::vector<uint8_t> bytes = read_bytes(source);
  bytes[bytes.size() - 1] = 'X';
  const std::string tail = temp_file("bad_tail.parquet");
  write_bytes(tail, bytes);
  file = ParquetFile::open(tail);
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.message().find("does not end with the magic \"PAR1\""), std::string::npos) << file.message();
}

TEST(ParquetMalformed, FooterLengthBeyondTheFile) {
  REQUIRE_FIXTURE(source, "alpaca.parquet");
  std::vector<uint8_t> bytes = read_bytes(source);
  const size_t at = bytes.size() - 8;
  bytes[at] = 0xff;
  bytes[at + 1] = 0xff;
  bytes[at + 2] = 0xff;
  bytes[at + 3] = 0x7f;
  const std::string path = temp_file("long_footer.parquet");
  write_bytes(path, bytes);
  const std::string error = read_everything(path);
  EXPECT_NE(error.find("footer: its length 2147483647 exceeds the file"), std::string::npos) << error;
}

// Every byte of two small files flipped two ways, and every footer byte of a larger one:
// each read ends in data or one error naming the file, never a crash (run it under ASan).
TEST(ParquetMalformed, FlippedBytesNeverCrash) {
  REQUIRE_FIXTURE(nested, "nested.parquet");
  REQUIRE_FIXTURE(invalid, "invalid_utf8.parquet");
  REQUIRE_FIXTURE(large, "alpaca.parquet");
  const std::string path = temp_file("flipped.parquet");
  size_t errors = 0, footer_errors = 0, footer_flips = 0;
  for (const std::string& source : {nested, invalid, large}) {
    const std::vector<uint8_t> bytes = read_bytes(source);
    const uint32_t footer = static_cast<uint32_t>(bytes[bytes.size() - 8]) | bytes[bytes.size() - 7] << 8 |
                            bytes[bytes.size() - 6] << 16 | static_cast<uint32_t>(bytes[bytes.size() - 5]) << 24;
    ASSERT_LT(footer, bytes.size());
    const size_t footer_start = bytes.size() - 8 - footer;
    const bool small = bytes.size() < 4096;
    write_bytes(path, bytes);  // then patched in place: rewriting whole files is slow on some disks
    for (size_t i = small ? 0 : footer_start; i < bytes.size(); ++i) {
      for (const uint8_t mask : {uint8_t{0x01}, uint8_t{0xff}}) {
        if (!small && mask != 0xff) continue;
        patch_byte(path, i, static_cast<uint8_t>(bytes[i] ^ mask));
        const bool failed = !read_everything(path).empty();
        patch_byte(path, i, bytes[i]);
        errors += failed;
        if (i >= footer_start && i < bytes.size() - 8) {
          ++footer_flips;
          footer_errors += failed;
        }
      }
    }
  }
  // Most footer flips land in field headers, lengths and offsets: they must be caught.
  EXPECT_GT(footer_errors, footer_flips / 4) << footer_errors << " of " << footer_flips;
  EXPECT_GT(errors, 0u);
}

// A few random bytes changed anywhere in each codec's file (decoders and decompressors see
// garbage): data or an error, never a crash. Deterministic (a fixed LCG).
TEST(ParquetMalformed, RandomCorruptionNeverCrashes) {
  uint64_t state = 12345;
  const auto random = [&state](uint64_t bound) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % bound;
  };
  const std::string path = temp_file("corrupt.parquet");
  for (const char* codec : {"uncompressed", "snappy", "gzip", "zstd"}) {
    for (const char* version : {"v1", "v2"}) {
      REQUIRE_FIXTURE(source, std::string("text_") + codec + "_" + version + ".parquet");
      const std::vector<uint8_t> bytes = read_bytes(source);
      write_bytes(path, bytes);
      for (int round = 0; round < 25; ++round) {
        std::vector<size_t> offsets;
        for (uint64_t k = 0, n = 1 + random(4); k < n; ++k) {
          const size_t at = random(bytes.size());
          offsets.push_back(at);
          patch_byte(path, at, static_cast<uint8_t>(random(256)));
        }
        read_everything(path);
        for (const size_t at : offsets) patch_byte(path, at, bytes[at]);
      }
    }
  }
}

TEST(ParquetMalformed, ZeroedDataPagesAreErrors) {
  REQUIRE_FIXTURE(source, "text_snappy_v1.parquet");
  std::vector<uint8_t> bytes = read_bytes(source);
  std::fill(bytes.begin() + 4, bytes.begin() + static_cast<ptrdiff_t>(bytes.size() / 2), 0);
  const std::string path = temp_file("zeroed.parquet");
  write_bytes(path, bytes);
  const std::string error = read_everything(path);
  EXPECT_NE(error.find("page at byte"), std::string::npos) << error;
}

// ---- Files built here, byte by byte ----------------------------------------------------------

// A Thrift compact protocol writer (test side, from the protocol description).
class ThriftWriter {
 public:
  std::vector<uint8_t> bytes;

  void varint(uint64_t v) {
    while (v >= 0x80) {
      bytes.push_back(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    bytes.push_back(static_cast<uint8_t>(v));
  }
  void zigzag(int64_t v) { varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }
  void field(int16_t id, uint8_t type) {
    const int delta = id - last_;
    if (delta > 0 && delta <= 15) {
      bytes.push_back(static_cast<uint8_t>(delta << 4 | type));
    } else {
      bytes.push_back(type);
      zigzag(id);
    }
    last_ = id;
  }
  void i32(int16_t id, int64_t v) { field(id, 5), zigzag(v); }
  void i64(int16_t id, int64_t v) { field(id, 6), zigzag(v); }
  void boolean(int16_t id, bool v) { field(id, v ? 1 : 2); }
  void binary(int16_t id, std::string_view s) {
    field(id, 8);
    raw_binary(s);
  }
  void raw_binary(std::string_view s) {
    varint(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  void begin(int16_t id) {
    field(id, 12);
    open();
  }
  void open() {  // a struct as a list element
    stack_.push_back(last_);
    last_ = 0;
  }
  void end() {
    bytes.push_back(0);
    last_ = stack_.back();
    stack_.pop_back();
  }
  void list(int16_t id, uint8_t element, uint32_t size) {
    field(id, 9);
    if (size < 15) {
      bytes.push_back(static_cast<uint8_t>(size << 4 | element));
    } else {
      bytes.push_back(static_cast<uint8_t>(0xf0 | element));
      varint(size);
    }
  }
  // A field a newer writer might add: a struct holding every kind of value.
  void unknown_everything(int16_t id) {
    begin(id);
    i32(1, -7);
    i64(2, 1ll << 50);
    binary(3, "future");
    boolean(4, true);
    boolean(5, false);
    field(6, 7);  // double
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(i));
    list(7, 12, 2);  // list<struct>
    open();
    binary(1, "x");
    end();
    open();
    end();
    field(8, 11);  // map<binary, i32> with two entries
    varint(2);
    bytes.push_back(0x85);
    raw_binary("k1");
    zigzag(1);
    raw_binary("k2");
    zigzag(2);
    field(9, 11);  // empty map
    varint(0);
    field(10, 10);  // set<bool>
    bytes.push_back(0x21);
    bytes.push_back(1);
    bytes.push_back(2);
    field(300, 3);  // a long id jump (zigzag id) and a byte
    bytes.push_back(0x7f);
    field(301, 13);  // uuid
    for (int i = 0; i < 16; ++i) bytes.push_back(0xab);
    end();
  }

 private:
  int16_t last_ = 0;
  std::vector<int16_t> stack_;
};

std::vector<uint8_t> plain_values(const std::vector<std::string>& values) {
  std::vector<uint8_t> out;
  for (const std::string& v : values) {
    const auto n = static_cast<uint32_t>(v.size());
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// DELTA_BINARY_PACKED (test side): one block of 128 values in 4 miniblocks of 32.
std::vector<uint8_t> delta_binary_packed(const std::vector<int64_t>& values) {
  ThriftWriter w;  // for its varints
  w.varint(128);
  w.varint(4);
  w.varint(values.size());
  w.zigzag(values.empty() ? 0 : values[0]);
  if (values.size() <= 1) return w.bytes;
  EXPECT_LE(values.size(), 129u);
  std::vector<int64_t> deltas;
  for (size_t i = 1; i < values.size(); ++i) deltas.push_back(values[i] - values[i - 1]);
  const int64_t min_delta = *std::min_element(deltas.begin(), deltas.end());
  uint64_t max_packed = 0;
  for (const int64_t d : deltas) max_packed = std::max(max_packed, static_cast<uint64_t>(d - min_delta));
  int width = 0;
  while (width < 64 && (max_packed >> width) != 0) ++width;
  w.zigzag(min_delta);
  const size_t used = (deltas.size() + 31) / 32;
  for (size_t m = 0; m < 4; ++m) w.bytes.push_back(static_cast<uint8_t>(m < used ? width : 0));
  std::vector<uint8_t> packed(used * 32 * static_cast<size_t>(width) / 8, 0);
  for (size_t i = 0; i < deltas.size(); ++i) {
    const uint64_t v = static_cast<uint64_t>(deltas[i] - min_delta);
    for (int b = 0; b < width; ++b) {
      if ((v >> b) & 1) {
        const size_t bit = i * static_cast<size_t>(width) + static_cast<size_t>(b);
        packed[bit / 8] = static_cast<uint8_t>(packed[bit / 8] | (1u << (bit % 8)));
      }
    }
  }
  w.bytes.insert(w.bytes.end(), packed.begin(), packed.end());
  return w.bytes;
}

struct Page {
  int32_t type = 0;  // DATA_PAGE
  int32_t encoding = 0;
  int32_t num_values = 0;
  std::vector<uint8_t> data;
  int64_t compressed_size = -1;    // -1: data.size()
  int64_t uncompressed_size = -1;  // -1: data.size()
  bool unknown_fields = false;
  // DATA_PAGE_V2 (type 3): `data` is the levels, then the (compressed) values.
  int32_t num_nulls = 0;
  int32_t def_bytes = 0;
  std::optional<bool> is_compressed = std::nullopt;
};

struct Column {
  std::string name = "text";
  int32_t type = 6;        // BYTE_ARRAY
  int32_t repetition = 0;  // REQUIRED
  int32_t codec = 0;
  int64_t num_values = 0;
};

std::vector<uint8_t> page_bytes(const Page& page) {
  ThriftWriter w;
  w.open();
  w.i32(1, page.type);
  w.i32(2, page.uncompressed_size >= 0 ? page.uncompressed_size : static_cast<int64_t>(page.data.size()));
  w.i32(3, page.compressed_size >= 0 ? page.compressed_size : static_cast<int64_t>(page.data.size()));
  if (page.unknown_fields) w.unknown_everything(4);
  if (page.type == 3) {
    w.begin(8);
    w.i32(1, page.num_values);
    w.i32(2, page.num_nulls);
    w.i32(3, page.num_values);
    w.i32(4, page.encoding);
    w.i32(5, page.def_bytes);
    w.i32(6, 0);
    if (page.is_compressed) w.boolean(7, *page.is_compressed);
    if (page.unknown_fields) w.unknown_everything(99);
    w.end();
  } else if (page.type == 2) {
    w.begin(7);
    w.i32(1, page.num_values);
    w.i32(2, 0);
    w.end();
  } else {
    w.begin(5);
    w.i32(1, page.num_values);
    w.i32(2, page.encoding);
    w.i32(3, 3);
    w.i32(4, 3);
    if (page.unknown_fields) w.unknown_everything(99);
    w.end();
  }
  w.end();
  w.bytes.insert(w.bytes.end(), page.data.begin(), page.data.end());
  return w.bytes;
}

// A one-column, one-row-group file.
std::vector<uint8_t> build_file(const Column& column, const std::vector<Page>& pages, bool unknown_fields = false,
                                int64_t chunk_offset_shift = 0) {
  std::vector<uint8_t> file = {'P', 'A', 'R', '1'};
  for (const Page& page : pages) {
    const std::vector<uint8_t> bytes = page_bytes(page);
    file.insert(file.end(), bytes.begin(), bytes.end());
  }
  const auto chunk_size = static_cast<int64_t>(file.size() - 4);
  ThriftWriter w;
  w.open();
  w.i32(1, 2);
  if (unknown_fields) w.unknown_everything(20);
  w.list(2, 12, 2);
  w.open();
  w.binary(4, "schema");
  w.i32(5, 1);
  w.end();
  w.open();
  w.i32(1, column.type);
  w.i32(3, column.repetition);
  w.binary(4, column.name);
  if (unknown_fields) w.unknown_everything(77);
  w.end();
  w.i64(3, column.num_values);
  w.list(4, 12, 1);
  w.open();
  w.list(1, 12, 1);
  w.open();
  w.i64(2, 4);
  w.begin(3);
  w.i32(1, column.type);
  w.list(2, 5, 1);
  w.zigzag(0);
  w.list(3, 8, 1);
  w.raw_binary(column.name);
  w.i32(4, column.codec);
  w.i64(5, column.num_values);
  w.i64(6, chunk_size);
  w.i64(7, chunk_size);
  if (unknown_fields) w.unknown_everything(8);
  w.i64(9, 4 + chunk_offset_shift);
  w.end();
  w.end();
  w.i64(2, chunk_size);
  w.i64(3, column.num_values);
  w.end();
  w.binary(6, "kipp parquet_test");
  if (unknown_fields) w.unknown_everything(200);
  w.end();
  file.insert(file.end(), w.bytes.begin(), w.bytes.end());
  const auto footer = static_cast<uint32_t>(w.bytes.size());
  for (int i = 0; i < 4; ++i) file.push_back(static_cast<uint8_t>(footer >> (8 * i)));
  file.insert(file.end(), {'P', 'A', 'R', '1'});
  return file;
}

Expected<std::vector<std::optional<std::string>>> read_built(const std::string& name, const std::vector<uint8_t>& bytes,
                                                             const ReadLimits& limits = {}) {
  const std::string path = temp_file(name);
  write_bytes(path, bytes);
  return read_column(path, "text", limits);
}

TEST(ParquetBuilt, RequiredPlainColumnWithUnknownFieldsEverywhere) {
  const std::vector<std::string> values = {"alpha", "", "ünïcödé", std::string("nul\0byte", 8)};
  Page page{.encoding = 0, .num_values = 2, .data = plain_values({values[0], values[1]}), .unknown_fields = true};
  Page page2{.encoding = 0, .num_values = 2, .data = plain_values({values[2], values[3]})};
  Column column{.num_values = 4};
  auto read = read_built("unknown_fields.parquet", build_file(column, {page, page2}, true));
  ASSERT_TRUE(read.ok()) << read.message();
  ASSERT_EQ(read->size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ((*read)[i], values[i]);

  // The same file read through ParquetFile: the created_by string after the unknown fields.
  auto file = ParquetFile::open(temp_file("unknown_fields.parquet"));
  ASSERT_TRUE(file.ok());
  EXPECT_EQ((*file)->created_by(), "kipp parquet_test");
  EXPECT_EQ((*file)->columns()[0].repetition, Repetition::Required);
}

TEST(ParquetBuilt, DeltaEncodings) {
  // DELTA_BYTE_ARRAY: prefix lengths, then the suffixes as DELTA_LENGTH_BYTE_ARRAY.
  const std::vector<std::string> values = {"apple", "applesauce", "apply", "banana", "", "band"};
  std::vector<int64_t> prefixes, lengths;
  std::string suffixes;
  std::string previous;
  for (const std::string& v : values) {
    size_t p = 0;
    while (p < v.size() && p < previous.size() && v[p] == previous[p]) ++p;
    prefixes.push_back(static_cast<int64_t>(p));
    lengths.push_back(static_cast<int64_t>(v.size() - p));
    suffixes += v.substr(p);
    previous = v;
  }
  std::vector<uint8_t> data = delta_binary_packed(prefixes);
  const std::vector<uint8_t> suffix_lengths = delta_binary_packed(lengths);
  data.insert(data.end(), suffix_lengths.begin(), suffix_lengths.end());
  data.insert(data.end(), suffixes.begin(), suffixes.end());
  Column column{.num_values = 6};
  auto read =
      read_built("delta_byte_array.parquet", build_file(column, {Page{.encoding = 7, .num_values = 6, .data = data}}));
  ASSERT_TRUE(read.ok()) << read.message();
  ASSERT_EQ(read->size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ((*read)[i], values[i]);

  // DELTA_LENGTH_BYTE_ARRAY with more than one miniblock of lengths.
  std::vector<std::string> many;
  std::vector<int64_t> many_lengths;
  std::string concatenated;
  for (int i = 0; i < 70; ++i) {
    many.push_back(std::string(static_cast<size_t>(i % 9), static_cast<char>('a' + i % 26)));
    many_lengths.push_back(static_cast<int64_t>(many.back().size()));
    concatenated += many.back();
  }
  std::vector<uint8_t> dlba = delta_binary_packed(many_lengths);
  dlba.insert(dlba.end(), concatenated.begin(), concatenated.end());
  auto read2 = read_built("delta_length.parquet",
                          build_file(Column{.num_values = 70}, {Page{.encoding = 6, .num_values = 70, .data = dlba}}));
  ASSERT_TRUE(read2.ok()) << read2.message();
  ASSERT_EQ(read2->size(), many.size());
  for (size_t i = 0; i < many.size(); ++i) EXPECT_EQ((*read2)[i], many[i]) << i;

  // A prefix longer than the previous value is corrupt.
  std::vector<uint8_t> bad = delta_binary_packed({3});
  const std::vector<uint8_t> one_length = delta_binary_packed({1});
  bad.insert(bad.end(), one_length.begin(), one_length.end());
  bad.push_back('x');
  auto read3 = read_built("delta_bad_prefix.parquet",
                          build_file(Column{.num_values = 1}, {Page{.encoding = 7, .num_values = 1, .data = bad}}));
  ASSERT_FALSE(read3.ok());
  EXPECT_NE(read3.message().find("prefix length 3 exceeds"), std::string::npos) << read3.message();
}

// Compresses `raw` with a Parquet codec (test side, straight from the libraries).
std::vector<uint8_t> compress(int32_t codec, const std::vector<uint8_t>& raw) {
  std::vector<uint8_t> out;
  switch (codec) {
    case 0: return raw;
    case 1: {
      size_t size = snappy_max_compressed_length(raw.size());
      out.resize(size);
      EXPECT_EQ(snappy_compress(reinterpret_cast<const char*>(raw.data()), raw.size(),
                                reinterpret_cast<char*>(out.data()), &size),
                SNAPPY_OK);
      out.resize(size);
      return out;
    }
    case 2: {  // the gzip wrapper
      z_stream stream{};
      EXPECT_EQ(deflateInit2(&stream, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
      out.resize(deflateBound(&stream, static_cast<uLong>(raw.size())) + 32);
      stream.next_in = const_cast<Bytef*>(raw.data());
      stream.avail_in = static_cast<uInt>(raw.size());
      stream.next_out = out.data();
      stream.avail_out = static_cast<uInt>(out.size());
      EXPECT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
      out.resize(stream.total_out);
      deflateEnd(&stream);
      return out;
    }
    case 6: {
      out.resize(ZSTD_compressBound(raw.size()));
      const size_t size = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), 3);
      EXPECT_FALSE(ZSTD_isError(size));
      out.resize(size);
      return out;
    }
  }
  ADD_FAILURE() << "codec " << codec;
  return out;
}

// DATA_PAGE_V2 for every codec, required and optional: levels stored uncompressed before the
// compressed values; a compressed dictionary page; a page with is_compressed = false.
TEST(ParquetBuilt, DataPageV2EveryCodec) {
  for (const int32_t codec : {0, 1, 2, 6}) {
    for (const bool optional : {false, true}) {
      SCOPED_TRACE("codec " + std::to_string(codec) + (optional ? " optional" : " required"));
      const std::vector<std::string> present = {"first", "", "ünïcödé ✓", "last"};
      std::vector<std::optional<std::string>> want;
      std::vector<uint8_t> levels;
      if (optional) {
        levels = {0x03, 0b101101};  // one bit-packed group: 1, 0, 1, 1, 0, 1
        want = {"first", std::nullopt, "", "ünïcödé ✓", std::nullopt, "last"};
      } else {
        want = {"first", "", "ünïcödé ✓", "last"};
      }
      const auto count = static_cast<int32_t>(want.size());
      const std::vector<uint8_t> raw = plain_values(present);
      std::vector<uint8_t> data = levels;
      const std::vector<uint8_t> packed = compress(codec, raw);
      data.insert(data.end(), packed.begin(), packed.end());
      Page plain{.type = 3,
                 .encoding = 0,
                 .num_values = count,
                 .data = data,
                 .uncompressed_size = static_cast<int64_t>(levels.size() + raw.size()),
                 .unknown_fields = codec == 6,
                 .num_nulls = optional ? 2 : 0,
                 .def_bytes = static_cast<int32_t>(levels.size())};

      const std::vector<uint8_t> dictionary_raw = plain_values({"dict a", "dict b"});
      Page dictionary{.type = 2,
                      .num_values = 2,
                      .data = compress(codec, dictionary_raw),
                      .uncompressed_size = static_cast<int64_t>(dictionary_raw.size())};
      // Indices 1, 0, 1, 1: bit width 1, one bit-packed group.
      const std::vector<uint8_t> indices = {1, 0x03, 0b1101};
      std::vector<uint8_t> dict_data = optional ? std::vector<uint8_t>{0x03, 0b001111} : std::vector<uint8_t>{};
      const std::vector<uint8_t> packed_indices = compress(codec, indices);
      dict_data.insert(dict_data.end(), packed_indices.begin(), packed_indices.end());
      Page by_index{.type = 3,
                    .encoding = 8,
                    .num_values = optional ? 6 : 4,
                    .data = dict_data,
                    .uncompressed_size = static_cast<int64_t>((optional ? 2 : 0) + indices.size()),
                    .num_nulls = optional ? 2 : 0,
                    .def_bytes = optional ? 2 : 0};
      std::vector<std::optional<std::string>> want_dict = {"dict b", "dict a", "dict b", "dict b"};
      if (optional) want_dict = {"dict b", "dict a", "dict b", "dict b", std::nullopt, std::nullopt};

      // Values stored uncompressed although the chunk's codec compresses.
      std::vector<uint8_t> stored = levels;
      stored.insert(stored.end(), raw.begin(), raw.end());
      Page not_compressed{.type = 3,
                          .encoding = 0,
                          .num_values = count,
                          .data = stored,
                          .num_nulls = optional ? 2 : 0,
                          .def_bytes = static_cast<int32_t>(levels.size()),
                          .is_compressed = false};

      Column column{.repetition = optional ? 1 : 0, .codec = codec, .num_values = 2 * count + by_index.num_values};
      auto read = read_built("v2.parquet", build_file(column, {dictionary, plain, by_index, not_compressed}));
      ASSERT_TRUE(read.ok()) << read.message();
      std::vector<std::optional<std::string>> all = want;
      all.insert(all.end(), want_dict.begin(), want_dict.end());
      all.insert(all.end(), want.begin(), want.end());
      EXPECT_EQ(*read, all);

      if (codec != 0) {
        // Corrupt compressed bytes: one error naming the codec.
        Page broken = plain;
        broken.data.resize(levels.size());
        broken.data.insert(broken.data.end(), {0x55, 0x55, 0x55, 0x55, 0x55, 0x55});
        column.num_values = count;
        auto bad = read_built("v2_bad.parquet", build_file(column, {broken}));
        ASSERT_FALSE(bad.ok());
        EXPECT_NE(bad.message().find("decompression failed"), std::string::npos) << bad.message();
      }
    }
  }
}

TEST(ParquetBuilt, AbsurdSizesAreErrors) {
  const std::vector<uint8_t> data = plain_values({"a", "b"});
  Column column{.num_values = 2};
  // A compressed size beyond the column chunk.
  auto read = read_built("huge_compressed.parquet",
                         build_file(column, {Page{.num_values = 2, .data = data, .compressed_size = INT32_MAX}}));
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.message().find("compressed size 2147483647 exceeds"), std::string::npos) << read.message();
  // 2^40 does not fit the i32 field at all.
  read = read_built("huge_2_40.parquet",
                    build_file(column, {Page{.num_values = 2, .data = data, .compressed_size = 1ll << 40}}));
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.message().find("1099511627776 out of range"), std::string::npos) << read.message();
  // A decompressed size over the limit is refused before anything is allocated.
  column.codec = 1;
  read = read_built("huge_uncompressed.parquet",
                    build_file(column, {Page{.num_values = 2, .data = data, .uncompressed_size = 1 << 20}}),
                    ReadLimits{.max_page_bytes = 1 << 16});
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.message().find("exceeds the limit of 65536 bytes"), std::string::npos) << read.message();
  // A page claiming more values than the chunk.
  column.codec = 0;
  read = read_built("too_many_values.parquet", build_file(column, {Page{.num_values = 1 << 30, .data = data}}));
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.message().find("page claims 1073741824 values"), std::string::npos) << read.message();
  // A value length past the page.
  std::vector<uint8_t> short_value = plain_values({"abc"});
  short_value[0] = 0xff;
  read = read_built("long_value.parquet",
                    build_file(Column{.num_values = 1}, {Page{.num_values = 1, .data = short_value}}));
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.message().find("PLAIN value of 255 bytes runs past the end of the page"), std::string::npos)
      << read.message();
  // A chunk placed after the end of the data.
  read = read_built("chunk_outside.parquet", build_file(column, {Page{.num_values = 2, .data = data}}, false, 1 << 20));
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.message().find("outside the data area"), std::string::npos) << read.message();
}

TEST(ParquetBuilt, DictionaryIndexOutOfRange) {
  Page dictionary{.type = 2, .num_values = 2, .data = plain_values({"x", "y"})};
  // Bit width 2, one RLE run of 3 copies of index 3.
  Page data{.encoding = 8, .num_values = 3, .data = {2, 3 << 1, 3}};
  auto read = read_built("dict_range.parquet", build_file(Column{.num_values = 3}, {dictionary, data}));
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.message().find("dictionary index 3 is out of range (the dictionary has 2 entries)"), std::string::npos)
      << read.message();
  // The same with index 1 reads; a bit-packed run (header (1 << 1) | 1: 8 values) of 1, 0, 1.
  Page packed{.encoding = 8, .num_values = 3, .data = {1, 0x03, 0b101}};
  auto ok = read_built("dict_ok.parquet", build_file(Column{.num_values = 3}, {dictionary, packed}));
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(*ok, (std::vector<std::optional<std::string>>{"y", "x", "y"}));
}

TEST(ParquetBuilt, OptionalColumnLevelsAndUnsupportedEncodings) {
  // Definition levels 1, 0, 1 (bit-packed, width 1) before the values.
  std::vector<uint8_t> data = {2, 0, 0, 0, 0x03, 0b101};
  const std::vector<uint8_t> values = plain_values({"a", "c"});
  data.insert(data.end(), values.begin(), values.end());
  Column column{.repetition = 1, .num_values = 3};
  auto read = read_built("optional.parquet", build_file(column, {Page{.num_values = 3, .data = data}}));
  ASSERT_TRUE(read.ok()) << read.message();
  EXPECT_EQ(*read, (std::vector<std::optional<std::string>>{"a", std::nullopt, "c"}));

  read = read_built("byte_stream_split.parquet",
                    build_file(Column{.num_values = 1}, {Page{.encoding = 9, .num_values = 1, .data = {0}}}));
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.message().find("column \"text\""), std::string::npos) << read.message();
  EXPECT_NE(read.message().find("encoding BYTE_STREAM_SPLIT is not supported"), std::string::npos) << read.message();

  read = read_built("lz4.parquet", build_file(Column{.codec = 7, .num_values = 1},
                                              {Page{.num_values = 1, .data = plain_values({"a"})}}));
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.message().find("column \"text\", row group 0: compression codec LZ4_RAW is not supported"),
            std::string::npos)
      << read.message();
}

TEST(ParquetBuilt, DeepThriftNestingIsAnError) {
  std::vector<uint8_t> file = {'P', 'A', 'R', '1'};
  ThriftWriter w;
  w.open();
  for (int i = 0; i < 500; ++i) w.begin(1);
  const auto footer = static_cast<uint32_t>(w.bytes.size());
  file.insert(file.end(), w.bytes.begin(), w.bytes.end());
  for (int i = 0; i < 4; ++i) file.push_back(static_cast<uint8_t>(footer >> (8 * i)));
  file.insert(file.end(), {'P', 'A', 'R', '1'});
  const std::string path = temp_file("deep.parquet");
  write_bytes(path, file);
  auto opened = ParquetFile::open(path);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.message().find("nesting deeper than"), std::string::npos) << opened.message();
}

// ---- ParquetRecordSource ---------------------------------------------------------------------

TEST(ParquetRecords, TextColumnWithNullsAsMalformed) {
  REQUIRE_FIXTURE(path, "text_zstd_v2.parquet");
  REQUIRE_FIXTURE(expected_path, "text.expected.jsonl");
  const std::vector<json> expected = read_jsonl(expected_path);
  auto source = data::ParquetRecordSource::open(path, data::DatasetFormat::Parquet, data::DatasetOptions{});
  ASSERT_TRUE(source.ok()) << source.message();
  data::Record record;
  std::string malformed;
  size_t row = 0, bad = 0;
  while (true) {
    auto more = (*source)->next(record, malformed);
    ASSERT_TRUE(more.ok()) << more.message();
    if (!*more) break;
    ASSERT_LT(row, expected.size());
    ++row;
    EXPECT_EQ(record.origin.file, path);
    EXPECT_EQ(record.origin.line, row);
    const auto want = expected_value(expected[row - 1], "text");
    if (!want) {
      EXPECT_EQ(malformed, "column \"text\" is null") << "row " << row;
      ++bad;
    } else {
      ASSERT_EQ(malformed, "") << "row " << row;
      EXPECT_EQ(record.text, *want);
      EXPECT_FALSE(record.is_conversation());
    }
  }
  EXPECT_EQ(row, expected.size());
  EXPECT_GT(bad, 0u);

  data::DatasetOptions category;
  category.text_field = "category";
  auto by_category = data::ParquetRecordSource::open(path, data::DatasetFormat::Parquet, category);
  ASSERT_TRUE(by_category.ok()) << by_category.message();
  auto first = (*by_category)->next(record, malformed);
  ASSERT_TRUE(first.ok() && *first);
  EXPECT_EQ(std::optional<std::string>(record.text), expected_value(expected[0], "category"));
}

TEST(ParquetRecords, Alpaca) {
  REQUIRE_FIXTURE(path, "alpaca.parquet");
  REQUIRE_FIXTURE(expected_path, "alpaca.expected.jsonl");
  const std::vector<json> expected = read_jsonl(expected_path);
  auto source = data::ParquetRecordSource::open(path, data::DatasetFormat::Alpaca, data::DatasetOptions{});
  ASSERT_TRUE(source.ok()) << source.message();
  data::Record record;
  std::string malformed;
  size_t row = 0, with_input = 0;
  while (true) {
    auto more = (*source)->next(record, malformed);
    ASSERT_TRUE(more.ok()) << more.message();
    if (!*more) break;
    ASSERT_LT(row, expected.size());
    const json& want = expected[row++];
    ASSERT_EQ(malformed, "");
    ASSERT_EQ(record.messages.size(), 2u);
    std::string user = want.at("instruction").get<std::string>();
    const std::string input = want.at("input").get<std::string>();
    if (!input.empty()) {
      user += "\n\n" + input;
      ++with_input;
    }
    EXPECT_EQ(record.messages[0].role, "user");
    EXPECT_EQ(record.messages[0].content, user);
    EXPECT_EQ(record.messages[1].role, "assistant");
    EXPECT_EQ(record.messages[1].content, want.at("output").get<std::string>());
    EXPECT_EQ(record.origin.line, row);
  }
  EXPECT_EQ(row, expected.size());
  EXPECT_GT(with_input, 0u);
  EXPECT_LT(with_input, row);
}

TEST(ParquetRecords, InvalidUtf8AndNullAreMalformed) {
  REQUIRE_FIXTURE(path, "invalid_utf8.parquet");
  auto source = data::ParquetRecordSource::open(path, data::DatasetFormat::Parquet, data::DatasetOptions{});
  ASSERT_TRUE(source.ok()) << source.message();
  data::Record record;
  std::vector<std::string> texts, problems;
  std::string malformed;
  while (true) {
    auto more = (*source)->next(record, malformed);
    ASSERT_TRUE(more.ok()) << more.message();
    if (!*more) break;
    texts.push_back(malformed.empty() ? record.text : "");
    problems.push_back(malformed);
  }
  EXPECT_EQ(texts, (std::vector<std::string>{"good", "", "also good", ""}));
  EXPECT_EQ(problems, (std::vector<std::string>{"", "column \"text\" is not valid UTF-8 (at byte 0)", "",
                                                "column \"text\" is null"}));
}

TEST(ParquetRecords, MissingColumnAndColumnNames) {
  REQUIRE_FIXTURE(path, "text_gzip_v1.parquet");
  auto names = data::ParquetRecordSource::column_names(path);
  ASSERT_TRUE(names.ok()) << names.message();
  EXPECT_EQ(*names, (std::vector<std::string>{"id", "text", "category"}));

  data::DatasetOptions options;
  options.text_field = "body";
  auto source = data::ParquetRecordSource::open(path, data::DatasetFormat::Parquet, options);
  ASSERT_FALSE(source.ok());
  EXPECT_NE(source.message().find("no column \"body\" (the file has: \"id\", \"text\", \"category\")"),
            std::string::npos)
      << source.message();
  auto alpaca = data::ParquetRecordSource::open(path, data::DatasetFormat::Alpaca, data::DatasetOptions{});
  ASSERT_FALSE(alpaca.ok());
  EXPECT_NE(alpaca.message().find("no column \"instruction\""), std::string::npos) << alpaca.message();

  auto missing = data::ParquetRecordSource::column_names(temp_file("no_such_file.parquet"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("no_such_file.parquet"), std::string::npos);
}

}  // namespace
}  // namespace kipp::parquet
