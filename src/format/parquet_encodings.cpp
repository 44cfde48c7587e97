#include "format/parquet_encodings.h"

#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <limits>

#include "format/thrift_compact.h"

namespace kipp::parquet {

using thrift::read_uleb128;
using thrift::unzigzag;

std::string codec_name(int32_t codec) {
  static const char* const names[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
  if (codec >= 0 && codec < 8) return names[codec];
  return "codec " + std::to_string(codec);
}

std::string encoding_name(int32_t encoding) {
  static const char* const names[] = {
      "PLAIN",          "GROUP_VAR_INT",       "PLAIN_DICTIONARY",        "RLE",
      "BIT_PACKED",     "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
      "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
  if (encoding >= 0 && encoding < 10) return names[encoding];
  return "encoding " + std::to_string(encoding);
}

namespace {

// `width` (<= 64) bits starting at bit `offset` of `data`, least significant bit first. The
// caller guarantees the bits lie inside the buffer.
uint64_t extract_bits(const uint8_t* data, uint64_t offset, int width) {
  uint64_t value = 0;
  int got = 0;
  while (got < width) {
    const uint64_t bit = offset + static_cast<uint64_t>(got);
    const int shift = static_cast<int>(bit % 8);
    const int take = std::min(8 - shift, width - got);
    const uint64_t bits = (static_cast<uint64_t>(data[bit / 8]) >> shift) & ((1u << take) - 1);
    value |= bits << got;
    got += take;
  }
  return value;
}

}  // namespace

// ---- The RLE / bit-packed hybrid ---------------------------------------------------------------

bool RleDecoder::next(uint32_t& value, std::string& error) {
  while (rle_left_ == 0 && packed_left_ == 0) {
    uint64_t header = 0;
    if (p_ >= end_ || !read_uleb128(p_, end_, header) || header > std::numeric_limits<uint32_t>::max()) {
      error = "RLE/bit-packed data ends before the page's values (or has a bad run header)";
      return false;
    }
    if (header & 1) {
      const uint64_t groups = header >> 1;
      const uint64_t bytes = groups * static_cast<uint64_t>(bit_width_);
      const uint64_t available = std::min<uint64_t>(bytes, static_cast<uint64_t>(end_ - p_));
      packed_ = p_;
      p_ += available;
      packed_bits_ = available * 8;
      packed_index_ = 0;
      packed_left_ = groups * 8;
    } else {
      const size_t value_bytes = static_cast<size_t>((bit_width_ + 7) / 8);
      if (static_cast<size_t>(end_ - p_) < value_bytes) {
        error = "RLE run value runs past the end of the data";
        return false;
      }
      uint32_t run_value = 0;
      for (size_t i = 0; i < value_bytes; ++i) run_value |= static_cast<uint32_t>(p_[i]) << (8 * i);
      p_ += value_bytes;
      rle_value_ = run_value;
      rle_left_ = header >> 1;
    }
  }
  if (rle_left_ > 0) {
    --rle_left_;
    value = rle_value_;
    return true;
  }
  const uint64_t offset = packed_index_ * static_cast<uint64_t>(bit_width_);
  if (offset + static_cast<uint64_t>(bit_width_) > packed_bits_) {
    error = "bit-packed run is truncated";
    return false;
  }
  value = bit_width_ == 0 ? 0 : static_cast<uint32_t>(extract_bits(packed_, offset, bit_width_));
  ++packed_index_;
  --packed_left_;
  return true;
}

// ---- DELTA_BINARY_PACKED -----------------------------------------------------------------------

bool DeltaDecoder::init(const uint8_t* p, const uint8_t* end, std::string& error) {
  p_ = p;
  end_ = end;
  uint64_t block_size = 0, miniblocks = 0, total = 0, first = 0;
  if (!read_uleb128(p_, end_, block_size) || !read_uleb128(p_, end_, miniblocks) || !read_uleb128(p_, end_, total) ||
      !read_uleb128(p_, end_, first)) {
    error = "DELTA_BINARY_PACKED header is truncated";
    return false;
  }
  if (block_size == 0 || block_size % 128 != 0 || block_size > (1u << 24) || miniblocks == 0 ||
      block_size % miniblocks != 0 || (block_size / miniblocks) % 32 != 0) {
    error = "DELTA_BINARY_PACKED header has block size " + std::to_string(block_size) + " with " +
            std::to_string(miniblocks) + " miniblocks (needs a multiple of 128 split into multiples of 32)";
    return false;
  }
  miniblocks_ = static_cast<uint32_t>(miniblocks);
  values_per_miniblock_ = static_cast<uint32_t>(block_size / miniblocks);
  total_ = total;
  first_ = unzigzag(first);
  read_ = 0;
  miniblock_index_ = miniblocks_;  // no block started
  miniblock_left_ = 0;
  return true;
}

bool DeltaDecoder::next(int64_t& value, std::string& error) {
  if (read_ >= total_) {
    error = "DELTA_BINARY_PACKED data holds fewer values than the page needs";
    return false;
  }
  if (read_ == 0) {
    last_ = first_;
  } else {
    if (miniblock_left_ == 0 && !start_miniblock(error)) return false;
    const uint64_t delta =
        width_ == 0 ? 0 : extract_bits(miniblock_, miniblock_pos_ * static_cast<uint64_t>(width_), width_);
    ++miniblock_pos_;
    --miniblock_left_;
    // Wrapping arithmetic, as the encoding defines it.
    last_ = static_cast<int64_t>(static_cast<uint64_t>(last_) + static_cast<uint64_t>(min_delta_) + delta);
  }
  ++read_;
  value = last_;
  return true;
}

bool DeltaDecoder::skip_all(std::string& error) {
  if (read_ == 0 && total_ > 0) read_ = 1;
  while (read_ < total_) {
    if (miniblock_left_ == 0 && !start_miniblock(error)) return false;
    const uint64_t step = std::min<uint64_t>(miniblock_left_, total_ - read_);
    read_ += step;
    miniblock_left_ = 0;
  }
  return true;
}

bool DeltaDecoder::start_miniblock(std::string& error) {
  if (miniblock_index_ == miniblocks_) {
    uint64_t min_delta = 0;
    if (!read_uleb128(p_, end_, min_delta) || static_cast<uint64_t>(end_ - p_) < miniblocks_) {
      error = "DELTA_BINARY_PACKED block header is truncated";
      return false;
    }
    min_delta_ = unzigzag(min_delta);
    widths_ = p_;
    p_ += miniblocks_;
    miniblock_index_ = 0;
  }
  width_ = widths_[miniblock_index_++];
  if (width_ > 64) {
    error = "DELTA_BINARY_PACKED miniblock bit width " + std::to_string(width_) + " exceeds 64";
    return false;
  }
  const uint64_t bytes = static_cast<uint64_t>(values_per_miniblock_) * static_cast<uint64_t>(width_) / 8;
  if (bytes > static_cast<uint64_t>(end_ - p_)) {
    error = "DELTA_BINARY_PACKED miniblock runs past the end of the page";
    return false;
  }
  miniblock_ = p_;
  p_ += bytes;
  miniblock_pos_ = 0;
  miniblock_left_ = values_per_miniblock_;
  return true;
}

// ---- Decompression ---------------------------------------------------------------------------

Status decompress(int32_t codec, std::span<const uint8_t> in, size_t expected, std::vector<uint8_t>& out) {
  out.resize(std::max<size_t>(expected, 1));
  const std::string what = codec_name(codec) + " decompression failed: ";
  switch (codec) {
    case kCodecSnappy: {
      size_t length = 0;
      if (snappy_uncompressed_length(reinterpret_cast<const char*>(in.data()), in.size(), &length) != SNAPPY_OK) {
        return make_error(what + "corrupt data");
      }
      if (length != expected) {
        return make_error(what + "data holds " + std::to_string(length) + " bytes, the page header says " +
                          std::to_string(expected));
      }
      size_t got = out.size();
      if (snappy_uncompress(reinterpret_cast<const char*>(in.data()), in.size(), reinterpret_cast<char*>(out.data()),
                            &got) != SNAPPY_OK ||
          got != expected) {
        return make_error(what + "corrupt data");
      }
      break;
    }
    case kCodecGzip: {
      z_stream stream{};
      if (inflateInit2(&stream, 15 + 32) != Z_OK) return make_error(what + "cannot initialize zlib");
      stream.next_in = const_cast<Bytef*>(in.data());
      stream.avail_in = static_cast<uInt>(in.size());
      // One byte of room beyond the expected size tells "more data than the header says" apart.
      out.resize(expected + 1);
      stream.next_out = out.data();
      stream.avail_out = static_cast<uInt>(out.size());
      int rc = Z_OK;
      while (true) {
        rc = inflate(&stream, Z_FINISH);
        // Concatenated gzip members: go on while input and room are left.
        if (rc == Z_STREAM_END && stream.avail_in > 0 && stream.avail_out > 0) {
          if (inflateReset(&stream) != Z_OK) break;
          continue;
        }
        break;
      }
      const size_t got = out.size() - stream.avail_out;
      const std::string message = stream.msg != nullptr ? stream.msg : "truncated or corrupt data";
      inflateEnd(&stream);
      if (got > expected) {
        return make_error(what + "data holds more than the " + std::to_string(expected) +
                          " bytes the page header says");
      }
      if (rc != Z_STREAM_END) return make_error(what + message);
      if (got != expected) {
        return make_error(what + "data holds " + std::to_string(got) + " bytes, the page header says " +
                          std::to_string(expected));
      }
      break;
    }
    case kCodecZstd: {
      const size_t got = ZSTD_decompress(out.data(), expected, in.data(), in.size());
      if (ZSTD_isError(got)) return make_error(what + ZSTD_getErrorName(got));
      if (got != expected) {
        return make_error(what + "data holds " + std::to_string(got) + " bytes, the page header says " +
                          std::to_string(expected));
      }
      break;
    }
    default:
      return make_error("compression codec " + codec_name(codec) +
                        " is not supported (supported: UNCOMPRESSED, SNAPPY, GZIP, ZSTD)");
  }
  out.resize(expected);
  return ok_status();
}

// ---- One data page's values ------------------------------------------------------------------

Status PageDecoder::reset(int32_t encoding, std::span<const uint8_t> values, std::span<const uint8_t> levels,
                          bool optional, int64_t num_values, const std::vector<std::string_view>* dictionary) {
  values_left_ = num_values;
  optional_ = optional;
  encoding_ = encoding;
  dictionary_ = dictionary;
  p_ = values.data();
  end_ = values.data() + values.size();
  previous_.clear();
  if (optional) levels_.reset(levels.data(), levels.data() + levels.size(), 1);
  std::string error;
  switch (encoding) {
    case kEncodingPlain: break;
    case kEncodingPlainDictionary:
    case kEncodingRleDictionary: {
      if (dictionary == nullptr) return make_error("dictionary-encoded page without a dictionary page");
      int width = 0;
      if (p_ < end_) {
        width = *p_++;
        if (width > 32) return make_error("dictionary index bit width " + std::to_string(width) + " exceeds 32");
      }
      indices_.reset(p_, end_, width);
      break;
    }
    case kEncodingDeltaLengthByteArray:
      if (!init_lengths(p_, error)) return make_error(error);
      break;
    case kEncodingDeltaByteArray: {
      if (!prefixes_.init(p_, end_, error)) return make_error(error);
      DeltaDecoder scan = prefixes_;
      if (!check_count(prefixes_.total(), error) || !scan.skip_all(error)) return make_error(error);
      if (!init_lengths(scan.position(), error)) return make_error(error);
      break;
    }
    default:
      return make_error("encoding " + encoding_name(encoding) +
                        " is not supported for strings (supported: PLAIN, PLAIN_DICTIONARY, RLE_DICTIONARY, "
                        "DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY)");
  }
  return ok_status();
}

bool PageDecoder::next(std::optional<std::string_view>& value, std::string& error) {
  --values_left_;
  if (optional_) {
    uint32_t level = 0;
    if (!levels_.next(level, error)) {
      error = "definition levels: " + error;
      return false;
    }
    if (level > 1) {
      error = "definition level " + std::to_string(level) + " exceeds the column's maximum 1";
      return false;
    }
    if (level == 0) {
      value.reset();
      return true;
    }
  }
  switch (encoding_) {
    case kEncodingPlain: {
      if (end_ - p_ < 4) {
        error = "PLAIN value length runs past the end of the page";
        return false;
      }
      const uint32_t length = load_u32_le(p_);
      p_ += 4;
      if (length > static_cast<size_t>(end_ - p_)) {
        error = "PLAIN value of " + std::to_string(length) + " bytes runs past the end of the page (" +
                std::to_string(end_ - p_) + " bytes left)";
        return false;
      }
      value = as_view(p_, length);
      p_ += length;
      return true;
    }
    case kEncodingPlainDictionary:
    case kEncodingRleDictionary: {
      uint32_t index = 0;
      if (!indices_.next(index, error)) {
        error = "dictionary indices: " + error;
        return false;
      }
      if (index >= dictionary_->size()) {
        error = "dictionary index " + std::to_string(index) + " is out of range (the dictionary has " +
                std::to_string(dictionary_->size()) + " entries)";
        return false;
      }
      value = (*dictionary_)[index];
      return true;
    }
    case kEncodingDeltaLengthByteArray: {
      std::string_view bytes;
      if (!next_suffix(bytes, error)) return false;
      value = bytes;
      return true;
    }
    case kEncodingDeltaByteArray: {
      int64_t prefix = 0;
      std::string_view suffix;
      if (!prefixes_.next(prefix, error) || !next_suffix(suffix, error)) return false;
      if (prefix < 0 || static_cast<uint64_t>(prefix) > previous_.size()) {
        error = "DELTA_BYTE_ARRAY prefix length " + std::to_string(prefix) + " exceeds the previous value's " +
                std::to_string(previous_.size()) + " bytes";
        return false;
      }
      previous_.resize(static_cast<size_t>(prefix));
      previous_.append(suffix);
      value = previous_;
      return true;
    }
    default: error = "unsupported encoding"; return false;
  }
}

// Every non-null value has a length; more lengths than values in the page is corrupt (and
// would let a tiny header claim billions).
bool PageDecoder::check_count(uint64_t count, std::string& error) const {
  if (count > static_cast<uint64_t>(values_left_)) {
    error = "delta encoding claims " + std::to_string(count) + " values in a page of " + std::to_string(values_left_);
    return false;
  }
  return true;
}

bool PageDecoder::init_lengths(const uint8_t* start, std::string& error) {
  if (!lengths_.init(start, end_, error) || !check_count(lengths_.total(), error)) return false;
  DeltaDecoder scan = lengths_;
  if (!scan.skip_all(error)) return false;
  p_ = scan.position();  // the concatenated value bytes follow the lengths
  return true;
}

bool PageDecoder::next_suffix(std::string_view& bytes, std::string& error) {
  int64_t length = 0;
  if (!lengths_.next(length, error)) return false;
  if (length < 0 || static_cast<uint64_t>(length) > static_cast<uint64_t>(end_ - p_)) {
    error = "DELTA_LENGTH_BYTE_ARRAY value of " + std::to_string(length) + " bytes runs past the end of the page";
    return false;
  }
  bytes = as_view(p_, static_cast<size_t>(length));
  p_ += length;
  return true;
}

}  // namespace kipp::parquet
