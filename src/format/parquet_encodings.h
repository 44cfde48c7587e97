// The Parquet reader's value decoding, shared by its column reader: the codecs, the RLE /
// bit-packed hybrid, DELTA_BINARY_PACKED, and one data page's string values in each encoding
// the reader supports. Internal to src/format; the API is format/parquet.h.
//
// Decoders check every length against the bytes they were given and report a problem as a
// message (the column reader adds the file, column and page).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kipp::parquet {

constexpr int32_t kCodecUncompressed = 0, kCodecSnappy = 1, kCodecGzip = 2, kCodecZstd = 6;
constexpr int32_t kEncodingPlain = 0, kEncodingPlainDictionary = 2, kEncodingRle = 3, kEncodingDeltaLengthByteArray = 6,
                  kEncodingDeltaByteArray = 7, kEncodingRleDictionary = 8;

std::string codec_name(int32_t codec);
std::string encoding_name(int32_t encoding);

inline uint32_t load_u32_le(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

inline std::string_view as_view(const uint8_t* p, size_t n) { return {reinterpret_cast<const char*>(p), n}; }

// `in` decompressed with `codec` into `out`, which must come to exactly `expected` bytes.
Status decompress(int32_t codec, std::span<const uint8_t> in, size_t expected, std::vector<uint8_t>& out);

// The RLE / bit-packed hybrid (definition levels, dictionary indices).
class RleDecoder {
 public:
  void reset(const uint8_t* p, const uint8_t* end, int bit_width) {
    p_ = p;
    end_ = end;
    bit_width_ = bit_width;
    rle_left_ = 0;
    packed_left_ = 0;
  }

  bool next(uint32_t& value, std::string& error);

 private:
  const uint8_t* p_ = nullptr;
  const uint8_t* end_ = nullptr;
  int bit_width_ = 0;
  uint64_t rle_left_ = 0;
  uint32_t rle_value_ = 0;
  const uint8_t* packed_ = nullptr;
  uint64_t packed_bits_ = 0;
  uint64_t packed_index_ = 0;
  uint64_t packed_left_ = 0;
};

// DELTA_BINARY_PACKED (the lengths of DELTA_LENGTH_BYTE_ARRAY, the prefixes of DELTA_BYTE_ARRAY).
class DeltaDecoder {
 public:
  bool init(const uint8_t* p, const uint8_t* end, std::string& error);

  uint64_t total() const { return total_; }
  // After all values are read: the end of the encoded data.
  const uint8_t* position() const { return p_; }

  bool next(int64_t& value, std::string& error);

  // Moves past all the values without decoding them (to find where the data after them starts).
  bool skip_all(std::string& error);

 private:
  bool start_miniblock(std::string& error);

  const uint8_t* p_ = nullptr;
  const uint8_t* end_ = nullptr;
  uint32_t miniblocks_ = 0;
  uint32_t values_per_miniblock_ = 0;
  uint64_t total_ = 0;
  uint64_t read_ = 0;
  int64_t first_ = 0;
  int64_t last_ = 0;
  int64_t min_delta_ = 0;
  const uint8_t* widths_ = nullptr;
  uint32_t miniblock_index_ = 0;
  const uint8_t* miniblock_ = nullptr;
  int width_ = 0;
  uint64_t miniblock_pos_ = 0;
  uint64_t miniblock_left_ = 0;
};

// One data page's string values.
class PageDecoder {
 public:
  // `values`: the page's value bytes; `levels`: its definition levels (RLE hybrid, width 1),
  // empty for a required column.
  Status reset(int32_t encoding, std::span<const uint8_t> values, std::span<const uint8_t> levels, bool optional,
               int64_t num_values, const std::vector<std::string_view>* dictionary);

  int64_t values_left() const { return values_left_; }
  size_t buffer_bytes() const { return previous_.capacity(); }

  // The next value (nullopt for null); the view stays valid until the next call.
  bool next(std::optional<std::string_view>& value, std::string& error);

 private:
  bool check_count(uint64_t count, std::string& error) const;
  bool init_lengths(const uint8_t* start, std::string& error);
  bool next_suffix(std::string_view& bytes, std::string& error);

  int64_t values_left_ = 0;
  bool optional_ = false;
  int32_t encoding_ = 0;
  const std::vector<std::string_view>* dictionary_ = nullptr;
  const uint8_t* p_ = nullptr;
  const uint8_t* end_ = nullptr;
  RleDecoder levels_;
  RleDecoder indices_;
  DeltaDecoder lengths_;
  DeltaDecoder prefixes_;
  std::string previous_;
};

}  // namespace kipp::parquet
