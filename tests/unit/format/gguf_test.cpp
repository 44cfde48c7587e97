#include "format/gguf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

namespace kipp {
namespace {

using Bytes = std::vector<uint8_t>;

// --- helpers -------------------------------------------------------------------------------

Bytes pattern_bytes(size_t size, uint8_t seed) {
  Bytes out(size);
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<uint8_t>(seed + 7 * i);
  return out;
}

std::vector<std::span<const uint8_t>> spans_of(const std::vector<Bytes>& buffers) {
  return {buffers.begin(), buffers.end()};
}

Bytes read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A scratch directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() / ("kipp_gguf_" + std::to_string(::getpid()) + "_" + info->name());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Every value type, edge values included: the metadata the round-trip tests write.
std::vector<GgufMetadataEntry> every_value_type() {
  const float signalling_nan = std::bit_cast<float>(uint32_t{0x7f800001});
  const float negative_payload_nan = std::bit_cast<float>(uint32_t{0xffc01234});
  const double f64_nan = std::bit_cast<double>(uint64_t{0x7ff8000000000abcull});
  std::vector<GgufMetadataEntry> out = {
      {"general.architecture", GgufValue::string("qwen3")},
      {"t.u8", GgufValue::u8(255)},
      {"t.i8", GgufValue::i8(-128)},
      {"t.u16", GgufValue::u16(65535)},
      {"t.i16", GgufValue::i16(-32768)},
      {"t.u32", GgufValue::u32(4000000000u)},
      {"t.i32", GgufValue::i32(std::numeric_limits<int32_t>::min())},
      {"t.u64", GgufValue::u64(std::numeric_limits<uint64_t>::max())},
      {"t.i64", GgufValue::i64(std::numeric_limits<int64_t>::min())},
      {"t.f32", GgufValue::f32(1e-6f)},
      {"t.f32.negzero", GgufValue::f32(-0.0f)},
      {"t.f32.inf", GgufValue::f32(-std::numeric_limits<float>::infinity())},
      {"t.f32.snan", GgufValue::f32(signalling_nan)},
      {"t.f32.nan", GgufValue::f32(negative_payload_nan)},
      {"t.f64", GgufValue::f64(1000000.0)},
      {"t.f64.nan", GgufValue::f64(f64_nan)},
      {"t.bool.true", GgufValue::boolean(true)},
      {"t.bool.false", GgufValue::boolean(false)},
      {"t.string", GgufValue::string("h\xc3\xa9llo \"world\"\n")},
      {"t.string.empty", GgufValue::string("")},
      {"t.string.nul", GgufValue::string(std::string("a\0b", 3))},
      {"t.a.u8", GgufValue::array(GgufValueType::UINT8, {GgufValue::u8(0), GgufValue::u8(200)})},
      {"t.a.i8", GgufValue::array(GgufValueType::INT8, {GgufValue::i8(-1)})},
      {"t.a.u16", GgufValue::array(GgufValueType::UINT16, {GgufValue::u16(1), GgufValue::u16(2)})},
      {"t.a.i16", GgufValue::array(GgufValueType::INT16, {GgufValue::i16(-300)})},
      {"t.a.u32", GgufValue::u32_array({1, 2, 3})},
      {"t.a.i32", GgufValue::i32_array({1, -3, 4, 5})},
      {"t.a.u64", GgufValue::array(GgufValueType::UINT64, {GgufValue::u64(1ull << 40)})},
      {"t.a.i64", GgufValue::array(GgufValueType::INT64, {GgufValue::i64(-(1ll << 40))})},
      {"t.a.f32", GgufValue::f32_array({0.5f, signalling_nan, -0.0f})},
      {"t.a.f64", GgufValue::array(GgufValueType::FLOAT64, {GgufValue::f64(f64_nan), GgufValue::f64(2.5)})},
      {"t.a.bool", GgufValue::array(GgufValueType::BOOL, {GgufValue::boolean(true), GgufValue::boolean(false)})},
      {"t.a.string", GgufValue::string_array({"a", "", "\xc4\xa0t", "left right"})},
      {"t.a.empty.u32", GgufValue::u32_array({})},
      {"t.a.empty.string", GgufValue::string_array({})},
      {"t.a.empty.array", GgufValue::array(GgufValueType::ARRAY, {})},
      {"t.a.nested", GgufValue::array(GgufValueType::ARRAY, {GgufValue::u32_array({1, 2}), GgufValue::u32_array({}),
                                                             GgufValue::u32_array({7})})},
      {"t.a.nested3", GgufValue::array(GgufValueType::ARRAY,
                                       {GgufValue::array(GgufValueType::ARRAY, {GgufValue::string_array({"x", "y"})}),
                                        GgufValue::array(GgufValueType::STRING, {})})},
  };
  return out;
}

struct TensorSpec {
  std::string name;
  std::vector<uint64_t> dims;
  GgmlType type;
};

// Tensors of every known type; sizes chosen so some need padding and some do not.
std::vector<TensorSpec> mixed_tensors() {
  return {
      {"token_embd.weight", {4, 3}, GgmlType::BF16},             // 24 bytes: padded
      {"blk.0.attn_norm.weight", {8}, GgmlType::F32},            // 32 bytes
      {"blk.0.attn_q.weight", {32, 2}, GgmlType::Q8_0},          // 68 bytes
      {"blk.0.ffn_up.weight", {64, 1, 1}, GgmlType::Q4_1},       // 40 bytes
      {"blk.0.ffn_down.weight", {32, 1, 1, 2}, GgmlType::Q4_0},  // 36 bytes
      {"output_norm.weight", {5}, GgmlType::F16},                // 10 bytes
  };
}

struct Built {
  Bytes file;
  std::vector<Bytes> data;
};

Built build_file(const std::vector<GgufMetadataEntry>& metadata, const std::vector<TensorSpec>& tensors,
                 uint32_t alignment) {
  GgufWriter writer;
  writer.set_alignment(alignment);
  for (const auto& entry : metadata) writer.add_metadata(entry.key, entry.value);
  Built built;
  for (size_t i = 0; i < tensors.size(); ++i) {
    writer.add_tensor(tensors[i].name, tensors[i].dims, tensors[i].type);
    uint64_t elements = 1;
    for (uint64_t dim : tensors[i].dims) elements *= dim;
    built.data.push_back(pattern_bytes(*ggml_tensor_bytes(tensors[i].type, elements), static_cast<uint8_t>(i)));
  }
  auto bytes = writer.to_bytes(spans_of(built.data));
  EXPECT_TRUE(bytes.ok()) << bytes.message();
  if (bytes.ok()) built.file = std::move(bytes).value();
  return built;
}

// Hand-assembled bytes for malformed files the writer refuses to produce.
class Raw {
 public:
  Raw& u8(uint8_t v) {
    bytes_.push_back(v);
    return *this;
  }
  Raw& u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Raw& u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Raw& str(std::string_view s) {
    u64(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return *this;
  }
  Raw& header(uint64_t tensors, uint64_t kvs) { return u32(GgufFile::kMagic).u32(3).u64(tensors).u64(kvs); }
  Raw& key(std::string_view name, GgufValueType type) { return str(name).u32(static_cast<uint32_t>(type)); }
  Raw& tensor(std::string_view name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t dim : dims) u64(dim);
    return u32(type).u64(offset);
  }
  Raw& align(size_t alignment = 32) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(0);
    return *this;
  }
  Raw& zeros(size_t count) {
    bytes_.insert(bytes_.end(), count, 0);
    return *this;
  }
  const Bytes& bytes() const { return bytes_; }

 private:
  Bytes bytes_;
};

constexpr uint32_t kF32 = 0;
constexpr uint32_t kQ8_0 = 8;

// Parses `bytes`, expecting failure; returns the message.
std::string parse_error(const Bytes& bytes) {
  auto parsed = GgufFile::parse(bytes);
  EXPECT_FALSE(parsed.ok()) << "parse unexpectedly succeeded";
  return parsed.ok() ? std::string() : parsed.message();
}

// --- values --------------------------------------------------------------------------------

TEST(GgufValue, TypedAccessors) {
  EXPECT_EQ(GgufValue::u32(7).as_uint(), 7u);
  EXPECT_EQ(GgufValue::u32(7).as_int(), 7);
  EXPECT_EQ(GgufValue::i8(-5).as_int(), -5);
  EXPECT_FALSE(GgufValue::i8(-5).as_uint().has_value());
  EXPECT_EQ(GgufValue::i64(5).as_uint(), 5u);
  EXPECT_FALSE(GgufValue::u64(std::numeric_limits<uint64_t>::max()).as_int().has_value());
  EXPECT_FALSE(GgufValue::f32(1.0f).as_uint().has_value());
  EXPECT_EQ(GgufValue::f32(0.25f).as_float(), 0.25);
  EXPECT_EQ(GgufValue::f64(0.1).as_float(), 0.1);
  EXPECT_FALSE(GgufValue::u8(1).as_bool().has_value());
  EXPECT_EQ(GgufValue::boolean(true).as_bool(), true);
  EXPECT_EQ(*GgufValue::string("x").as_string(), "x");
  EXPECT_EQ(GgufValue::u8(1).as_string(), nullptr);
  EXPECT_EQ(GgufValue::u8(1).as_array(), nullptr);
  const auto tokens = GgufValue::string_array({"a", "b"});
  EXPECT_EQ(tokens.type(), GgufValueType::ARRAY);
  EXPECT_EQ(tokens.array_type(), GgufValueType::STRING);
  EXPECT_EQ(tokens.as_array()->size(), 2u);
  EXPECT_EQ(tokens.as_string_array(), (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(GgufValue::u32_array({1}).as_string_array().has_value());
}

TEST(GgufValue, EqualityIsExact) {
  EXPECT_EQ(GgufValue::u32(1), GgufValue::u32(1));
  EXPECT_NE(GgufValue::u32(1), GgufValue::u64(1));  // same number, other wire type
  EXPECT_NE(GgufValue::f32(0.0f), GgufValue::f32(-0.0f));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(GgufValue::f32(nan), GgufValue::f32(nan));  // bits, not IEEE comparison
  EXPECT_NE(GgufValue::u32_array({}), GgufValue::i32_array({}));
  EXPECT_NE(GgufValue::u32_array({1, 2}), GgufValue::u32_array({1, 3}));
}

TEST(GgufValue, Describe) {
  EXPECT_EQ(GgufValue::u32(1000000).describe(), "1000000");
  EXPECT_EQ(GgufValue::i32(-3).describe(), "-3");
  EXPECT_EQ(GgufValue::u64(std::numeric_limits<uint64_t>::max()).describe(), "18446744073709551615");
  EXPECT_EQ(GgufValue::f32(1e-6f).describe(), "0.000001");
  EXPECT_EQ(GgufValue::f32(1000000.0f).describe(), "1000000");
  EXPECT_EQ(GgufValue::f32(1e-20f).describe(), "1e-20");
  EXPECT_EQ(GgufValue::f32(std::numeric_limits<float>::max()).describe(), "3.4028235e+38");
  EXPECT_EQ(GgufValue::f32(std::bit_cast<float>(uint32_t{0x7fc00000})).describe(), "nan");
  EXPECT_EQ(GgufValue::f64(-std::numeric_limits<double>::infinity()).describe(), "-inf");
  EXPECT_EQ(GgufValue::f64(0.1).describe(), "0.1");
  EXPECT_EQ(GgufValue::boolean(false).describe(), "false");
  EXPECT_EQ(GgufValue::string("qwen3").describe(), "\"qwen3\"");
  EXPECT_EQ(GgufValue::string("a\"b\\c\n\x01").describe(), "\"a\\\"b\\\\c\\n\\x01\"");
  const std::string long_text(100, 'x');
  EXPECT_EQ(GgufValue::string(long_text).describe(), "\"" + std::string(60, 'x') + "...\" (100 bytes)");
  // A cut never splits a UTF-8 sequence: 59 ASCII bytes then a 2-byte character at 59..60.
  const std::string utf8 = std::string(59, 'x') + "\xc3\xa9" + std::string(10, 'y');
  EXPECT_EQ(GgufValue::string(utf8).describe(), "\"" + std::string(59, 'x') + "...\" (71 bytes)");
  EXPECT_EQ(GgufValue::string_array({"!", "\"", "#", "$", "%", "&"}).describe(),
            "[6 x string: \"!\", \"\\\"\", \"#\", \"$\", ...]");
  EXPECT_EQ(GgufValue::u32_array({1, 2}).describe(), "[2 x u32: 1, 2]");
  EXPECT_EQ(GgufValue::u32_array({}).describe(), "[0 x u32]");
  EXPECT_EQ(GgufValue::array(GgufValueType::ARRAY, {GgufValue::u32_array({1})}).describe(), "[1 x array]");
}

// --- round trips ---------------------------------------------------------------------------

TEST(GgufRoundTrip, EveryValueTypeKeepsTypeAndBits) {
  const auto metadata = every_value_type();
  const Built built = build_file(metadata, {}, 32);
  auto parsed = GgufFile::parse(built.file);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  EXPECT_EQ(parsed->version(), 3u);
  EXPECT_EQ(parsed->alignment(), 32u);
  EXPECT_TRUE(parsed->tensors().empty());
  ASSERT_EQ(parsed->metadata().size(), metadata.size());  // no implicit general.alignment
  for (size_t i = 0; i < metadata.size(); ++i) {
    EXPECT_EQ(parsed->metadata()[i].key, metadata[i].key);
    EXPECT_EQ(parsed->metadata()[i].value, metadata[i].value) << metadata[i].key;
    EXPECT_EQ(parsed->metadata()[i].value.type(), metadata[i].value.type()) << metadata[i].key;
  }
  EXPECT_EQ(parsed->find("t.f32.snan")->bits(), 0x7f800001u);
  EXPECT_EQ(parsed->find("t.f32.nan")->bits(), 0xffc01234u);
  EXPECT_EQ(parsed->find("t.f64.nan")->bits(), 0x7ff8000000000abcull);
  EXPECT_EQ(parsed->find("t.a.f32")->as_array()->at(1).bits(), 0x7f800001u);
  EXPECT_EQ(*parsed->find("t.string.nul")->as_string(), std::string("a\0b", 3));
  EXPECT_EQ(parsed->find("t.i64")->as_int(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(parsed->find("t.a.nested")->as_array()->at(0), GgufValue::u32_array({1, 2}));
  EXPECT_EQ(parsed->find("missing"), nullptr);
}

TEST(GgufRoundTrip, TensorsAtDefaultAlignment) {
  const auto specs = mixed_tensors();
  const Built built = build_file({{"general.architecture", GgufValue::string("qwen3")}}, specs, 32);
  auto parsed = GgufFile::parse(built.file);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  EXPECT_EQ(parsed->alignment(), 32u);
  EXPECT_EQ(parsed->find(GgufFile::kAlignmentKey), nullptr);
  EXPECT_EQ(parsed->data_offset() % 32, 0u);
  EXPECT_EQ(built.file.size() % 32, 0u);
  ASSERT_EQ(parsed->tensors().size(), specs.size());
  uint64_t expected_offset = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const GgufTensorInfo& info = parsed->tensors()[i];
    EXPECT_EQ(info.name, specs[i].name);
    EXPECT_EQ(info.dims, specs[i].dims);
    EXPECT_EQ(info.type, specs[i].type);
    EXPECT_EQ(info.offset, expected_offset) << info.name;  // declaration order, aligned
    EXPECT_EQ(info.size_bytes, built.data[i].size());
    expected_offset = (info.offset + info.size_bytes + 31) / 32 * 32;

    const auto view = parsed->tensor_data(info);
    EXPECT_EQ(view.data(), built.file.data() + parsed->data_offset() + info.offset);
    EXPECT_TRUE(std::equal(view.begin(), view.end(), built.data[i].begin(), built.data[i].end())) << info.name;
    EXPECT_EQ(parsed->find_tensor(specs[i].name), &info);
  }
  EXPECT_EQ(parsed->tensors()[2].element_count(), 64u);
  EXPECT_EQ(parsed->find_tensor("missing.weight"), nullptr);
  // Padding between tensors is zeros: bf16 [4,3] is 24 bytes, the next tensor starts at 32.
  for (uint64_t i = 24; i < 32; ++i) EXPECT_EQ(built.file[parsed->data_offset() + i], 0u);
}

TEST(GgufRoundTrip, NonDefaultAlignmentIsRecorded) {
  const auto specs = mixed_tensors();
  const Built built = build_file({{"general.architecture", GgufValue::string("qwen3")}}, specs, 64);
  auto parsed = GgufFile::parse(built.file);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  EXPECT_EQ(parsed->alignment(), 64u);
  const GgufValue* alignment = parsed->find(GgufFile::kAlignmentKey);
  ASSERT_NE(alignment, nullptr);
  EXPECT_EQ(*alignment, GgufValue::u32(64));
  EXPECT_EQ(parsed->metadata().back().key, GgufFile::kAlignmentKey);
  EXPECT_EQ(parsed->data_offset() % 64, 0u);
  for (const auto& info : parsed->tensors()) EXPECT_EQ(info.offset % 64, 0u) << info.name;
  EXPECT_EQ(built.file.size() % 64, 0u);
}

TEST(GgufRoundTrip, ExplicitAlignmentKeyIsNotDuplicated) {
  GgufWriter writer;
  writer.add_metadata("general.architecture", GgufValue::string("qwen3"));
  writer.add_metadata(std::string(GgufFile::kAlignmentKey), GgufValue::u32(128));
  writer.add_metadata("general.name", GgufValue::string("x"));
  writer.add_tensor("a", {3}, GgmlType::F32);
  writer.add_tensor("b", {3}, GgmlType::F32);
  const Bytes a = pattern_bytes(12, 1), b = pattern_bytes(12, 2);
  auto bytes = writer.to_bytes({a, b});
  ASSERT_TRUE(bytes.ok()) << bytes.message();
  auto parsed = GgufFile::parse(*bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  EXPECT_EQ(parsed->alignment(), 128u);
  ASSERT_EQ(parsed->metadata().size(), 3u);
  EXPECT_EQ(parsed->metadata()[1].key, GgufFile::kAlignmentKey);  // where the caller put it
  EXPECT_EQ(parsed->tensors()[1].offset, 128u);

  // set_alignment() after the key updates the key, so the two never disagree.
  writer.set_alignment(256);
  auto again = writer.to_bytes({a, b});
  ASSERT_TRUE(again.ok()) << again.message();
  auto reparsed = GgufFile::parse(*again);
  ASSERT_TRUE(reparsed.ok()) << reparsed.message();
  EXPECT_EQ(reparsed->alignment(), 256u);
  EXPECT_EQ(reparsed->metadata().size(), 3u);
}

TEST(GgufRoundTrip, RewriteIsByteIdentical) {
  for (uint32_t alignment : {32u, 64u, 1u}) {
    const Built built = build_file(every_value_type(), mixed_tensors(), alignment);
    auto parsed = GgufFile::parse(built.file);
    ASSERT_TRUE(parsed.ok()) << parsed.message();
    auto rewritten = reserialize_gguf(*parsed);
    ASSERT_TRUE(rewritten.ok()) << rewritten.message();
    EXPECT_EQ(*rewritten, built.file) << "alignment " << alignment;
  }
}

TEST(GgufRoundTrip, FileWritersMatchInMemoryBytes) {
  TempDir dir;
  const auto specs = mixed_tensors();
  const Built built = build_file(every_value_type(), specs, 64);

  // write_all
  GgufWriter writer;
  writer.set_alignment(64);
  for (const auto& entry : every_value_type()) writer.add_metadata(entry.key, entry.value);
  for (const auto& spec : specs) writer.add_tensor(spec.name, spec.dims, spec.type);
  const std::string first = dir.file("first.gguf");
  ASSERT_TRUE(writer.write_all(first, spans_of(built.data)).ok());
  const Bytes first_bytes = read_file_bytes(first);
  EXPECT_EQ(first_bytes, built.file);

  // Streaming, from the parsed first file.
  auto parsed = GgufFile::parse(first_bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  GgufWriter streaming;
  streaming.set_alignment(parsed->alignment());
  for (const auto& entry : parsed->metadata()) streaming.add_metadata(entry.key, entry.value);
  for (const auto& info : parsed->tensors()) streaming.add_tensor(info.name, info.dims, info.type);
  const std::string second = dir.file("second.gguf");
  ASSERT_TRUE(streaming.begin(second).ok());
  EXPECT_FALSE(file_exists(second));  // appears only at finish()
  for (const auto& info : parsed->tensors()) {
    const Status status = streaming.write_tensor(info.name, parsed->tensor_data(info));
    ASSERT_TRUE(status.ok()) << status.message();
  }
  ASSERT_TRUE(streaming.finish().ok());
  EXPECT_EQ(read_file_bytes(second), first_bytes);
}

TEST(GgufRoundTrip, TensorPartsWriteTheSameBytes) {
  TempDir dir;
  const auto specs = mixed_tensors();
  const Built built = build_file(every_value_type(), specs, 32);
  auto parsed = GgufFile::parse(built.file);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  GgufWriter writer;
  for (const auto& entry : parsed->metadata()) writer.add_metadata(entry.key, entry.value);
  for (const auto& info : parsed->tensors()) writer.add_tensor(info.name, info.dims, info.type);
  const std::string path = dir.file("parts.gguf");
  ASSERT_TRUE(writer.begin(path).ok());
  for (const auto& info : parsed->tensors()) {
    const auto data = parsed->tensor_data(info);
    // Uneven pieces: 1 byte, then 7, then the rest.
    for (size_t offset = 0, piece = 1; offset < data.size(); offset += piece, piece = piece == 1 ? 7 : data.size()) {
      const Status status =
          writer.write_tensor_part(info.name, data.subspan(offset, std::min(piece, data.size() - offset)));
      ASSERT_TRUE(status.ok()) << status.message();
    }
  }
  ASSERT_TRUE(writer.finish().ok());
  EXPECT_EQ(read_file_bytes(path), built.file);
}

TEST(GgufWriterErrors, TensorPartsMustAddUpInOrder) {
  TempDir dir;
  GgufWriter writer;
  writer.add_tensor("a", {4}, GgmlType::F32);
  writer.add_tensor("b", {2}, GgmlType::BF16);
  const Bytes half(8), too_much(9), b(4);
  ASSERT_TRUE(writer.begin(dir.file("out.gguf")).ok());
  ASSERT_TRUE(writer.write_tensor_part("a", half).ok());
  EXPECT_NE(writer.write_tensor_part("b", b).message().find("out of order (expected 'a'"), std::string::npos);
  EXPECT_NE(writer.write_tensor("a", half).message().find("partly written"), std::string::npos);
  EXPECT_NE(writer.write_tensor_part("a", too_much).message().find("pieces exceed its 16 bytes"), std::string::npos);
  EXPECT_NE(writer.finish().message().find("after 0 of 2 tensors"), std::string::npos);
}

// --- writer misuse -------------------------------------------------------------------------

TEST(GgufWriterErrors, TensorOrderSizeAndCount) {
  TempDir dir;
  const std::string path = dir.file("out.gguf");
  GgufWriter writer;
  writer.add_tensor("a", {4}, GgmlType::F32);
  writer.add_tensor("b", {2}, GgmlType::BF16);
  const Bytes a(16), b(4), wrong(15);

  EXPECT_NE(writer.write_tensor("a", a).message().find("before begin()"), std::string::npos);
  ASSERT_TRUE(writer.begin(path).ok());
  EXPECT_NE(writer.begin(path).message().find("begin("), std::string::npos);
  auto out_of_order = writer.write_tensor("b", b);
  EXPECT_NE(out_of_order.message().find("out of order (expected 'a'"), std::string::npos) << out_of_order.message();
  auto wrong_size = writer.write_tensor("a", wrong);
  EXPECT_NE(wrong_size.message().find("15 bytes given (expected 16"), std::string::npos) << wrong_size.message();
  ASSERT_TRUE(writer.write_tensor("a", a).ok());
  auto early = writer.finish();
  EXPECT_NE(early.message().find("after 1 of 2 tensors (next expected: 'b')"), std::string::npos) << early.message();
  ASSERT_TRUE(writer.write_tensor("b", b).ok());
  EXPECT_NE(writer.write_tensor("c", b).message().find("after all 2 declared tensors"), std::string::npos);
  ASSERT_TRUE(writer.finish().ok());
  EXPECT_TRUE(file_exists(path));

  auto count = writer.write_all(dir.file("other.gguf"), {a});
  EXPECT_NE(count.message().find("1 tensor buffers given for 2 declared tensors"), std::string::npos);
  auto bad_size = writer.write_all(dir.file("other.gguf"), {a, wrong});
  EXPECT_FALSE(bad_size.ok());
  EXPECT_FALSE(file_exists(dir.file("other.gguf")));
  // Nothing but the two outputs: failed writes leave no temporary file behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()),
                          std::filesystem::directory_iterator()),
            1);
}

std::string layout_error(GgufWriter& writer) {
  auto bytes = writer.to_bytes({});
  EXPECT_FALSE(bytes.ok());
  return bytes.ok() ? std::string() : bytes.message();
}

TEST(GgufWriterErrors, InvalidDeclarationsAreRejected) {
  {
    GgufWriter writer;
    writer.set_alignment(48);
    EXPECT_NE(layout_error(writer).find("alignment 48 is not a power of two"), std::string::npos);
  }
  {
    GgufWriter writer;
    writer.add_metadata("k", GgufValue::u8(1));
    writer.add_metadata("k", GgufValue::u8(2));
    EXPECT_NE(layout_error(writer).find("metadata 'k': duplicate key"), std::string::npos);
  }
  {
    GgufWriter writer;
    writer.add_metadata("", GgufValue::u8(1));
    EXPECT_NE(layout_error(writer).find("is empty"), std::string::npos);
  }
  {
    GgufWriter writer;
    writer.add_metadata(std::string(GgufFile::kAlignmentKey), GgufValue::i32(64));
    EXPECT_NE(layout_error(writer).find("type i32 is not allowed (expected u32)"), std::string::npos);
  }
  {
    GgufWriter writer;
    writer.add_metadata("mixed", GgufValue::array(GgufValueType::UINT32, {GgufValue::u32(1), GgufValue::u8(2)}));
    EXPECT_NE(layout_error(writer).find("array element #1 has type u8 (expected u32)"), std::string::npos);
  }
  {
    GgufValue deep = GgufValue::u32_array({1});
    for (int i = 1; i < GgufFile::kMaxArrayDepth; ++i) deep = GgufValue::array(GgufValueType::ARRAY, {deep});
    GgufWriter ok_writer;
    ok_writer.add_metadata("deep", deep);  // exactly the limit
    EXPECT_TRUE(ok_writer.to_bytes({}).ok());
    GgufWriter writer;
    writer.add_metadata("deep", GgufValue::array(GgufValueType::ARRAY, {deep}));
    EXPECT_NE(layout_error(writer).find("nested deeper than 8 levels"), std::string::npos);
  }
  struct Case {
    std::vector<uint64_t> dims;
    GgmlType type;
    std::string name;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{}, GgmlType::F32, "t", "0 dimensions (expected 1 to 4)"},
      {{1, 1, 1, 1, 1}, GgmlType::F32, "t", "5 dimensions"},
      {{4, 0}, GgmlType::F32, "t", "dimension 1 is 0"},
      {{1ull << 62, 1ull << 62}, GgmlType::F32, "t", "dimension 1 is"},
      {{33}, GgmlType::Q8_0, "t", "dimension 0 (33) is not a multiple of the q8_0 block size 32"},
      {{4}, static_cast<GgmlType>(99), "t", "ggml type 99 is unknown"},
      {{4}, GgmlType::F32, "", "name length 0"},
      {{4}, GgmlType::F32, std::string(65, 'n'), "name length 65"},
  };
  for (const Case& c : cases) {
    GgufWriter writer;
    writer.add_tensor(c.name, c.dims, c.type);
    auto bytes = writer.to_bytes({Bytes{}});
    ASSERT_FALSE(bytes.ok()) << c.expected;
    EXPECT_NE(bytes.message().find(c.expected), std::string::npos) << bytes.message();
  }
  GgufWriter duplicate;
  duplicate.add_tensor("t", {4}, GgmlType::F32);
  duplicate.add_tensor("t", {4}, GgmlType::F32);
  auto bytes = duplicate.to_bytes({Bytes(16), Bytes(16)});
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.message().find("tensor 't': duplicate name"), std::string::npos);
}

// --- hostile input -------------------------------------------------------------------------

TEST(GgufParseErrors, EveryTruncationFails) {
  // The last tensor ends on the alignment, so no prefix is a valid file.
  const Built built = build_file({{"general.architecture", GgufValue::string("qwen3")},
                                  {"t.a", GgufValue::u32_array({1, 2, 3})},
                                  {"t.n", GgufValue::array(GgufValueType::ARRAY, {GgufValue::string_array({"x"})})},
                                  {"t.f", GgufValue::f64(1.5)}},
                                 {{"a", {32}, GgmlType::Q8_0}, {"b", {8}, GgmlType::F32}}, 32);
  ASSERT_TRUE(GgufFile::parse(built.file).ok());
  for (size_t size = 0; size < built.file.size(); ++size) {
    const Bytes prefix(built.file.begin(), built.file.begin() + static_cast<std::ptrdiff_t>(size));
    auto parsed = GgufFile::parse(prefix);
    ASSERT_FALSE(parsed.ok()) << "prefix of " << size << " bytes parsed";
    EXPECT_EQ(parsed.message().rfind("GGUF ", 0), 0u) << parsed.message();
  }
  EXPECT_EQ(parse_error(Bytes{}), "GGUF header: magic needs 4 bytes but only 0 are left in the file");
}

TEST(GgufParseErrors, Header) {
  EXPECT_EQ(parse_error(Raw().u32(0x46554746).u32(3).u64(0).u64(0).bytes()),
            "GGUF header: magic 0x46554746 is not \"GGUF\" (expected 0x46554747)");
  EXPECT_EQ(parse_error(Raw().u32(GgufFile::kMagic).u32(2).u64(0).u64(0).bytes()),
            "GGUF header: version 2 is not supported (expected 3)");
  EXPECT_EQ(parse_error(Raw().u32(GgufFile::kMagic).u32(4).u64(0).u64(0).bytes()),
            "GGUF header: version 4 is not supported (expected 3)");
  EXPECT_NE(parse_error(Raw().header(0, 1ull << 60).bytes()).find("GGUF header: kv_count 1152921504606846976"),
            std::string::npos);
  EXPECT_NE(parse_error(Raw().header(std::numeric_limits<uint64_t>::max(), 0).bytes())
                .find("GGUF header: tensor_count 18446744073709551615 is impossible"),
            std::string::npos);
  EXPECT_NE(parse_error(Raw().u32(GgufFile::kMagic).u32(3).u64(0).bytes()).find("kv_count needs 8 bytes"),
            std::string::npos);
  // The smallest valid file: a header with nothing in it.
  auto empty = GgufFile::parse(Raw().header(0, 0).bytes());
  ASSERT_TRUE(empty.ok()) << empty.message();
  EXPECT_EQ(empty->data_offset(), 32u);
}

TEST(GgufParseErrors, Metadata) {
  const uint64_t huge = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(parse_error(Raw().header(0, 1).u64(huge).zeros(8).bytes()),
            "GGUF metadata key #0: key length 18446744073709551615 exceeds the 8 bytes left in the file");
  EXPECT_EQ(parse_error(Raw().header(0, 1).str("").u32(0).u8(0).zeros(1).bytes()),
            "GGUF metadata key #0: key is empty (expected a non-empty string)");
  EXPECT_EQ(parse_error(Raw()
                            .header(0, 2)
                            .key("a", GgufValueType::UINT8)
                            .u8(1)
                            .key("x", GgufValueType::STRING)
                            .u64(huge)
                            .zeros(16)
                            .bytes()),
            "GGUF metadata key #1 ('x'): string length 18446744073709551615 exceeds the 16 bytes left in the file");
  EXPECT_EQ(parse_error(Raw().header(0, 1).str("x").u32(13).zeros(8).bytes()),
            "GGUF metadata key #0 ('x'): value type 13 is unknown (expected 0 to 12)");
  EXPECT_EQ(parse_error(Raw().header(0, 1).key("x", GgufValueType::ARRAY).u32(99).u64(0).bytes()),
            "GGUF metadata key #0 ('x'): array element type 99 is unknown (expected 0 to 12)");
  EXPECT_NE(parse_error(Raw().header(0, 1).key("x", GgufValueType::ARRAY).u32(4).u64(1ull << 40).zeros(64).bytes())
                .find("GGUF metadata key #0 ('x'): array length 1099511627776 exceeds what the 64 bytes"),
            std::string::npos);
  EXPECT_NE(parse_error(Raw().header(0, 1).key("x", GgufValueType::ARRAY).u32(8).u64(huge).zeros(64).bytes())
                .find("array length 18446744073709551615"),
            std::string::npos);
  EXPECT_EQ(parse_error(Raw().header(0, 1).key("x", GgufValueType::ARRAY).u32(8).u64(2).str("a").u64(99).bytes()),
            "GGUF metadata key #0 ('x'): array element #1: string length 99 exceeds the 0 bytes left in the file");
  EXPECT_EQ(parse_error(Raw().header(0, 1).key("b", GgufValueType::BOOL).u8(2).bytes()),
            "GGUF metadata key #0 ('b'): bool value 2 is invalid (expected 0 or 1)");
  EXPECT_EQ(
      parse_error(Raw().header(0, 2).key("k", GgufValueType::UINT8).u8(1).key("k", GgufValueType::UINT8).u8(2).bytes()),
      "GGUF metadata key #1 ('k'): duplicate key (first defined as key #0)");
  // Key names are escaped in messages.
  EXPECT_NE(parse_error(Raw().header(0, 1).str("a\nb").u32(13).bytes()).find("('a\\x0ab')"), std::string::npos);

  // Nine nested arrays are one too many; eight parse.
  auto nested = [](int levels) {
    Raw raw;
    raw.header(0, 1).key("deep", GgufValueType::ARRAY);
    for (int i = 1; i < levels; ++i) raw.u32(static_cast<uint32_t>(GgufValueType::ARRAY)).u64(1);
    raw.u32(static_cast<uint32_t>(GgufValueType::UINT8)).u64(1).u8(7);
    return raw.bytes();
  };
  EXPECT_TRUE(GgufFile::parse(nested(8)).ok());
  EXPECT_NE(parse_error(nested(9)).find("arrays are nested deeper than 8 levels"), std::string::npos);
}

TEST(GgufParseErrors, Alignment) {
  auto with_alignment = [](GgufValueType type, uint32_t value) {
    return Raw().header(0, 1).key("general.alignment", type).u32(value).bytes();
  };
  EXPECT_EQ(parse_error(with_alignment(GgufValueType::UINT32, 48)),
            "GGUF metadata 'general.alignment': 48 is not a power of two");
  EXPECT_EQ(parse_error(with_alignment(GgufValueType::UINT32, 0)),
            "GGUF metadata 'general.alignment': 0 is not a power of two");
  EXPECT_EQ(parse_error(with_alignment(GgufValueType::INT32, 64)),
            "GGUF metadata 'general.alignment': type i32 is not allowed (expected u32)");
  auto ok = GgufFile::parse(with_alignment(GgufValueType::UINT32, 16));
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(ok->alignment(), 16u);
}

// A file with one tensor entry written by `add` and enough zero data after it.
Bytes one_tensor(const std::function<void(Raw&)>& add, size_t data_bytes = 64) {
  Raw raw;
  raw.header(1, 0);
  add(raw);
  return raw.align().zeros(data_bytes).bytes();
}

TEST(GgufParseErrors, TensorDirectory) {
  EXPECT_EQ(parse_error(one_tensor([](Raw& r) { r.tensor("t", {}, kF32, 0); })),
            "GGUF tensor 't': n_dims 0 is out of range (expected 1 to 4)");
  EXPECT_EQ(parse_error(one_tensor([](Raw& r) {
              r.tensor("t", {1, 1, 1, 1, 1}, kF32, 0);
            })),
            "GGUF tensor 't': n_dims 5 is out of range (expected 1 to 4)");
  EXPECT_EQ(parse_error(one_tensor([](Raw& r) {
              r.tensor("t", {4, 0}, kF32, 0);
            })),
            "GGUF tensor 't': dimension 1 is 0 (expected 1 to 2^63-1)");
  EXPECT_NE(parse_error(one_tensor([](Raw& r) {
              r.tensor("t", {1ull << 40, 1ull << 40}, kF32, 0);
            })).find("element count (product of the dimensions) overflows"),
            std::string::npos);
  EXPECT_EQ(parse_error(one_tensor([](Raw& r) { r.tensor("t", {4}, 99, 0); })),
            "GGUF tensor 't': ggml type 99 is unknown (expected one of f32=0, f16=1, q4_0=2, q4_1=3, q8_0=8, "
            "bf16=30)");
  EXPECT_EQ(parse_error(one_tensor([](Raw& r) { r.tensor("t", {33}, kQ8_0, 0); })),
            "GGUF tensor 't': dimension 0 (33) is not a multiple of the q8_0 block size 32");
  EXPECT_EQ(parse_error(one_tensor([](Raw& r) { r.tensor("", {4}, kF32, 0); })),
            "GGUF tensor #0: name is empty (expected 1 to 64 bytes)");
  EXPECT_NE(parse_error(one_tensor([](Raw& r) {
              r.tensor(std::string(65, 'n'), {4}, kF32, 0);
            })).find("name length 65 exceeds the GGUF limit of 64 bytes"),
            std::string::npos);
  EXPECT_EQ(parse_error(one_tensor([](Raw& r) { r.u64(1000); })),
            "GGUF tensor #0: name length 1000 exceeds the 64 bytes left in the file");
  EXPECT_EQ(parse_error(one_tensor([](Raw& r) { r.tensor("blk.0.attn_q.weight", {4}, kF32, 100); })),
            "GGUF tensor 'blk.0.attn_q.weight': offset 100 is not a multiple of the alignment 32");
}

TEST(GgufParseErrors, TensorData) {
  // 4 f32 = 16 bytes at offset 64 in a 64-byte data section.
  EXPECT_EQ(parse_error(one_tensor([](Raw& r) { r.tensor("t", {4}, kF32, 64); })),
            "GGUF tensor 't': data at offset 64 with 16 bytes ends past the data section's 64 bytes");
  EXPECT_NE(parse_error(one_tensor([](Raw& r) {
              r.tensor("t", {4}, kF32, 0xffffffffffffffe0ull);
            })).find("ends past the data section"),
            std::string::npos);
  EXPECT_NE(
      parse_error(one_tensor([](Raw& r) { r.tensor("t", {1ull << 61}, kF32, 0); })).find("ends past the data section"),
      std::string::npos);
  // Nothing after the directory at all.
  EXPECT_NE(parse_error(Raw().header(1, 0).tensor("t", {4}, kF32, 0).bytes()).find("GGUF data section: starts at byte"),
            std::string::npos);

  auto two = [](uint64_t first_offset, uint64_t second_offset) {
    return Raw()
        .header(2, 0)
        .tensor("a", {16}, kF32, first_offset)
        .tensor("b", {16}, kF32, second_offset)
        .align()
        .zeros(128)
        .bytes();
  };
  EXPECT_EQ(parse_error(two(0, 32)), "GGUF tensor 'b': data [32, 96) overlaps tensor 'a' [0, 64)");
  EXPECT_EQ(parse_error(two(32, 0)), "GGUF tensor 'a': data [32, 96) overlaps tensor 'b' [0, 64)");
  EXPECT_EQ(parse_error(two(0, 0)), "GGUF tensor 'b': data [0, 64) overlaps tensor 'a' [0, 64)");
  // Listed out of offset order but disjoint: fine, and tensor_data follows the offsets.
  auto disjoint = GgufFile::parse(two(64, 0));
  ASSERT_TRUE(disjoint.ok()) << disjoint.message();
  EXPECT_EQ(disjoint->tensor_data(*disjoint->find_tensor("a")).data(),
            disjoint->tensor_data(*disjoint->find_tensor("b")).data() + 64);

  EXPECT_EQ(
      parse_error(Raw().header(2, 0).tensor("t", {4}, kF32, 0).tensor("t", {4}, kF32, 32).align().zeros(64).bytes()),
      "GGUF tensor 't': duplicate name (first defined as tensor #0)");
}

TEST(GgufParseErrors, ForeignTensorGetsEmptyView) {
  const Built built = build_file({}, {{"a", {4}, GgmlType::F32}}, 32);
  auto parsed = GgufFile::parse(built.file);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  GgufTensorInfo foreign = parsed->tensors()[0];
  foreign.offset = 1 << 20;
  EXPECT_TRUE(parsed->tensor_data(foreign).empty());
}

}  // namespace
}  // namespace kipp
