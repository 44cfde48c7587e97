// safetensors reader and writer: round trips, the byte layout the format specifies, sharded
// checkpoints, malformed files (each error must name the tensor and field), and an
// independent Python encoder/decoder (tools/test_safetensors_interop.py) as the oracle.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "core/half.h"
#include "format/safetensors.h"
#include "unit/helpers/test_assertions.h"

#ifndef KIPP_SOURCE_DIR
#error "KIPP_SOURCE_DIR must be defined (tests/CMakeLists.txt) to find tools/test_safetensors_interop.py"
#endif

using kipp::test_support::has_substr;

namespace {

namespace fs = std::filesystem;
using kipp::SafetensorsCheckpoint;
using kipp::SafetensorsDtype;
using kipp::SafetensorsFile;
using kipp::SafetensorsWriteTensor;

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("kipp_st_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string dir() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void append_u64(std::vector<uint8_t>& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

// A file with an arbitrary header text and data section, written by hand (not by our writer).
std::vector<uint8_t> raw_file(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> out;
  append_u64(out, header.size());
  out.insert(out.end(), header.begin(), header.end());
  for (size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<uint8_t>(i * 7 + 1));
  return out;
}

std::string write_raw(const TempDir& tmp, const std::string& header, size_t data_bytes) {
  const std::string path = tmp.file("raw.safetensors");
  write_bytes(path, raw_file(header, data_bytes));
  return path;
}

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// The fixture of tools/test_safetensors_interop.py, encoded on the C++ side.
struct FixtureTensor {
  std::string name;
  SafetensorsDtype dtype;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> bytes;
};

std::vector<FixtureTensor> interop_fixture() {
  std::vector<uint16_t> f16;
  for (float v : {1.0f, -2.5f, 0.0f, 65504.0f}) f16.push_back(kipp::f32_to_f16(v));
  std::vector<uint16_t> bf16;
  for (float v : {1.0f, -3.0f, 0.15625f}) bf16.push_back(kipp::f32_to_bf16(v));
  return {
      {"a.f32", SafetensorsDtype::F32, {2, 3}, bytes_of(std::vector<float>{-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f})},
      {"b.f16", SafetensorsDtype::F16, {4}, bytes_of(f16)},
      {"c.bf16", SafetensorsDtype::BF16, {3}, bytes_of(bf16)},
      {"d.i64",
       SafetensorsDtype::I64,
       {2, 2},
       bytes_of(std::vector<int64_t>{-(int64_t{1} << 40), 0, 1, int64_t{1} << 62})},
      {"e.u8", SafetensorsDtype::U8, {5}, {0, 1, 127, 128, 255}},
      {"f.bool", SafetensorsDtype::BOOL, {3}, {1, 0, 1}},
      {"g.scalar", SafetensorsDtype::F64, {}, bytes_of(std::vector<double>{3.25})},
      {"h.empty", SafetensorsDtype::F32, {0, 4}, {}},
      {"i.i16", SafetensorsDtype::I16, {2}, bytes_of(std::vector<int16_t>{-32768, 32767})},
      {"j.u16", SafetensorsDtype::U16, {2}, bytes_of(std::vector<uint16_t>{0, 65535})},
      {"k.i32", SafetensorsDtype::I32, {3}, bytes_of(std::vector<int32_t>{INT32_MIN, 0, INT32_MAX})},
      {"l.u32", SafetensorsDtype::U32, {1}, bytes_of(std::vector<uint32_t>{UINT32_MAX})},
      {"m.u64", SafetensorsDtype::U64, {1}, bytes_of(std::vector<uint64_t>{UINT64_MAX})},
      {"n.i8", SafetensorsDtype::I8, {2}, bytes_of(std::vector<int8_t>{-128, 127})},
  };
}

std::vector<SafetensorsWriteTensor> as_write_tensors(const std::vector<FixtureTensor>& fixture) {
  std::vector<SafetensorsWriteTensor> out;
  for (const FixtureTensor& t : fixture) out.push_back({t.name, t.dtype, t.shape, t.bytes});
  return out;
}

std::vector<uint8_t> to_vector(std::span<const uint8_t> bytes) { return {bytes.begin(), bytes.end()}; }

// Runs the Python oracle; returns its exit status and combined output.
std::pair<int, std::string> run_oracle(const TempDir& tmp, const std::string& mode, const std::string& file) {
  const std::string log = tmp.file("oracle.log");
  const std::string command = "/usr/bin/python3 '" KIPP_SOURCE_DIR "/tools/test_safetensors_interop.py' " + mode +
                              " '" + file + "' > '" + log + "' 2>&1";
  const int status = std::system(command.c_str());
  const std::vector<uint8_t> output = read_bytes(log);
  const int code = status == -1 ? -1 : (WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  return {code, std::string(output.begin(), output.end())};
}

// ----------------------------------------------------------------------------- round trip

TEST(Safetensors, RoundTripManyDtypesScalarEmptyAndMetadata) {
  TempDir tmp;
  const auto fixture = interop_fixture();
  const std::string path = tmp.file("model.safetensors");
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "caf\xc3\xa9 \"quoted\""}};
  ASSERT_TRUE(kipp::write_safetensors(path, as_write_tensors(fixture), metadata).ok());
  EXPECT_FALSE(fs::exists(path + ".tmp." + std::to_string(::getpid())));

  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_EQ(file->metadata(), metadata);
  ASSERT_EQ(file->tensors().size(), fixture.size());
  for (size_t i = 0; i < fixture.size(); ++i) {
    const auto& tensor = file->tensors()[i];  // data order == the order given to the writer
    EXPECT_EQ(tensor.name, fixture[i].name);
    EXPECT_EQ(tensor.dtype, fixture[i].dtype) << tensor.name;
    EXPECT_EQ(tensor.shape, fixture[i].shape) << tensor.name;
    EXPECT_EQ(to_vector(file->data(tensor)), fixture[i].bytes) << tensor.name;
    EXPECT_EQ(file->find(fixture[i].name), &tensor);
  }
  EXPECT_EQ(file->find("g.scalar")->element_count(), 1u);
  EXPECT_EQ(file->find("h.empty")->element_count(), 0u);
  EXPECT_TRUE(file->data(*file->find("h.empty")).empty());
  EXPECT_EQ(file->find("missing"), nullptr);
  EXPECT_EQ(file->path(), path);
}

TEST(Safetensors, NoTensorsAndNoMetadata) {
  TempDir tmp;
  const std::string path = tmp.file("empty.safetensors");
  ASSERT_TRUE(kipp::write_safetensors(path, {}).ok());
  EXPECT_EQ(read_bytes(path).size(), 16u);  // length 8, "{}" + 6 spaces
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_TRUE(file->tensors().empty());
  EXPECT_TRUE(file->metadata().empty());
}

TEST(Safetensors, DtypeNamesAndSizes) {
  EXPECT_EQ(kipp::safetensors_dtype_name(SafetensorsDtype::BF16), "BF16");
  EXPECT_EQ(kipp::safetensors_dtype_name(SafetensorsDtype::BOOL), "BOOL");
  EXPECT_EQ(kipp::safetensors_dtype_bytes(SafetensorsDtype::BOOL), 1u);
  EXPECT_EQ(kipp::safetensors_dtype_bytes(SafetensorsDtype::F16), 2u);
  EXPECT_EQ(kipp::safetensors_dtype_bytes(SafetensorsDtype::I32), 4u);
  EXPECT_EQ(kipp::safetensors_dtype_bytes(SafetensorsDtype::F64), 8u);
}

// ----------------------------------------------------------------------------- byte layout

// The spec: 8-byte little-endian N, N bytes of JSON starting with '{', space padding; the
// writer pads so the data section starts 8-aligned and lays tensors out contiguously.
TEST(Safetensors, ByteLayoutHeaderLengthPaddingAndOffsets) {
  TempDir tmp;
  const std::vector<uint8_t> w = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const std::vector<uint8_t> b = {0xaa, 0xbb};
  for (size_t name_length = 1; name_length <= 9; ++name_length) {  // covers every padding amount
    const std::string path = tmp.file("layout.safetensors");
    const std::string name(name_length, 'x');
    ASSERT_TRUE(
        kipp::write_safetensors(path, {{name, SafetensorsDtype::F32, {3}, w}, {"b", SafetensorsDtype::U8, {2}, b}})
            .ok());
    const std::vector<uint8_t> bytes = read_bytes(path);
    ASSERT_GE(bytes.size(), 8u);
    uint64_t header_length = 0;
    for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | bytes[static_cast<size_t>(i)];
    EXPECT_EQ(header_length % 8, 0u);
    ASSERT_EQ(bytes.size(), 8 + header_length + w.size() + b.size());
    const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header_length));
    EXPECT_EQ(header.front(), '{');
    const size_t close = header.rfind('}');
    EXPECT_LT(header.size() - close - 1, 8u);
    EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos) << "padding must be spaces";
    const auto json = nlohmann::ordered_json::parse(header);
    ASSERT_EQ(json.size(), 2u);
    EXPECT_EQ(json.begin().key(), name);  // given order
    EXPECT_EQ(json[name]["dtype"], "F32");
    EXPECT_EQ(json[name]["shape"], nlohmann::json::array({3}));
    EXPECT_EQ(json[name]["data_offsets"], nlohmann::json::array({0, 12}));
    EXPECT_EQ(json["b"]["data_offsets"], nlohmann::json::array({12, 14}));
    EXPECT_EQ(std::vector<uint8_t>(bytes.end() - 14, bytes.end() - 2), w);
    EXPECT_EQ(std::vector<uint8_t>(bytes.end() - 2, bytes.end()), b);
  }
}

TEST(Safetensors, ReadsHandWrittenHeaderWithSpacesAndOutOfOrderData) {
  TempDir tmp;
  // Keys in one order, data in the other, generous whitespace inside and after the JSON.
  const std::string header =
      "{ \"__metadata__\" : { \"format\" : \"pt\" } ,\n"
      "  \"first\" : { \"dtype\" : \"U8\", \"shape\" : [ 2 ], \"data_offsets\" : [ 4, 6 ] },\n"
      "  \"second\": { \"dtype\" : \"I16\", \"shape\" : [ 1, 2 ], \"data_offsets\" : [ 0, 4 ], \"extra\": 1 } }"
      "                 ";
  const std::string path = write_raw(tmp, header, 6);
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.message();
  ASSERT_EQ(file->tensors().size(), 2u);
  EXPECT_EQ(file->tensors()[0].name, "second");  // tensors() is in data order
  EXPECT_EQ(to_vector(file->data(*file->find("first"))), (std::vector<uint8_t>{29, 36}));
  EXPECT_EQ(to_vector(file->data(*file->find("second"))), (std::vector<uint8_t>{1, 8, 15, 22}));
  EXPECT_EQ(file->metadata().at("format"), "pt");
}

// ----------------------------------------------------------------------------- malformed files

std::string open_error(const std::string& path) {
  auto file = SafetensorsFile::open(path);
  EXPECT_FALSE(file.ok());
  return file.ok() ? std::string() : file.message();
}

std::string header_error(const TempDir& tmp, const std::string& header, size_t data_bytes) {
  return open_error(write_raw(tmp, header, data_bytes));
}

TEST(SafetensorsBadInput, MissingAndTruncatedFiles) {
  TempDir tmp;
  EXPECT_TRUE(has_substr(open_error(tmp.file("nope.safetensors")), "cannot open"));
  write_bytes(tmp.file("short"), {1, 2, 3, 4, 5});
  EXPECT_TRUE(has_substr(open_error(tmp.file("short")), "shorter than the 8-byte header length"));

  // A good file cut short: the last tensor's range now runs past the data section.
  const std::string path = tmp.file("cut.safetensors");
  ASSERT_TRUE(kipp::write_safetensors(path, {{"w", SafetensorsDtype::F32, {4}, std::vector<uint8_t>(16, 1)}}).ok());
  std::vector<uint8_t> bytes = read_bytes(path);
  bytes.resize(bytes.size() - 3);
  write_bytes(path, bytes);
  const std::string message = open_error(path);
  EXPECT_TRUE(has_substr(message, "tensor 'w'"));
  EXPECT_TRUE(has_substr(message, "data_offsets"));
  EXPECT_TRUE(has_substr(message, "end 16 is beyond the data section of 13 bytes"));
  // Cut inside the header.
  bytes.resize(20);
  write_bytes(path, bytes);
  EXPECT_TRUE(has_substr(open_error(path), "only 12 bytes follow"));
}

TEST(SafetensorsBadInput, HeaderLengthLargerThanFileOrAbsurd) {
  TempDir tmp;
  std::vector<uint8_t> bytes;
  append_u64(bytes, 1000);
  const std::string json = "{}";
  bytes.insert(bytes.end(), json.begin(), json.end());
  write_bytes(tmp.file("a"), bytes);
  const std::string message = open_error(tmp.file("a"));
  EXPECT_TRUE(has_substr(message, "header length field is 1000 bytes but only 2 bytes follow"));

  bytes.clear();
  append_u64(bytes, uint64_t{1} << 62);
  bytes.insert(bytes.end(), json.begin(), json.end());
  write_bytes(tmp.file("b"), bytes);
  EXPECT_TRUE(has_substr(open_error(tmp.file("b")), "above the limit"));
}

TEST(SafetensorsBadInput, InvalidJsonAndHeaderShape) {
  TempDir tmp;
  EXPECT_TRUE(has_substr(header_error(tmp, "{\"w\": {\"dtype\": \"F32\",", 0), "header is not valid JSON"));
  EXPECT_TRUE(has_substr(header_error(tmp, "{\"w\": 1} garbage", 0), "header is not valid JSON"));
  EXPECT_TRUE(has_substr(header_error(tmp, "[1, 2]", 0), "must begin with '{'"));
  EXPECT_TRUE(has_substr(header_error(tmp, "  {}", 0), "must begin with '{'"));
  EXPECT_TRUE(has_substr(header_error(tmp, "", 0), "must begin with '{'"));
  EXPECT_TRUE(has_substr(header_error(tmp, "{\"w\": 1}", 0), "tensor 'w': expected an object"));
  EXPECT_TRUE(has_substr(header_error(tmp, "{\"w\": {\"dtype\": \"F32\", \"data_offsets\": [0, 0]}}", 0),
                         "tensor 'w': missing field 'shape'"));
  EXPECT_TRUE(has_substr(header_error(tmp, "{\"__metadata__\": {\"n\": 3}}", 0), "'__metadata__': key 'n'"));
  EXPECT_TRUE(has_substr(header_error(tmp, "{\"__metadata__\": [1]}", 0), "'__metadata__'"));
}

TEST(SafetensorsBadInput, DuplicateTensorName) {
  TempDir tmp;
  const std::string entry = "{\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]}";
  EXPECT_TRUE(has_substr(header_error(tmp, "{\"w\": " + entry + ", \"w\": " + entry + "}", 1),
                         "names tensor 'w' more than once"));
}

TEST(SafetensorsBadInput, UnknownDtypeIsNamed) {
  TempDir tmp;
  const std::string message =
      header_error(tmp, "{\"w8\": {\"dtype\": \"F8_E4M3\", \"shape\": [2], \"data_offsets\": [0, 2]}}", 2);
  EXPECT_TRUE(has_substr(message, "tensor 'w8'"));
  EXPECT_TRUE(has_substr(message, "field 'dtype'"));
  EXPECT_TRUE(has_substr(message, "F8_E4M3"));
  EXPECT_TRUE(has_substr(message, "BF16"));  // the expected set
  EXPECT_TRUE(has_substr(header_error(tmp, "{\"w\": {\"dtype\": 4, \"shape\": [2], \"data_offsets\": [0, 2]}}", 2),
                         "field 'dtype': expected a string"));
}

TEST(SafetensorsBadInput, ShapeSizeMismatchAndBadShapeValues) {
  TempDir tmp;
  std::string message =
      header_error(tmp, "{\"w\": {\"dtype\": \"F32\", \"shape\": [2, 2], \"data_offsets\": [0, 12]}}", 12);
  EXPECT_TRUE(has_substr(message, "tensor 'w'"));
  EXPECT_TRUE(has_substr(message, "field 'shape'"));
  EXPECT_TRUE(has_substr(message, "needs 16 bytes"));
  EXPECT_TRUE(has_substr(message, "span 12"));

  message = header_error(tmp, "{\"w\": {\"dtype\": \"F32\", \"shape\": [2, -1], \"data_offsets\": [0, 8]}}", 8);
  EXPECT_TRUE(has_substr(message, "tensor 'w': field 'shape'[1]: expected a non-negative integer, found -1"));
  message = header_error(tmp, "{\"w\": {\"dtype\": \"F32\", \"shape\": [2.5], \"data_offsets\": [0, 8]}}", 8);
  EXPECT_TRUE(has_substr(message, "field 'shape'[0]"));
  message = header_error(tmp, "{\"w\": {\"dtype\": \"F32\", \"shape\": 4, \"data_offsets\": [0, 16]}}", 16);
  EXPECT_TRUE(has_substr(message, "field 'shape': expected an array"));
  // 2^32 * 2^32 * 4 bytes wraps to 0 in 64 bits: must be an overflow, not a match with [0, 0].
  message = header_error(
      tmp, "{\"w\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 0]}}", 0);
  EXPECT_TRUE(has_substr(message, "tensor 'w': field 'shape'"));
  EXPECT_TRUE(has_substr(message, "overflows"));
}

TEST(SafetensorsBadInput, OffsetsOutsideDataOrReversed) {
  TempDir tmp;
  std::string message =
      header_error(tmp, "{\"w\": {\"dtype\": \"U8\", \"shape\": [8], \"data_offsets\": [4, 12]}}", 10);
  EXPECT_TRUE(has_substr(message, "tensor 'w': field 'data_offsets': end 12 is beyond the data section of 10 bytes"));
  message = header_error(tmp, "{\"w\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [5, 4]}}", 5);
  EXPECT_TRUE(has_substr(message, "tensor 'w': field 'data_offsets': begin 5 is after end 4"));
  message = header_error(tmp, "{\"w\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0]}}", 1);
  EXPECT_TRUE(has_substr(message, "tensor 'w': field 'data_offsets': expected [begin, end], found 1 elements"));
  message = header_error(tmp, "{\"w\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [-1, 0]}}", 1);
  EXPECT_TRUE(has_substr(message, "field 'data_offsets'[0]: expected a non-negative integer"));
}

TEST(SafetensorsBadInput, OverlappingTensors) {
  TempDir tmp;
  const std::string message = header_error(tmp,
                                           "{\"a\": {\"dtype\": \"U8\", \"shape\": [8], \"data_offsets\": [0, 8]},"
                                           " \"b\": {\"dtype\": \"U8\", \"shape\": [8], \"data_offsets\": [4, 12]}}",
                                           12);
  EXPECT_TRUE(has_substr(message, "tensors 'a' and 'b' overlap"));
  EXPECT_TRUE(has_substr(message, "'b' field 'data_offsets' begins at 4, expected 8"));
  // An empty tensor placed inside another one's bytes is an overlap too.
  EXPECT_TRUE(has_substr(header_error(tmp,
                                      "{\"a\": {\"dtype\": \"U8\", \"shape\": [8], \"data_offsets\": [0, 8]},"
                                      " \"e\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [3, 3]}}",
                                      8),
                         "overlap"));
}

TEST(SafetensorsBadInput, HolesInTheDataSection) {
  TempDir tmp;
  std::string message = header_error(tmp,
                                     "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]},"
                                     " \"b\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [6, 10]}}",
                                     10);
  EXPECT_TRUE(has_substr(message, "hole in the data section: bytes [4, 6)"));
  EXPECT_TRUE(has_substr(message, "tensor 'b' field 'data_offsets' begins at 6, expected 4"));
  message = header_error(tmp, "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}}", 7);
  EXPECT_TRUE(has_substr(message, "bytes [4, 7) after the last tensor"));
  message = header_error(tmp, "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [2, 6]}}", 6);
  EXPECT_TRUE(has_substr(message, "bytes [0, 2)"));
}

// ----------------------------------------------------------------------------- writer errors

TEST(SafetensorsWriter, RejectsInconsistentInputAndLeavesNoFile) {
  TempDir tmp;
  const std::string path = tmp.file("bad.safetensors");
  const std::vector<uint8_t> six(6, 0);
  kipp::Status status = kipp::write_safetensors(path, {{"w", SafetensorsDtype::F32, {2}, six}});
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(has_substr(status.message(), "tensor 'w'"));
  EXPECT_TRUE(has_substr(status.message(), "needs 8 bytes, found 6"));
  status =
      kipp::write_safetensors(path, {{"w", SafetensorsDtype::U8, {6}, six}, {"w", SafetensorsDtype::U8, {6}, six}});
  EXPECT_TRUE(has_substr(status.message(), "tensor 'w': name given more than once"));
  status = kipp::write_safetensors(path, {{"__metadata__", SafetensorsDtype::U8, {6}, six}});
  EXPECT_TRUE(has_substr(status.message(), "reserved"));
  status = kipp::write_safetensors(path, {{"bad\xff", SafetensorsDtype::U8, {6}, six}});
  EXPECT_TRUE(has_substr(status.message(), "UTF-8"));
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(tmp.dir()));  // no temporary file left behind either
}

// ----------------------------------------------------------------------------- checkpoints

void write_u8_tensors(const std::string& path, const std::vector<std::string>& names) {
  std::vector<std::vector<uint8_t>> payloads;
  for (size_t i = 0; i < names.size(); ++i)
    payloads.push_back(std::vector<uint8_t>(i + 1, static_cast<uint8_t>(names[i][0])));
  std::vector<SafetensorsWriteTensor> tensors;
  for (size_t i = 0; i < names.size(); ++i) tensors.push_back({names[i], SafetensorsDtype::U8, {i + 1}, payloads[i]});
  ASSERT_TRUE(kipp::write_safetensors(path, tensors).ok());
}

void write_index(const TempDir& tmp, const nlohmann::json& weight_map) {
  const nlohmann::json index = {{"metadata", {{"total_size", 123}}}, {"weight_map", weight_map}};
  ASSERT_TRUE(kipp::write_text_file_atomic(tmp.file("model.safetensors.index.json"), index.dump(2)).ok());
}

TEST(SafetensorsCheckpoint, SingleFile) {
  TempDir tmp;
  write_u8_tensors(tmp.file("model.safetensors"), {"z", "a"});
  auto checkpoint = SafetensorsCheckpoint::open_dir(tmp.dir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.message();
  EXPECT_EQ(checkpoint->tensor_names(), (std::vector<std::string>{"a", "z"}));
  EXPECT_EQ(checkpoint->shard_paths(), std::vector<std::string>{tmp.file("model.safetensors")});
  EXPECT_EQ(to_vector(checkpoint->data("a")), (std::vector<uint8_t>{'a', 'a'}));
  EXPECT_EQ(checkpoint->find("z")->shape, std::vector<uint64_t>{1});
  EXPECT_EQ(checkpoint->find("q"), nullptr);
  EXPECT_TRUE(checkpoint->data("q").empty());
}

TEST(SafetensorsCheckpoint, ShardedWithIndex) {
  TempDir tmp;
  write_u8_tensors(tmp.file("model-00001-of-00002.safetensors"), {"b", "a"});
  write_u8_tensors(tmp.file("model-00002-of-00002.safetensors"), {"c"});
  // A stray model.safetensors is ignored when an index exists.
  write_u8_tensors(tmp.file("model.safetensors"), {"stray"});
  write_index(tmp, {{"a", "model-00001-of-00002.safetensors"},
                    {"b", "model-00001-of-00002.safetensors"},
                    {"c", "model-00002-of-00002.safetensors"}});
  auto checkpoint = SafetensorsCheckpoint::open_dir(tmp.dir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.message();
  EXPECT_EQ(checkpoint->tensor_names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(checkpoint->shard_paths(), (std::vector<std::string>{tmp.file("model-00001-of-00002.safetensors"),
                                                                 tmp.file("model-00002-of-00002.safetensors")}));
  EXPECT_EQ(to_vector(checkpoint->data("a")), (std::vector<uint8_t>{'a', 'a'}));
  EXPECT_EQ(to_vector(checkpoint->data("b")), (std::vector<uint8_t>{'b'}));
  EXPECT_EQ(to_vector(checkpoint->data("c")), (std::vector<uint8_t>{'c'}));
  // Moving the checkpoint keeps every view valid (files live behind unique_ptr).
  SafetensorsCheckpoint moved = std::move(*checkpoint);
  EXPECT_EQ(to_vector(moved.data("c")), (std::vector<uint8_t>{'c'}));
}

TEST(SafetensorsCheckpoint, IndexNamesMissingShard) {
  TempDir tmp;
  write_u8_tensors(tmp.file("s1.safetensors"), {"a"});
  write_index(tmp, {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}});
  auto checkpoint = SafetensorsCheckpoint::open_dir(tmp.dir());
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_TRUE(has_substr(checkpoint.message(), "shard 's2.safetensors' (for tensor 'b')"));
  EXPECT_TRUE(has_substr(checkpoint.message(), "does not exist"));
}

TEST(SafetensorsCheckpoint, IndexListsTensorAbsentFromItsShard) {
  TempDir tmp;
  write_u8_tensors(tmp.file("s1.safetensors"), {"a"});
  write_index(tmp, {{"a", "s1.safetensors"}, {"ghost", "s1.safetensors"}});
  auto checkpoint = SafetensorsCheckpoint::open_dir(tmp.dir());
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_TRUE(has_substr(checkpoint.message(),
                         "lists tensor 'ghost' in shard 's1.safetensors' but that shard has no such tensor"));
}

TEST(SafetensorsCheckpoint, ShardTensorNotInIndex) {
  TempDir tmp;
  write_u8_tensors(tmp.file("s1.safetensors"), {"a", "extra"});
  write_index(tmp, {{"a", "s1.safetensors"}});
  auto checkpoint = SafetensorsCheckpoint::open_dir(tmp.dir());
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_TRUE(has_substr(checkpoint.message(), "tensor 'extra' is not listed"));
}

TEST(SafetensorsCheckpoint, DuplicateAcrossShards) {
  TempDir tmp;
  write_u8_tensors(tmp.file("s1.safetensors"), {"a"});
  write_u8_tensors(tmp.file("s2.safetensors"), {"a", "b"});
  write_index(tmp, {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}});
  auto checkpoint = SafetensorsCheckpoint::open_dir(tmp.dir());
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_TRUE(has_substr(checkpoint.message(), "tensor 'a' is duplicated"));
  EXPECT_TRUE(has_substr(checkpoint.message(), "lists it in shard 's1.safetensors', found it in 's2.safetensors'"));
}

TEST(SafetensorsCheckpoint, BadIndexFiles) {
  TempDir tmp;
  const std::string index = tmp.file("model.safetensors.index.json");
  ASSERT_TRUE(kipp::write_text_file_atomic(index, "{not json").ok());
  auto checkpoint = SafetensorsCheckpoint::open_dir(tmp.dir());
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_TRUE(has_substr(checkpoint.message(), "not valid JSON"));
  ASSERT_TRUE(kipp::write_text_file_atomic(index, "{\"metadata\": {}}").ok());
  EXPECT_TRUE(has_substr(SafetensorsCheckpoint::open_dir(tmp.dir()).message(), "missing field 'weight_map'"));
  ASSERT_TRUE(kipp::write_text_file_atomic(index, "{\"weight_map\": {\"a\": 3}}").ok());
  EXPECT_TRUE(
      has_substr(SafetensorsCheckpoint::open_dir(tmp.dir()).message(), "tensor 'a': expected a shard file name"));
  ASSERT_TRUE(kipp::write_text_file_atomic(index, "{\"weight_map\": {\"a\": \"../x.safetensors\"}}").ok());
  EXPECT_TRUE(has_substr(SafetensorsCheckpoint::open_dir(tmp.dir()).message(), "not a plain file name"));
  ASSERT_TRUE(kipp::write_text_file_atomic(index, "{\"weight_map\": {}}").ok());
  EXPECT_TRUE(has_substr(SafetensorsCheckpoint::open_dir(tmp.dir()).message(), "lists no tensors"));
}

TEST(SafetensorsCheckpoint, BadShardIsReportedWithItsPath) {
  TempDir tmp;
  write_bytes(tmp.file("s1.safetensors"), {1, 2, 3});
  write_index(tmp, {{"a", "s1.safetensors"}});
  auto checkpoint = SafetensorsCheckpoint::open_dir(tmp.dir());
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_TRUE(has_substr(checkpoint.message(), tmp.file("s1.safetensors")));
}

TEST(SafetensorsCheckpoint, NeitherFilePresent) {
  TempDir tmp;
  auto checkpoint = SafetensorsCheckpoint::open_dir(tmp.dir());
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_TRUE(has_substr(checkpoint.message(), "neither model.safetensors.index.json nor model.safetensors exists"));
  EXPECT_TRUE(has_substr(checkpoint.message(), tmp.dir()));
}

// ----------------------------------------------------------------------------- Python oracle

TEST(SafetensorsInterop, PythonReadsWhatKippWrites) {
  TempDir tmp;
  const std::string path = tmp.file("kipp.safetensors");
  ASSERT_TRUE(
      kipp::write_safetensors(path, as_write_tensors(interop_fixture()), {{"format", "pt"}, {"source", "kipp"}}).ok());
  const auto [code, output] = run_oracle(tmp, "check", path);
  ASSERT_EQ(code, 0) << "the Python oracle (needs /usr/bin/python3 with python3-numpy) rejected our file:\n" << output;
  EXPECT_TRUE(has_substr(output, "OK 14 tensors"));
}

TEST(SafetensorsInterop, KippReadsWhatPythonWrites) {
  TempDir tmp;
  const std::string path = tmp.file("python.safetensors");
  const auto [code, output] = run_oracle(tmp, "write", path);
  ASSERT_EQ(code, 0) << "the Python oracle (needs /usr/bin/python3) failed to write:\n" << output;
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_EQ(file->metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"source", "python"}}));
  const auto fixture = interop_fixture();
  ASSERT_EQ(file->tensors().size(), fixture.size());
  for (const FixtureTensor& want : fixture) {
    const kipp::SafetensorsTensor* got = file->find(want.name);
    ASSERT_NE(got, nullptr) << want.name;
    EXPECT_EQ(got->dtype, want.dtype) << want.name;
    EXPECT_EQ(got->shape, want.shape) << want.name;
    EXPECT_EQ(to_vector(file->data(*got)), want.bytes) << want.name;
  }
  // The Python file lays the data out in reverse fixture order.
  EXPECT_EQ(file->tensors().front().name, "n.i8");
}

}  // namespace
