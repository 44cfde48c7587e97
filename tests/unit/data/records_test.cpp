// Dataset record readers: every format's records (text, origins, messages), format detection,
// input expansion, malformed input counted, reported and skipped (strict: an error), pieces of
// long text documents, and memory that stays bounded whatever the file size.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "data/records.h"
#include "unit/helpers/gguf_blueprint.h"
#include "unit/helpers/test_assertions.h"

namespace kipp::data {
namespace {

using kipp::test_support::has_substr;

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

struct ReadAll {
  Status status;  // open() or next() failing
  std::vector<Record> records;
  std::vector<std::string> reports;
  ReadStats stats;
  uint64_t total_bytes = 0;
};

ReadAll read_all(std::vector<std::string> files, const DatasetOptions& options = {}) {
  ReadAll out;
  auto reader =
      RecordReader::open(std::move(files), options, [&](const std::string& line) { out.reports.push_back(line); });
  if (!reader.ok()) {
    out.status = reader.error();
    return out;
  }
  Record record;
  while (true) {
    auto more = (*reader)->next(record);
    if (!more.ok()) {
      out.status = more.error();
      break;
    }
    if (!*more) break;
    out.records.push_back(record);
  }
  out.stats = (*reader)->stats();
  out.total_bytes = (*reader)->total_bytes();
  return out;
}

ReadAll read_one(const std::string& path, DatasetFormat format = DatasetFormat::Auto) {
  DatasetOptions options;
  options.format = format;
  return read_all({path}, options);
}

std::vector<std::string> texts(const ReadAll& read) {
  std::vector<std::string> out;
  for (const Record& record : read.records) out.push_back(record.text);
  return out;
}

std::vector<uint64_t> lines(const ReadAll& read) {
  std::vector<uint64_t> out;
  for (const Record& record : read.records) out.push_back(record.origin.line);
  return out;
}

// "role: content" per message.
std::vector<std::string> turns(const Record& record) {
  std::vector<std::string> out;
  for (const ChatMessage& message : record.messages) out.push_back(message.role + ": " + message.content);
  return out;
}

// ---- names, origins, inputs ----

TEST(Records, FormatNamesRoundTrip) {
  const std::vector<std::string> names = {"auto", "text", "jsonl", "csv", "parquet", "alpaca", "sharegpt", "openai"};
  for (const std::string& name : names) {
    auto format = parse_dataset_format(name);
    ASSERT_TRUE(format.ok()) << format.message();
    EXPECT_EQ(dataset_format_name(*format), name);
  }
  EXPECT_EQ(*parse_dataset_format("sharegpt"), DatasetFormat::ShareGpt);
  auto bad = parse_dataset_format("yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(has_substr(bad.message(), "\"yaml\""));
  EXPECT_TRUE(has_substr(bad.message(), "auto, text, jsonl, csv, parquet, alpaca, sharegpt, openai"));
  EXPECT_EQ((RecordOrigin{"data/a.jsonl", 17}).to_string(), "data/a.jsonl:17");
}

TEST(Records, ExpandInputsFilesGlobsAndFolders) {
  testing::TempDir dir;
  namespace fs = std::filesystem;
  fs::create_directories(dir.file("corpus/sub"));
  fs::create_directories(dir.file("corpus/.git"));
  write_bytes(dir.file("corpus/b.txt"), "b");
  write_bytes(dir.file("corpus/a.jsonl"), "{}");
  write_bytes(dir.file("corpus/sub/c.txt"), "c");
  write_bytes(dir.file("corpus/.hidden.txt"), "h");
  write_bytes(dir.file("corpus/.git/config"), "x");
  write_bytes(dir.file("x1.jsonl"), "{}");
  write_bytes(dir.file("x2.jsonl"), "{}");
  write_bytes(dir.file("y.txt"), "y");
  fs::create_directories(dir.file("empty"));

  auto files = expand_inputs(
      {dir.file("y.txt"), dir.file("corpus"), dir.file("x*.jsonl"), dir.file("corpus/b.txt"), dir.path() + "/./y.txt"});
  ASSERT_TRUE(files.ok()) << files.message();
  const std::vector<std::string> expected = {dir.file("corpus/a.jsonl"),   dir.file("corpus/b.txt"),
                                             dir.file("corpus/sub/c.txt"), dir.file("x1.jsonl"),
                                             dir.file("x2.jsonl"),         dir.file("y.txt")};
  EXPECT_EQ(*files, expected);

  // A hidden file named explicitly is read.
  auto hidden = expand_inputs({dir.file("corpus/.hidden.txt")});
  ASSERT_TRUE(hidden.ok()) << hidden.message();
  EXPECT_EQ(hidden->size(), 1u);

  for (const std::string& nothing : {dir.file("missing.txt"), dir.file("z*.jsonl"), dir.file("empty")}) {
    auto none = expand_inputs({dir.file("y.txt"), nothing});
    ASSERT_FALSE(none.ok()) << nothing;
    EXPECT_TRUE(has_substr(none.message(), nothing));
  }
}

// ---- text ----

TEST(Records, TextFileIsOneDocument) {
  testing::TempDir dir;
  const std::string text = "first line\nzweite Zeile: äöü 世界 🙂\n\nlast line without newline";
  write_bytes(dir.file("a.txt"), text);
  write_bytes(dir.file("b"), "no extension\n");
  write_bytes(dir.file("empty.md"), "");
  write_bytes(dir.file("blank.text"), " \n\n");
  auto read = read_all({dir.file("a.txt"), dir.file("b"), dir.file("empty.md"), dir.file("blank.text")});
  ASSERT_TRUE(read.status.ok()) << read.status.message();
  EXPECT_EQ(texts(read), (std::vector<std::string>{text, "no extension\n"}));
  EXPECT_EQ(lines(read), (std::vector<uint64_t>{1, 1}));
  EXPECT_EQ(read.records[0].origin.file, dir.file("a.txt"));
  EXPECT_TRUE(read.records[0].ends_document);
  EXPECT_FALSE(read.records[0].is_conversation());
  EXPECT_EQ(read.stats.records, 2u);
  EXPECT_EQ(read.stats.files, 4u);
  EXPECT_EQ(read.stats.malformed, 0u);
  EXPECT_EQ(read.total_bytes, text.size() + 13 + 0 + 3);
  EXPECT_EQ(read.stats.bytes, read.total_bytes);
}

TEST(Records, TextSeparatorSplitsDocuments) {
  testing::TempDir dir;
  // Lines: 1 a, 2 b, 3 %, 4 c, 5 %, 6 %, 7 blank, 8 %, 9 "100%", 10 " %", 11 %\r, 12 é
  write_bytes(dir.file("fortunes"), "a\nb\n%\nc\n%\n%\n  \n%\n100%\n %\n%\r\n\xC3\xA9");
  DatasetOptions options;
  options.document_separator = "%";
  auto read = read_all({dir.file("fortunes")}, options);
  ASSERT_TRUE(read.status.ok()) << read.status.message();
  EXPECT_EQ(texts(read), (std::vector<std::string>{"a\nb\n", "c\n", "100%\n %\n", "\xC3\xA9"}));
  EXPECT_EQ(lines(read), (std::vector<uint64_t>{1, 4, 9, 12}));
  for (const Record& record : read.records) EXPECT_TRUE(record.ends_document);
}

TEST(Records, TextInvalidUtf8DocumentIsSkipped) {
  testing::TempDir dir;
  const std::string path = dir.file("f.txt");
  write_bytes(path, "good\n%\nbad \xFF byte\n%\nalso good\n");
  DatasetOptions options;
  options.document_separator = "%";
  auto read = read_all({path}, options);
  ASSERT_TRUE(read.status.ok()) << read.status.message();
  EXPECT_EQ(texts(read), (std::vector<std::string>{"good\n", "also good\n"}));
  EXPECT_EQ(read.stats.malformed, 1u);
  ASSERT_EQ(read.reports.size(), 1u);
  EXPECT_TRUE(has_substr(read.reports[0], path + ":3: invalid UTF-8 at byte offset 11"));

  options.strict = true;
  auto strict = read_all({path}, options);
  ASSERT_FALSE(strict.status.ok());
  EXPECT_TRUE(has_substr(strict.status.message(), path + ":3: invalid UTF-8"));
  EXPECT_EQ(texts(strict), (std::vector<std::string>{"good\n"}));
}

// The pieces of `read` (one document) put back together, checking the piece invariants.
std::string join_pieces(const ReadAll& read, bool cut_at_line_ends) {
  std::string whole;
  for (size_t i = 0; i < read.records.size(); ++i) {
    const Record& piece = read.records[i];
    EXPECT_EQ(piece.ends_document, i + 1 == read.records.size()) << "piece " << i;
    EXPECT_LE(piece.text.size(), size_t{2} << 20) << "piece " << i;
    if (!piece.ends_document) {
      EXPECT_GE(piece.text.size(), size_t{1} << 19) << "piece " << i;
      if (cut_at_line_ends) {
        EXPECT_EQ(piece.text.back(), '\n') << "piece " << i;
      }
    }
    whole += piece.text;
  }
  return whole;
}

TEST(Records, LongTextDocumentComesInPiecesCutAtLineEnds) {
  testing::TempDir dir;
  std::string text;
  std::mt19937 random(7);
  uint64_t line = 1;
  while (text.size() < (size_t{7} << 19)) {  // 3.5 MiB
    const size_t length = random() % 300;
    for (size_t i = 0; i < length; ++i) text += (i % 7 == 3) ? "\xE4\xB8\x96" : "x";
    text += "\n";
    ++line;
  }
  text += "tail without newline";
  write_bytes(dir.file("big.txt"), text);
  auto read = read_one(dir.file("big.txt"));
  ASSERT_TRUE(read.status.ok()) << read.status.message();
  ASSERT_GE(read.records.size(), 3u);
  EXPECT_EQ(join_pieces(read, true), text);
  // Each piece's origin is the line it starts on.
  size_t offset = 0;
  for (const Record& piece : read.records) {
    EXPECT_EQ(piece.origin.line, 1 + std::count(text.begin(), text.begin() + long(offset), '\n'));
    offset += piece.text.size();
  }

  // With a separator: the long document in pieces, then the short one whole.
  write_bytes(dir.file("two.txt"), text + "\n%\nshort\n");
  DatasetOptions options;
  options.document_separator = "%";
  auto two = read_all({dir.file("two.txt")}, options);
  ASSERT_TRUE(two.status.ok()) << two.status.message();
  ASSERT_GE(two.records.size(), 4u);
  EXPECT_EQ(two.records.back().text, "short\n");
  EXPECT_EQ(two.records.back().origin.line, line + 2);
  two.records.pop_back();
  EXPECT_EQ(join_pieces(two, true), text + "\n");
}

TEST(Records, LongLineIsCutAtCharacterBoundaries) {
  testing::TempDir dir;
  std::string text = "x";  // odd offset: the two-byte characters straddle every power of two
  while (text.size() < (size_t{3} << 20)) text += "\xC3\xA9";
  write_bytes(dir.file("line.txt"), text);
  auto read = read_one(dir.file("line.txt"));
  ASSERT_TRUE(read.status.ok()) << read.status.message();
  EXPECT_EQ(read.stats.malformed, 0u);
  ASSERT_GE(read.records.size(), 3u);
  EXPECT_EQ(join_pieces(read, false), text);
  for (const Record& piece : read.records) EXPECT_EQ(piece.origin.line, 1u);
}

TEST(Records, InvalidPieceOfLongDocumentKeepsTheDocumentEnded) {
  testing::TempDir dir;
  std::string line(1000, 'y');
  line += "\n";
  std::string text;
  while (text.size() < (size_t{5} << 19)) text += line;  // 2.5 MiB: three pieces
  text += "\xFF\n";                                      // in the last piece
  write_bytes(dir.file("f.txt"), text + "%\nnext\n");
  DatasetOptions options;
  options.document_separator = "%";
  auto read = read_all({dir.file("f.txt")}, options);
  ASSERT_TRUE(read.status.ok()) << read.status.message();
  EXPECT_EQ(read.stats.malformed, 1u);
  ASSERT_EQ(read.reports.size(), 1u);
  EXPECT_TRUE(has_substr(read.reports[0], "invalid UTF-8 at byte offset " + std::to_string(text.size() - 2)));
  // Pieces handed out before the bad one, an empty closing piece, then the next document.
  ASSERT_GE(read.records.size(), 3u);
  EXPECT_EQ(read.records.back().text, "next\n");
  const Record& closing = read.records[read.records.size() - 2];
  EXPECT_TRUE(closing.ends_document);
  EXPECT_EQ(closing.text, "");
  for (size_t i = 0; i + 2 < read.records.size(); ++i) EXPECT_FALSE(read.records[i].ends_document);
}

// ---- JSONL ----

TEST(Records, JsonlDocuments) {
  testing::TempDir dir;
  const std::string path = dir.file("d.jsonl");
  write_bytes(path,
              "{\"text\": \"plain\", \"id\": 1}\n"
              "\n"
              "{\"id\": 2, \"text\": \"caf\\u00e9 \\ud83d\\ude42 \\\"q\\\"\\nline\"}\r\n"
              "   \n"
              "{\"text\": \"日本語のテキスト\", \"n\": 123456789012345678901234567890}\n"
              "{\"text\": \"\"}\n"
              "{\"text\": \"last, no newline\"}");
  auto read = read_one(path);
  ASSERT_TRUE(read.status.ok()) << read.status.message();
  EXPECT_EQ(texts(read), (std::vector<std::string>{"plain", "caf\xC3\xA9 \xF0\x9F\x99\x82 \"q\"\nline",
                                                   "日本語のテキスト", "last, no newline"}));
  EXPECT_EQ(lines(read), (std::vector<uint64_t>{1, 3, 5, 7}));
  EXPECT_EQ(read.stats.malformed, 0u);
  EXPECT_TRUE(read.reports.empty());

  // Another text field; ".ndjson" is JSONL too.
  write_bytes(dir.file("e.ndjson"), "{\"content\": \"x\"}\n{\"content\": \"y\"}\n");
  DatasetOptions options;
  options.text_field = "content";
  auto other = read_all({dir.file("e.ndjson")}, options);
  ASSERT_TRUE(other.status.ok()) << other.status.message();
  EXPECT_EQ(texts(other), (std::vector<std::string>{"x", "y"}));

  write_bytes(dir.file("empty.jsonl"), "");
  auto empty = read_one(dir.file("empty.jsonl"));
  ASSERT_TRUE(empty.status.ok()) << empty.status.message();
  EXPECT_TRUE(empty.records.empty());
  EXPECT_EQ(empty.stats.files, 1u);
}

TEST(Records, JsonlMalformedLinesAreCountedReportedAndSkipped) {
  testing::TempDir dir;
  const std::string path = dir.file("m.jsonl");
  std::string deep(100000, '[');
  const std::string huge_truncated = "{\"text\": \"" + std::string(5'000'000, 'z');  // 5 MB, no closing quote
  const std::string huge_valid = "{\"text\": \"" + std::string(5'000'000, 'w') + "\"}";
  std::string garbage;
  std::mt19937 random(3);
  for (int i = 0; i < 4000; ++i) {
    const char c = static_cast<char>(random() % 256);
    garbage += c == '\n' ? ' ' : c;
  }
  const std::vector<std::string> lines_in = {
      "{\"text\": \"ok 1\"}",                // 1
      "{\"text\": \"truncated",              // 2
      "{\"text\": 42}",                      // 3
      "{\"body\": \"no text key\"}",         // 4
      "{\"text\": \"bad \xC3\x28 utf8\"}",   // 5
      deep,                                  // 6
      huge_truncated,                        // 7
      garbage,                               // 8
      "[1, 2, 3]",                           // 9
      "\"just a string\"",                   // 10
      "{\"text\": \"ok 2\"}",                // 11
      huge_valid,                            // 12
      "{\"text\": null}",                    // 13
      "{\"text\": \"x\", \"n\": 1e999999}",  // 14
  };
  std::string bytes;
  for (const std::string& line : lines_in) bytes += line + "\n";
  write_bytes(path, bytes);

  DatasetOptions options;
  options.format = DatasetFormat::Jsonl;
  auto read = read_all({path}, options);
  ASSERT_TRUE(read.status.ok()) << read.status.message();
  ASSERT_EQ(read.records.size(), 3u);
  EXPECT_EQ(read.records[0].text, "ok 1");
  EXPECT_EQ(read.records[1].text, "ok 2");
  EXPECT_EQ(read.records[2].text.size(), 5'000'000u);
  EXPECT_EQ(lines(read), (std::vector<uint64_t>{1, 11, 12}));
  EXPECT_EQ(read.stats.malformed, 11u);
  ASSERT_EQ(read.reports.size(), 11u);
  const std::vector<std::pair<int, std::string>> expected = {
      {2, "invalid JSON"},
      {3, "key \"text\" is number, expected a string"},
      {4, "missing key \"text\""},
      {5, "invalid UTF-8 at byte offset " + std::to_string(bytes.find("\xC3\x28"))},
      {6, "JSON nested deeper than 256 levels"},
      {7, "invalid JSON"},
      {8, "invalid"},
      {9, "the record is array, expected a JSON object"},
      {10, "the record is string, expected a JSON object"},
      {13, "key \"text\" is null, expected a string"},
      {14, "invalid JSON: number overflow"},
  };
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(
        has_substr(read.reports[i], path + ":" + std::to_string(expected[i].first) + ": " + expected[i].second));
  }

  options.strict = true;
  auto strict = read_all({path}, options);
  ASSERT_FALSE(strict.status.ok());
  EXPECT_TRUE(has_substr(strict.status.message(), path + ":2: invalid JSON"));
  EXPECT_EQ(strict.records.size(), 1u);
  EXPECT_TRUE(strict.reports.empty());
}

TEST(Records, JsonlLineOverTheLimitIsMalformedNotHeld) {
  testing::TempDir dir;
  const std::string path = dir.file("long.jsonl");
  {
    std::ofstream out(path, std::ios::binary);
    out << "{\"text\": \"";
    const std::string block(1 << 20, 'a');
    for (int i = 0; i < 65; ++i) out << block;
    out << "\"}\n{\"text\": \"after\"}\n";
  }
  auto read = read_one(path);
  ASSERT_TRUE(read.status.ok()) << read.status.message();
  EXPECT_EQ(texts(read), (std::vector<std::string>{"after"}));
  EXPECT_EQ(lines(read), (std::vector<uint64_t>{2}));
  ASSERT_EQ(read.reports.size(), 1u);
  EXPECT_TRUE(has_substr(read.reports[0], path + ":1: line longer than 64 MiB"));
}

TEST(Records, MalformedReportsAreCappedPerFile) {
  testing::TempDir dir;
  std::string bytes;
  for (int i = 0; i < 30; ++i) bytes += "{oops\n";
  bytes += "{\"text\": \"fine\"}\n";
  write_bytes(dir.file("a.jsonl"), bytes);
  write_bytes(dir.file("b.jsonl"), "{\"text\": \"b\"}\n{bad\n");
  DatasetOptions options;
  options.format = DatasetFormat::Jsonl;
  auto read = read_all({dir.file("a.jsonl"), dir.file("b.jsonl")}, options);
  ASSERT_TRUE(read.status.ok()) << read.status.message();
  EXPECT_EQ(texts(read), (std::vector<std::string>{"fine", "b"}));
  EXPECT_EQ(read.stats.malformed, 31u);
  ASSERT_EQ(read.reports.size(), 22u);
  EXPECT_TRUE(has_substr(read.reports[19], dir.file("a.jsonl") + ":20: "));
  EXPECT_EQ(read.reports[20], dir.file("a.jsonl") + ": ... 10 more malformed records");
  EXPECT_TRUE(has_substr(read.reports[21], dir.file("b.jsonl") + ":2: invalid JSON"));
}

// ---- JSON arrays ----

TEST(Records, JsonArrayIsStreamedElementByElement) {
  testing::TempDir dir;
  const std::string path = dir.file("alpaca_data.json");
  write_bytes(path,
              "\xEF\xBB\xBF[\n"                                               // 1 (byte order mark)
              "  {\n"                                                         // 2
              "    \"instruction\": \"Give [three] {tips}, \\\"now\\\"\",\n"  // 3
              "    \"input\": \"\",\n"
              "    \"output\": \"1. eat ]]\"\n"
              "  },\n"
              "  {\"instruction\": \"Übersetze\", \"input\": \"hello\", \"output\": \"hallo\"},\n"  // 7
              "  {\"instruction\": \"sys\", \"output\": \"o\", \"system\": \"Be brief.\"}\n"        // 8
              "]\n");
  auto read = read_one(path);
  ASSERT_TRUE(read.status.ok()) << read.status.message();
  ASSERT_EQ(read.records.size(), 3u);
  EXPECT_EQ(turns(read.records[0]),
            (std::vector<std::string>{"user: Give [three] {tips}, \"now\"", "assistant: 1. eat ]]"}));
  EXPECT_EQ(turns(read.records[1]), (std::vector<std::string>{"user: Übersetze\n\nhello", "assistant: hallo"}));
  EXPECT_EQ(turns(read.records[2]), (std::vector<std::string>{"system: Be brief.", "user: sys", "assistant: o"}));
  EXPECT_EQ(lines(read), (std::vector<uint64_t>{2, 7, 8}));
  EXPECT_EQ(read.stats.bytes, read.total_bytes);

  // Documents in an array; an empty array.
  write_bytes(dir.file("docs.json"), "[{\"text\": \"a\"},{\"text\": \"b\"}]");
  write_bytes(dir.file("none.json"), "  [ ]  ");
  auto docs = read_all({dir.file("docs.json"), dir.file("none.json")});
  ASSERT_TRUE(docs.status.ok()) << docs.status.message();
  EXPECT_EQ(texts(docs), (std::vector<std::string>{"a", "b"}));
}

TEST(Records, JsonArrayMalformedElements) {
  testing::TempDir dir;
  const std::string path = dir.file("m.json");
  write_bytes(path,
              "[{\"text\": \"one\"},\n"  // 1
              " {\"text\": tru},\n"      // 2: invalid literal
              " {\"text\": 5},\n"        // 3
              " " +
                  std::string(300, '[') + std::string(300, ']') +
                  ",\n"                     // 4: too deep
                  " {\"text\": \"two\"}\n"  // 5
                  "] trailing\n");          // 6
  auto read = read_one(path, DatasetFormat::Jsonl);
  ASSERT_TRUE(read.status.ok()) << read.status.message();
  EXPECT_EQ(texts(read), (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(lines(read), (std::vector<uint64_t>{1, 5}));
  ASSERT_EQ(read.reports.size(), 4u);
  EXPECT_TRUE(has_substr(read.reports[0], path + ":2: invalid JSON"));
  EXPECT_TRUE(has_substr(read.reports[1], path + ":3: key \"text\" is number"));
  EXPECT_TRUE(has_substr(read.reports[2], path + ":4: JSON nested deeper than 256 levels"));
  EXPECT_TRUE(has_substr(read.reports[3], path + ":6: unexpected data after the JSON array"));

  // Truncated inside an element: the elements before it are kept.
  write_bytes(dir.file("cut.json"), "[{\"text\": \"one\"}, {\"text\": \"tw");
  auto cut = read_one(dir.file("cut.json"));
  ASSERT_TRUE(cut.status.ok()) << cut.status.message();
  EXPECT_EQ(texts(cut), (std::vector<std::string>{"one"}));
  ASSERT_EQ(cut.reports.size(), 1u);
  EXPECT_TRUE(has_substr(cut.reports[0], "cut.json:1: truncated JSON"));

  // Missing the closing bracket.
  write_bytes(dir.file("open.json"), "[{\"text\": \"one\"},\n");
  auto open = read_one(dir.file("open.json"));
  ASSERT_TRUE(open.status.ok()) << open.status.message();
  EXPECT_EQ(texts(open), (std::vector<std::string>{"one"}));
  ASSERT_EQ(open.reports.size(), 1u);
  EXPECT_TRUE(has_substr(open.reports[0], "open.json:2: truncated JSON array"));

  DatasetOptions strict;
  strict.strict = true;
  auto failed = read_all({path}, strict);
  ASSERT_FALSE(failed.status.ok());
  EXPECT_TRUE(has_substr(failed.status.message(), path + ":2: invalid JSON"));
}

// ---- conversations ----

TEST(Records, AlpacaJsonl) {
  testing::TempDir dir;
  const std::string path = dir.file("a.jsonl");
  write_bytes(
      path,
      "{\"instruction\": \"Add 2+2\", \"input\": \"\", \"output\": \"4\"}\n"
      "{\"instruction\": \"Translate\", \"input\": \"chat\", \"output\": \"cat\", \"system\": \"You translate.\"}\n"
      "{\"instruction\": \"no input key\", \"output\": \"fine\", \"input\": null}\n"
      "{\"instruction\": \"missing output\"}\n"
      "{\"instruction\": \"x\", \"input\": 3, \"output\": \"y\"}\n");
  auto read = read_one(path);
  ASSERT_TRUE(read.status.ok()) << read.status.message();
  ASSERT_EQ(read.records.size(), 3u);
  EXPECT_TRUE(read.records[0].is_conversation());
  EXPECT_EQ(turns(read.records[0]), (std::vector<std::string>{"user: Add 2+2", "assistant: 4"}));
  EXPECT_EQ(turns(read.records[1]),
            (std::vector<std::string>{"system: You translate.", "user: Translate\n\nchat", "assistant: cat"}));
  EXPECT_EQ(turns(read.records[2]), (std::vector<std::string>{"user: no input key", "assistant: fine"}));
  ASSERT_EQ(read.reports.size(), 2u);
  EXPECT_TRUE(has_substr(read.reports[0], path + ":4: missing key \"output\""));
  EXPECT_TRUE(has_substr(read.reports[1], path + ":5: key \"input\" is number, expected a string"));
}

TEST(Records, ShareGptConversations) {
  testing::TempDir dir;
  const std::string path = dir.file("s.jsonl");
  write_bytes(
      path,
      "{\"conversations\": [{\"from\": \"system\", \"value\": \"S\"}, {\"from\": \"human\", \"value\": \"Hi 👋\"},"
      " {\"from\": \"gpt\", \"value\": \"Hello\"}, {\"from\": \"user\", \"value\": \"u\"},"
      " {\"from\": \"assistant\", \"value\": \"a\"}]}\n"
      "{\"conversations\": [{\"from\": \"human\", \"value\": \"only a question\"}]}\n"
      "{\"conversations\": []}\n"
      "{\"conversations\": [{\"from\": \"function_call\", \"value\": \"f\"}]}\n"
      "{\"conversations\": [{\"from\": \"bot\", \"value\": \"f\"}]}\n"
      "{\"conversations\": [{\"from\": \"human\"}]}\n"
      "{\"conversations\": \"text\"}\n"
      "{\"system\": \"top\", \"conversations\": [{\"from\": \"human\", \"value\": \"q\"}, {\"from\": \"gpt\", "
      "\"value\": \"r\"}]}\n"
      // LLaMA-Factory's tool form: tools as JSON text, function_call and observation turns.
      "{\"tools\": \"[{\\\"name\\\": \\\"f\\\"}]\", \"conversations\": [{\"from\": \"human\", \"value\": \"q\"},"
      " {\"from\": \"function_call\", \"value\": \"{\\\"name\\\": \\\"f\\\", \\\"arguments\\\": {\\\"z\\\": 1, "
      "\\\"a\\\": 2}}\"},"
      " {\"from\": \"observation\", \"value\": \"3\"}, {\"from\": \"gpt\", \"value\": \"done\"}]}\n"
      "{\"tools\": 5, \"conversations\": [{\"from\": \"human\", \"value\": \"q\"}]}\n"
      "{\"conversations\": [{\"from\": \"function_call\", \"value\": \"[{\\\"arguments\\\": {}}]\"}]}\n");
  auto read = read_one(path);
  ASSERT_TRUE(read.status.ok()) << read.status.message();
  ASSERT_EQ(read.records.size(), 4u);
  EXPECT_EQ(turns(read.records[0]),
            (std::vector<std::string>{"system: S", "user: Hi 👋", "assistant: Hello", "user: u", "assistant: a"}));
  // No assistant message: still a record (the tokenizer stage counts it as all-masked).
  EXPECT_EQ(turns(read.records[1]), (std::vector<std::string>{"user: only a question"}));
  EXPECT_EQ(turns(read.records[2]), (std::vector<std::string>{"system: top", "user: q", "assistant: r"}));
  const Record& tools = read.records[3];
  EXPECT_EQ(turns(tools), (std::vector<std::string>{"user: q", "assistant: ", "tool: 3", "assistant: done"}));
  EXPECT_EQ(tools.tools, (std::vector<std::string>{R"({"name":"f"})"}));
  ASSERT_EQ(tools.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(tools.messages[1].tool_calls[0].name, "f");
  EXPECT_EQ(tools.messages[1].tool_calls[0].arguments, R"({"z":1,"a":2})");  // key order kept
  EXPECT_TRUE(tools.messages[1].tool_calls[0].arguments_is_json);
  EXPECT_EQ(lines(read), (std::vector<uint64_t>{1, 2, 8, 9}));
  ASSERT_EQ(read.reports.size(), 7u);
  EXPECT_TRUE(has_substr(read.reports[0], path + ":3: empty conversation"));
  EXPECT_TRUE(has_substr(read.reports[1], path + ":4: conversations[0]: the function_call value is not JSON"));
  EXPECT_TRUE(has_substr(read.reports[2], path + ":5: conversations[0]: unsupported role \"bot\""));
  EXPECT_TRUE(has_substr(read.reports[3], path + ":6: conversations[0]: missing key \"value\""));
  EXPECT_TRUE(has_substr(read.reports[4], path + ":7: key \"conversations\" is string, expected an array"));
  EXPECT_TRUE(has_substr(read.reports[5], path + ":10: tools: expected a JSON array, found number"));
  EXPECT_TRUE(has_substr(read.reports[6], path + ":11: conversations[0]: call 0: missing key \"name\""));
}

TEST(Records, OpenAiMessages) {
  testing::TempDir dir;
  const std::string path = dir.file("o.json");
  write_bytes(
      path,
      "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": \"Q\"},"
      " {\"role\": \"assistant\", \"content\": \"A\", \"reasoning_content\": \"think\"}]}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"Q\"}, {\"role\": \"assistant\", \"content\": null,"
      " \"tool_calls\": [{\"id\": \"1\"}]}]}\n"
      "{\"messages\": [{\"role\": \"function\", \"content\": \"r\"}]}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"x\"}]}]}\n"
      "{\"messages\": []}\n"
      "{\"messages\": [\"hi\"]}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"no answer\"}]}\n"
      "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {}}}],"
      " \"messages\": [{\"role\": \"user\", \"content\": \"Q\"}, {\"role\": \"assistant\", \"content\": null,"
      " \"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"f\","
      " \"arguments\": \"{\\\"x\\\": 1}\"}}]}, {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"2\"},"
      " {\"role\": \"assistant\", \"content\": \"It is 2.\"}]}\n"
      "{\"tools\": [\"f\"], \"messages\": [{\"role\": \"user\", \"content\": \"Q\"}]}\n");
  auto read = read_one(path);
  ASSERT_TRUE(read.status.ok()) << read.status.message();
  ASSERT_EQ(read.records.size(), 3u);
  EXPECT_EQ(turns(read.records[0]), (std::vector<std::string>{"system: S", "user: Q", "assistant: A"}));
  EXPECT_EQ(read.records[0].messages[2].reasoning_content, std::optional<std::string>("think"));
  EXPECT_EQ(read.records[0].messages[1].reasoning_content, std::nullopt);
  EXPECT_EQ(turns(read.records[1]), (std::vector<std::string>{"user: no answer"}));
  const Record& tools = read.records[2];
  EXPECT_EQ(turns(tools), (std::vector<std::string>{"user: Q", "assistant: ", "tool: 2", "assistant: It is 2."}));
  EXPECT_EQ(tools.tools, (std::vector<std::string>{R"({"type":"function","function":{"name":"f","parameters":{}}})"}));
  ASSERT_EQ(tools.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(tools.messages[1].tool_calls[0].id, "c1");
  EXPECT_EQ(tools.messages[1].tool_calls[0].arguments, R"({"x": 1})");
  EXPECT_FALSE(tools.messages[1].tool_calls[0].arguments_is_json);
  EXPECT_TRUE(read.records[0].tools.empty());
  EXPECT_EQ(lines(read), (std::vector<uint64_t>{1, 7, 8}));
  ASSERT_EQ(read.reports.size(), 6u);
  EXPECT_TRUE(has_substr(read.reports[0], path + ":2: messages[1].tool_calls[0].function is missing"));
  EXPECT_TRUE(has_substr(read.reports[1], path + ":3: messages[0]: role 'function' is not supported"));
  EXPECT_TRUE(has_substr(read.reports[2], path + ":4: messages[0]: content must be a string or null, found array"));
  EXPECT_TRUE(has_substr(read.reports[3], path + ":5: empty conversation"));
  EXPECT_TRUE(has_substr(read.reports[4], path + ":6: messages[0]: expected an object, found string"));
  EXPECT_TRUE(has_substr(read.reports[5], path + ":9: tools[0]: expected an object, found string"));

  DatasetOptions strict;
  strict.strict = true;
  auto failed = read_all({path}, strict);
  ASSERT_FALSE(failed.status.ok());
  EXPECT_TRUE(has_substr(failed.status.message(), path + ":2: messages[1].tool_calls[0]"));
}

TEST(Records, AutoDecidesPerFile) {
  testing::TempDir dir;
  write_bytes(dir.file("1.jsonl"), "\n{\"text\": \"doc\", \"messages\": 1}\n");  // "messages" wins
  write_bytes(dir.file("2.jsonl"), "{\"text\": \"doc\"}\n");
  write_bytes(dir.file("3.json"), "[{\"instruction\": \"i\", \"output\": \"o\"}]");
  write_bytes(dir.file("4.jsonl"), "{\"conversations\": [{\"from\": \"human\", \"value\": \"h\"}]}\n");
  write_bytes(dir.file("5.csv"), "id,text\n1,from csv\n");
  write_bytes(dir.file("6.md"), "# markdown\n");
  write_bytes(dir.file("7.JSONL"), "garbage line\n{\"messages\": [{\"role\": \"user\", \"content\": \"m\"}]}\n");
  auto read = read_all({dir.file("2.jsonl"), dir.file("3.json"), dir.file("4.jsonl"), dir.file("5.csv"),
                        dir.file("6.md"), dir.file("7.JSONL")});
  ASSERT_TRUE(read.status.ok()) << read.status.message();
  ASSERT_EQ(read.records.size(), 6u);
  EXPECT_EQ(read.records[0].text, "doc");
  EXPECT_EQ(turns(read.records[1]), (std::vector<std::string>{"user: i", "assistant: o"}));
  EXPECT_EQ(turns(read.records[2]), (std::vector<std::string>{"user: h"}));
  EXPECT_EQ(read.records[3].text, "from csv");
  EXPECT_EQ(read.records[4].text, "# markdown\n");
  EXPECT_EQ(turns(read.records[5]), (std::vector<std::string>{"user: m"}));
  EXPECT_EQ(read.stats.malformed, 1u);  // 7.JSONL's first line

  // "messages" that is not a list: OpenAi, so every record is malformed.
  auto first = read_one(dir.file("1.jsonl"));
  ASSERT_TRUE(first.status.ok());
  EXPECT_TRUE(first.records.empty());
  EXPECT_EQ(first.stats.malformed, 1u);

  // Unexpected shapes are errors from open() naming the file.
  write_bytes(dir.file("odd.jsonl"), "{\"prompt\": \"p\", \"completion\": \"c\"}\n");
  auto odd = read_one(dir.file("odd.jsonl"));
  ASSERT_FALSE(odd.status.ok());
  EXPECT_TRUE(has_substr(odd.status.message(), dir.file("odd.jsonl") + ":1: cannot tell the dataset format"));
  EXPECT_TRUE(has_substr(odd.status.message(), "keys prompt, completion"));
  write_bytes(dir.file("numbers.json"), "[1, 2, 3]");
  auto numbers = read_one(dir.file("numbers.json"));
  ASSERT_FALSE(numbers.status.ok());
  EXPECT_TRUE(has_substr(numbers.status.message(), dir.file("numbers.json") + ": cannot tell the dataset format"));
  write_bytes(dir.file("c.jsonl.gz"), "\x1F\x8B");
  auto compressed = read_one(dir.file("c.jsonl.gz"));
  ASSERT_FALSE(compressed.status.ok());
  EXPECT_TRUE(has_substr(compressed.status.message(), "c.jsonl.gz: compressed files are not supported"));
}

// ---- CSV ----

TEST(Records, CsvRfc4180) {
  testing::TempDir dir;
  const std::string path = dir.file("c.csv");
  write_bytes(path,
              "\xEF\xBB\xBFid,text,note\r\n"                // 1
              "1,plain text,x\r\n"                          // 2
              "2,\"with, comma and \"\"quotes\"\"\",y\r\n"  // 3
              "\r\n"                                        // 4 (blank)
              "3,\"multi\nline\r\nfield\",z\n"              // 5-7
              "4,Grüße 🙂,\n"                           // 8
              "5,\"\",empty text skipped\n"                 // 9
              "6,\"last\",\"no newline\"");                 // 10
  auto read = read_one(path);
  ASSERT_TRUE(read.status.ok()) << read.status.message();
  EXPECT_EQ(texts(read), (std::vector<std::string>{"plain text", "with, comma and \"quotes\"", "multi\nline\r\nfield",
                                                   "Grüße 🙂", "last"}));
  EXPECT_EQ(lines(read), (std::vector<uint64_t>{2, 3, 5, 8, 10}));
  EXPECT_EQ(read.stats.malformed, 0u);

  DatasetOptions options;
  options.text_field = "note";
  options.format = DatasetFormat::Csv;
  auto note = read_all({path}, options);
  ASSERT_TRUE(note.status.ok()) << note.status.message();
  EXPECT_EQ(texts(note), (std::vector<std::string>{"x", "y", "z", "empty text skipped", "no newline"}));

  write_bytes(dir.file("empty.csv"), "");
  write_bytes(dir.file("header_only.csv"), "text\n");
  auto empty = read_all({dir.file("empty.csv"), dir.file("header_only.csv")});
  ASSERT_TRUE(empty.status.ok()) << empty.status.message();
  EXPECT_TRUE(empty.records.empty());
}

TEST(Records, CsvMissingColumnIsAnErrorListingTheColumns) {
  testing::TempDir dir;
  write_bytes(dir.file("c.csv"), "id,body,\"odd, name\"\n1,b,c\n");
  auto read = read_one(dir.file("c.csv"));
  ASSERT_FALSE(read.status.ok());
  EXPECT_TRUE(has_substr(read.status.message(), dir.file("c.csv") + ": no column \"text\""));
  EXPECT_TRUE(has_substr(read.status.message(), "\"id\", \"body\", \"odd, name\""));
}

TEST(Records, CsvMalformedRows) {
  testing::TempDir dir;
  const std::string path = dir.file("m.csv");
  write_bytes(path,
              "text,label\n"        // 1
              "good one,1\n"        // 2
              "too,many,fields\n"   // 3
              "too few\n"           // 4
              "\"bad \xFF\",1\n"    // 5
              "\"quoted\"junk,1\n"  // 6
              "good two,2\n"        // 7
              "\"unbalanced,3\n"    // 8
              "swallowed,4\n");
  auto read = read_one(path);
  ASSERT_TRUE(read.status.ok()) << read.status.message();
  EXPECT_EQ(texts(read), (std::vector<std::string>{"good one", "good two"}));
  EXPECT_EQ(read.stats.malformed, 5u);
  ASSERT_EQ(read.reports.size(), 5u);
  EXPECT_TRUE(has_substr(read.reports[0], path + ":3: row has 3 fields, the header has 2"));
  EXPECT_TRUE(has_substr(read.reports[1], path + ":4: row has 1 fields, the header has 2"));
  EXPECT_TRUE(has_substr(read.reports[2], path + ":5: invalid UTF-8 in column \"text\" at byte 4"));
  EXPECT_TRUE(has_substr(read.reports[3], path + ":6: unexpected character after a closing quote"));
  EXPECT_TRUE(has_substr(read.reports[4], path + ":8: unterminated quoted field"));

  DatasetOptions strict;
  strict.strict = true;
  auto failed = read_all({path}, strict);
  ASSERT_FALSE(failed.status.ok());
  EXPECT_TRUE(has_substr(failed.status.message(), path + ":3: row has 3 fields"));
}

// ---- Parquet delegation ----

TEST(Records, ParquetFilesAreCheckedByTheirColumns) {
  testing::TempDir dir;
  write_bytes(dir.file("not.parquet"), "this is not a parquet file at all");
  auto bad = read_one(dir.file("not.parquet"));
  ASSERT_FALSE(bad.status.ok());
  EXPECT_TRUE(has_substr(bad.status.message(), dir.file("not.parquet")));
  // A Parquet file cannot be read as JSONL.
  auto wrong = read_one(dir.file("not.parquet"), DatasetFormat::Jsonl);
  ASSERT_FALSE(wrong.status.ok());
  EXPECT_TRUE(has_substr(wrong.status.message(), "cannot be read as jsonl"));
}

// The DuckDB-written fixtures parquet_test.cpp reads (KIPP_PARQUET_FIXTURES; skipped unset).
std::string parquet_fixture(const std::string& name) {
  const char* folder = std::getenv("KIPP_PARQUET_FIXTURES");
  return folder == nullptr || *folder == '\0' ? std::string() : std::string(folder) + "/" + name;
}

TEST(Records, ParquetFilesByTheirColumns) {
  const std::string text = parquet_fixture("text_zstd_v2.parquet");
  const std::string alpaca = parquet_fixture("alpaca.parquet");
  if (text.empty()) GTEST_SKIP() << "KIPP_PARQUET_FIXTURES is not set";
  ASSERT_TRUE(std::filesystem::is_regular_file(text) && std::filesystem::is_regular_file(alpaca));

  // Auto: a "text" column is documents, instruction + output columns are Alpaca.
  auto read = read_all({alpaca, text});
  ASSERT_TRUE(read.status.ok()) << read.status.message();
  size_t conversations = 0, documents = 0;
  for (const Record& record : read.records) {
    if (record.is_conversation()) {
      EXPECT_EQ(record.origin.file, alpaca);
      EXPECT_EQ(record.messages.front().role, "user");
      EXPECT_EQ(record.messages.back().role, "assistant");
      ++conversations;
    } else {
      EXPECT_EQ(record.origin.file, text);
      ++documents;
    }
  }
  EXPECT_GT(conversations, 0u);
  EXPECT_GT(documents, 0u);
  EXPECT_EQ(read.records.front().origin.line, 1u);
  // Null texts are malformed rows, reported once with file and row.
  EXPECT_GT(read.stats.malformed, 0u);
  ASSERT_FALSE(read.reports.empty());
  EXPECT_TRUE(has_substr(read.reports[0], text + ":"));
  EXPECT_TRUE(has_substr(read.reports[0], ": column \"text\" is null"));
  EXPECT_FALSE(has_substr(read.reports[0], "row ")) << "the row is named once";
  EXPECT_EQ(read.stats.bytes, read.total_bytes);
  EXPECT_EQ(read.stats.files, 2u);

  DatasetOptions strict;
  strict.strict = true;
  auto failed = read_all({text}, strict);
  ASSERT_FALSE(failed.status.ok());
  EXPECT_TRUE(has_substr(failed.status.message(), text + ":"));

  // A missing text column, or Alpaca without its columns: errors from open() listing the columns.
  DatasetOptions body;
  body.text_field = "body";
  auto missing = read_all({text}, body);
  ASSERT_FALSE(missing.status.ok());
  EXPECT_TRUE(has_substr(missing.status.message(), text));
  EXPECT_TRUE(has_substr(missing.status.message(), "\"id\", \"text\", \"category\""));
  auto not_alpaca = read_one(text, DatasetFormat::Alpaca);
  ASSERT_FALSE(not_alpaca.status.ok());
  EXPECT_TRUE(has_substr(not_alpaca.status.message(), "\"instruction\" and \"output\""));
}

// ---- robustness ----

TEST(Records, BinaryGarbageNeverCrashes) {
  testing::TempDir dir;
  std::mt19937 random(11);
  std::string garbage;
  for (int i = 0; i < 200000; ++i) garbage += static_cast<char>(random() % 256);
  for (const char* name : {"g.txt", "g.jsonl", "g.csv", "g.json"}) write_bytes(dir.file(name), garbage);
  write_bytes(dir.file("h.json"), "[" + garbage);
  write_bytes(dir.file("i.csv"), "text\n" + garbage);

  auto text = read_one(dir.file("g.txt"));
  ASSERT_TRUE(text.status.ok()) << text.status.message();
  EXPECT_TRUE(text.records.empty());
  EXPECT_EQ(text.stats.malformed, 1u);
  EXPECT_TRUE(has_substr(text.reports.at(0), dir.file("g.txt") + ":1: invalid UTF-8 at byte offset"));

  auto auto_json = read_one(dir.file("g.jsonl"));
  ASSERT_FALSE(auto_json.status.ok());
  EXPECT_TRUE(has_substr(auto_json.status.message(), dir.file("g.jsonl")));

  for (const char* name : {"g.jsonl", "g.csv", "g.json", "h.json", "i.csv"}) {
    for (DatasetFormat format :
         {DatasetFormat::Jsonl, DatasetFormat::Csv, DatasetFormat::Alpaca, DatasetFormat::OpenAi}) {
      DatasetOptions options;
      options.format = format;
      auto read = read_all({dir.file(name)}, options);
      if (!read.status.ok()) {
        EXPECT_TRUE(has_substr(read.status.message(), dir.file(name)));
        continue;
      }
      // Random lines of a one-column CSV may be valid rows; everything else is malformed.
      if (std::string(name) != "i.csv") {
        EXPECT_TRUE(read.records.empty()) << name;
      }
      EXPECT_GT(read.stats.malformed, 0u) << name;
    }
  }
}

TEST(Records, VanishedFileIsAnErrorNamingIt) {
  testing::TempDir dir;
  write_bytes(dir.file("a.txt"), "a");
  write_bytes(dir.file("b.txt"), "b");
  auto reader = RecordReader::open({dir.file("a.txt"), dir.file("b.txt")}, {});
  ASSERT_TRUE(reader.ok()) << reader.message();
  std::filesystem::remove(dir.file("b.txt"));
  Record record;
  auto first = (*reader)->next(record);
  ASSERT_TRUE(first.ok() && *first);
  EXPECT_EQ(record.text, "a");
  auto second = (*reader)->next(record);
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(has_substr(second.message(), dir.file("b.txt")));

  auto missing = RecordReader::open({dir.file("b.txt")}, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(has_substr(missing.message(), dir.file("b.txt")));
}

// AddressSanitizer keeps freed memory in quarantine (256 MiB by default) instead of reusing it,
// so resident memory there says nothing about the reader; the release build checks the bound.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderAsan = true;
#else
constexpr bool kUnderAsan = false;
#endif

// Peak resident memory (VmHWM) in KiB, after resetting it where the kernel allows.
uint64_t peak_rss_kib(bool reset) {
  if (reset) {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";
  }
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmHWM:")) return std::stoull(line.substr(6));
  }
  return 0;
}

uint64_t current_rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmRSS:")) return std::stoull(line.substr(6));
  }
  return 0;
}

TEST(Records, MemoryStaysBoundedWhateverTheFileSize) {
  if (kUnderAsan) GTEST_SKIP() << "ASan's quarantine keeps freed memory resident";
  testing::TempDir dir;
  const std::string path = dir.file("huge.txt");
  const uint64_t lines_per_block = 16384;
  {
    std::ofstream out(path, std::ios::binary);
    std::string block;
    for (uint64_t i = 0; i < lines_per_block; ++i)
      block += "the quick brown fox jumps over the lazy dog " + std::to_string(i % 10) + "\n";
    while (static_cast<uint64_t>(out.tellp()) < (uint64_t{200} << 20)) out << block;
  }
  const uint64_t size = std::filesystem::file_size(path);
  peak_rss_kib(true);
  const uint64_t before = std::max(peak_rss_kib(false), current_rss_kib());
  auto reader = RecordReader::open({path}, {});
  ASSERT_TRUE(reader.ok()) << reader.message();
  Record record;
  uint64_t bytes = 0, pieces = 0;
  while (true) {
    auto more = (*reader)->next(record);
    ASSERT_TRUE(more.ok()) << more.message();
    if (!*more) break;
    bytes += record.text.size();
    ++pieces;
  }
  const uint64_t after = peak_rss_kib(false);
  EXPECT_EQ(bytes, size);
  EXPECT_GE(pieces, 150u);
  EXPECT_EQ((*reader)->stats().bytes, size);
  EXPECT_LT(after - std::min(after, before), uint64_t{64} << 10)
      << "peak RSS grew from " << before << " to " << after << " KiB";
}

TEST(Records, JsonArrayMemoryStaysBounded) {
  if (kUnderAsan) GTEST_SKIP() << "ASan's quarantine keeps freed memory resident";
  testing::TempDir dir;
  const std::string path = dir.file("big.json");
  const std::string value(1 << 20, 'v');
  {
    std::ofstream out(path, std::ios::binary);
    out << "[\n";
    for (int i = 0; i < 100; ++i) out << (i ? ",\n" : "") << "{\"text\": \"" << value << "\"}";
    out << "\n]\n";
  }
  peak_rss_kib(true);
  const uint64_t before = std::max(peak_rss_kib(false), current_rss_kib());
  auto reader = RecordReader::open({path}, {});
  ASSERT_TRUE(reader.ok()) << reader.message();
  Record record;
  uint64_t records = 0;
  while (true) {
    auto more = (*reader)->next(record);
    ASSERT_TRUE(more.ok()) << more.message();
    if (!*more) break;
    ASSERT_EQ(record.text.size(), value.size());
    EXPECT_EQ(record.origin.line, 2 + records);
    ++records;
  }
  const uint64_t after = peak_rss_kib(false);
  EXPECT_EQ(records, 100u);
  EXPECT_EQ((*reader)->stats().malformed, 0u);
  EXPECT_LT(after - std::min(after, before), uint64_t{64} << 10)
      << "peak RSS grew from " << before << " to " << after << " KiB";
}

}  // namespace
}  // namespace kipp::data
