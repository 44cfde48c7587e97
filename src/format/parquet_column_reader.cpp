#include "format/parquet.h"

#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <span>

#include "format/thrift_compact.h"

namespace kipp::parquet {

using thrift::CompactReader;
using thrift::CompactType;
using thrift::FieldHeader;
using thrift::read_uleb128;
using thrift::unzigzag;

namespace {

constexpr char kMagic[4] = {'P', 'A', 'R', '1'};
constexpr int32_t kCodecUncompressed = 0, kCodecSnappy = 1, kCodecGzip = 2, kCodecZstd = 6;
constexpr int32_t kEncodingPlain = 0, kEncodingPlainDictionary = 2, kEncodingRle = 3,
                  kEncodingDeltaLengthByteArray = 6, kEncodingDeltaByteArray = 7, kEncodingRleDictionary = 8;
constexpr int32_t kPageData = 0, kPageDictionary = 2, kPageDataV2 = 3;

std::string codec_name(int32_t codec) {
  static const char* const names[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
  if (codec >= 0 && codec < 8) return names[codec];
  return "codec " + std::to_string(codec);
}

std::string encoding_name(int32_t encoding) {
  static const char* const names[] = {"PLAIN",
                                      "GROUP_VAR_INT",
                                      "PLAIN_DICTIONARY",
                                      "RLE",
                                      "BIT_PACKED",
                                      "DELTA_BINARY_PACKED",
                                      "DELTA_LENGTH_BYTE_ARRAY",
                                      "DELTA_BYTE_ARRAY",
                                      "RLE_DICTIONARY",
                                      "BYTE_STREAM_SPLIT"};
  if (encoding >= 0 && encoding < 10) return names[encoding];
  return "encoding " + std::to_string(encoding);
}

uint32_t load_u32_le(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

std::string_view as_view(const uint8_t* p, size_t n) { return {reinterpret_cast<const char*>(p), n}; }

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


// ---- The RLE / bit-packed hybrid (definition levels, dictionary indices) ----------------------

class RleDecoder {
 public:
  void reset(const uint8_t* p, const uint8_t* end, int bit_width) {
    p_ = p;
    end_ = end;
    bit_width_ = bit_width;
    rle_left_ = 0;
    packed_left_ = 0;
  }

  bool next(uint32_t& value, std::string& error) {
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

// ---- DELTA_BINARY_PACKED (the lengths of DELTA_LENGTH_BYTE_ARRAY, the prefixes of
// DELTA_BYTE_ARRAY) ------------------------------------------------------------------------------

class DeltaDecoder {
 public:
  bool init(const uint8_t* p, const uint8_t* end, std::string& error) {
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

  uint64_t total() const { return total_; }
  // After all values are read: the end of the encoded data.
  const uint8_t* position() const { return p_; }

  bool next(int64_t& value, std::string& error) {
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

  // Moves past all the values without decoding them (to find where the data after them starts).
  bool skip_all(std::string& error) {
    if (read_ == 0 && total_ > 0) read_ = 1;
    while (read_ < total_) {
      if (miniblock_left_ == 0 && !start_miniblock(error)) return false;
      const uint64_t step = std::min<uint64_t>(miniblock_left_, total_ - read_);
      read_ += step;
      miniblock_left_ = 0;
    }
    return true;
  }

 private:
  bool start_miniblock(std::string& error) {
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

// ---- Page headers ----------------------------------------------------------------------------

struct PageHeader {
  int32_t type = -1;
  int32_t uncompressed_size = -1;
  int32_t compressed_size = -1;
  // DATA_PAGE, DATA_PAGE_V2, DICTIONARY_PAGE
  bool has_data = false, has_data_v2 = false, has_dictionary = false;
  int32_t num_values = -1;
  int32_t encoding = -1;
  int32_t def_encoding = -1;
  // v2
  int32_t num_nulls = 0;
  int32_t def_bytes = 0;
  int32_t rep_bytes = 0;
  bool is_compressed = true;
};

void parse_data_page_header(CompactReader& r, PageHeader& h) {
  bool seen[4] = {false, false, false, false};
  r.begin_struct();
  for (FieldHeader f = r.next_field(); r.ok() && f.type != CompactType::Stop; f = r.next_field()) {
    switch (f.id) {
      case 1: h.num_values = thrift::read_i32_field(r, f, "num_values"); seen[0] = true; break;
      case 2: h.encoding = thrift::read_i32_field(r, f, "encoding"); seen[1] = true; break;
      case 3: h.def_encoding = thrift::read_i32_field(r, f, "definition_level_encoding"); seen[2] = true; break;
      case 4: thrift::read_i32_field(r, f, "repetition_level_encoding"); seen[3] = true; break;
      default: r.skip(f.type);
    }
  }
  r.end_struct();
  if (r.ok() && !(seen[0] && seen[1] && seen[2] && seen[3])) r.fail("DataPageHeader lacks a required field");
}

void parse_data_page_header_v2(CompactReader& r, PageHeader& h) {
  int seen = 0;
  r.begin_struct();
  for (FieldHeader f = r.next_field(); r.ok() && f.type != CompactType::Stop; f = r.next_field()) {
    switch (f.id) {
      case 1: h.num_values = thrift::read_i32_field(r, f, "num_values"); seen |= 1; break;
      case 2: h.num_nulls = thrift::read_i32_field(r, f, "num_nulls"); seen |= 2; break;
      case 3: thrift::read_i32_field(r, f, "num_rows"); seen |= 4; break;
      case 4: h.encoding = thrift::read_i32_field(r, f, "encoding"); seen |= 8; break;
      case 5: h.def_bytes = thrift::read_i32_field(r, f, "definition_levels_byte_length"); seen |= 16; break;
      case 6: h.rep_bytes = thrift::read_i32_field(r, f, "repetition_levels_byte_length"); seen |= 32; break;
      case 7: h.is_compressed = thrift::read_bool_field(r, f, "is_compressed"); break;
      default: r.skip(f.type);
    }
  }
  r.end_struct();
  if (r.ok() && seen != 63) r.fail("DataPageHeaderV2 lacks a required field");
}

void parse_dictionary_page_header(CompactReader& r, PageHeader& h) {
  int seen = 0;
  r.begin_struct();
  for (FieldHeader f = r.next_field(); r.ok() && f.type != CompactType::Stop; f = r.next_field()) {
    switch (f.id) {
      case 1: h.num_values = thrift::read_i32_field(r, f, "num_values"); seen |= 1; break;
      case 2: h.encoding = thrift::read_i32_field(r, f, "encoding"); seen |= 2; break;
      default: r.skip(f.type);
    }
  }
  r.end_struct();
  if (r.ok() && seen != 3) r.fail("DictionaryPageHeader lacks a required field");
}

PageHeader parse_page_header(CompactReader& r) {
  PageHeader h;
  r.begin_struct();
  for (FieldHeader f = r.next_field(); r.ok() && f.type != CompactType::Stop; f = r.next_field()) {
    switch (f.id) {
      case 1: h.type = thrift::read_i32_field(r, f, "type"); break;
      case 2: h.uncompressed_size = thrift::read_i32_field(r, f, "uncompressed_page_size"); break;
      case 3: h.compressed_size = thrift::read_i32_field(r, f, "compressed_page_size"); break;
      case 5:
        if (f.type != CompactType::Struct) { r.skip(f.type); break; }
        parse_data_page_header(r, h);
        h.has_data = true;
        break;
      case 7:
        if (f.type != CompactType::Struct) { r.skip(f.type); break; }
        parse_dictionary_page_header(r, h);
        h.has_dictionary = true;
        break;
      case 8:
        if (f.type != CompactType::Struct) { r.skip(f.type); break; }
        parse_data_page_header_v2(r, h);
        h.has_data_v2 = true;
        break;
      default: r.skip(f.type);
    }
  }
  r.end_struct();
  if (r.ok() && (h.type < 0 || h.uncompressed_size < 0 || h.compressed_size < 0)) {
    r.fail("PageHeader lacks type or sizes (or they are negative)");
  }
  return h;
}

}  // namespace

std::string physical_type_name(int32_t type) {
  static const char* const names[] = {"BOOLEAN", "INT32",  "INT64",      "INT96",
                                      "FLOAT",   "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
  if (type >= 0 && type < 8) return names[type];
  return "type " + std::to_string(type);
}

// ---- The footer ------------------------------------------------------------------------------

namespace {

struct SchemaElement {
  int32_t type = -1;
  int32_t repetition = 0;
  std::string name;
  int32_t num_children = 0;
};

struct RawChunk {
  ColumnChunkMeta meta;
  bool has_meta = false;
  bool external = false;
  int64_t data_page_offset = -1;
  int64_t dictionary_page_offset = -1;
  int64_t total_compressed_size = -1;
};

void parse_schema_element(CompactReader& r, SchemaElement& e) {
  bool has_name = false;
  r.begin_struct();
  for (FieldHeader f = r.next_field(); r.ok() && f.type != CompactType::Stop; f = r.next_field()) {
    switch (f.id) {
      case 1: e.type = thrift::read_i32_field(r, f, "SchemaElement.type"); break;
      case 3: e.repetition = thrift::read_i32_field(r, f, "SchemaElement.repetition_type"); break;
      case 4: e.name = thrift::read_binary_field(r, f, "SchemaElement.name"); has_name = true; break;
      case 5: e.num_children = thrift::read_i32_field(r, f, "SchemaElement.num_children"); break;
      default: r.skip(f.type);
    }
  }
  r.end_struct();
  if (r.ok() && !has_name) r.fail("a schema element has no name");
}

void parse_column_meta(CompactReader& r, RawChunk& c) {
  int seen = 0;
  r.begin_struct();
  for (FieldHeader f = r.next_field(); r.ok() && f.type != CompactType::Stop; f = r.next_field()) {
    switch (f.id) {
      case 1: c.meta.type = thrift::read_i32_field(r, f, "ColumnMetaData.type"); seen |= 1; break;
      case 4: c.meta.codec = thrift::read_i32_field(r, f, "ColumnMetaData.codec"); seen |= 2; break;
      case 5: c.meta.num_values = thrift::read_i64_field(r, f, "ColumnMetaData.num_values"); seen |= 4; break;
      case 7:
        c.total_compressed_size = thrift::read_i64_field(r, f, "ColumnMetaData.total_compressed_size");
        seen |= 8;
        break;
      case 9: c.data_page_offset = thrift::read_i64_field(r, f, "ColumnMetaData.data_page_offset"); seen |= 16; break;
      case 11: c.dictionary_page_offset = thrift::read_i64_field(r, f, "ColumnMetaData.dictionary_page_offset"); break;
      default: r.skip(f.type);
    }
  }
  r.end_struct();
  if (r.ok() && seen != 31) r.fail("ColumnMetaData lacks a required field");
}

void parse_column_chunk(CompactReader& r, RawChunk& c) {
  r.begin_struct();
  for (FieldHeader f = r.next_field(); r.ok() && f.type != CompactType::Stop; f = r.next_field()) {
    if (f.id == 1 && f.type == CompactType::Binary) {
      r.read_binary();
      c.external = true;
    } else if (f.id == 3 && f.type == CompactType::Struct) {
      parse_column_meta(r, c);
      c.has_meta = true;
    } else {
      r.skip(f.type);
    }
  }
  r.end_struct();
}

}  // namespace

class FooterParser {
 public:
  static Status parse(ParquetFile& file, std::span<const uint8_t> footer);
};

Status FooterParser::parse(ParquetFile& file, std::span<const uint8_t> footer) {
  CompactReader r(footer);
  std::vector<SchemaElement> schema;
  std::vector<std::vector<RawChunk>> chunks;
  std::vector<int64_t> group_rows;
  bool has_schema = false, has_rows = false, has_groups = false;
  r.begin_struct();
  for (FieldHeader f = r.next_field(); r.ok() && f.type != CompactType::Stop; f = r.next_field()) {
    switch (f.id) {
      case 2: {
        const thrift::ListHeader list = thrift::read_list_field(r, f, "FileMetaData.schema");
        for (uint32_t i = 0; i < list.size && r.ok(); ++i) {
          if (list.element != CompactType::Struct) {
            r.fail("schema list elements are not structs");
            break;
          }
          parse_schema_element(r, schema.emplace_back());
        }
        has_schema = true;
        break;
      }
      case 3: {
        const int64_t rows = thrift::read_i64_field(r, f, "FileMetaData.num_rows");
        if (r.ok() && rows < 0) r.fail("num_rows is negative (" + std::to_string(rows) + ")");
        file.num_rows_ = static_cast<uint64_t>(rows);
        has_rows = true;
        break;
      }
      case 4: {
        const thrift::ListHeader list = thrift::read_list_field(r, f, "FileMetaData.row_groups");
        for (uint32_t g = 0; g < list.size && r.ok(); ++g) {
          if (list.element != CompactType::Struct) {
            r.fail("row group list elements are not structs");
            break;
          }
          auto& group = chunks.emplace_back();
          int64_t rows = -1;
          r.begin_struct();
          for (FieldHeader gf = r.next_field(); r.ok() && gf.type != CompactType::Stop; gf = r.next_field()) {
            if (gf.id == 1) {
              const thrift::ListHeader columns = thrift::read_list_field(r, gf, "RowGroup.columns");
              for (uint32_t c = 0; c < columns.size && r.ok(); ++c) {
                if (columns.element != CompactType::Struct) {
                  r.fail("column chunk list elements are not structs");
                  break;
                }
                parse_column_chunk(r, group.emplace_back());
              }
            } else if (gf.id == 3) {
              rows = thrift::read_i64_field(r, gf, "RowGroup.num_rows");
            } else {
              r.skip(gf.type);
            }
          }
          r.end_struct();
          if (r.ok() && rows < 0) r.fail("row group " + std::to_string(g) + " has no (or a negative) num_rows");
          group_rows.push_back(rows);
        }
        has_groups = true;
        break;
      }
      case 6: file.created_by_ = thrift::read_binary_field(r, f, "FileMetaData.created_by"); break;
      default: r.skip(f.type);
    }
  }
  r.end_struct();
  if (!r.ok()) return make_error("corrupt footer (FileMetaData): " + r.error());
  if (!has_schema || !has_rows || !has_groups) {
    return make_error("corrupt footer: FileMetaData lacks its schema, num_rows or row_groups");
  }

  // The schema is a depth-first list; element 0 is the root. Top-level groups (and repeated
  // primitives) are nested columns: their leaves are counted so later columns find their chunk.
  if (schema.empty()) return make_error("corrupt footer: the schema is empty");
  if (schema[0].num_children < 0) return make_error("corrupt footer: the schema root has a negative child count");
  size_t index = 1;
  size_t leaves = 0;
  for (int32_t child = 0; child < schema[0].num_children; ++child) {
    if (index >= schema.size()) return make_error("corrupt footer: the schema lists fewer fields than the root claims");
    const SchemaElement& e = schema[index];
    ColumnInfo info;
    info.name = e.name;
    info.leaf_index = leaves;
    info.repetition = static_cast<Repetition>(std::clamp(e.repetition, 0, 2));
    if (e.num_children < 0) return make_error("corrupt footer: field \"" + e.name + "\" has a negative child count");
    if (e.num_children > 0) {
      info.nested = true;
      // Walk the subtree: each element consumes one pending slot and adds its children.
      uint64_t pending = 1;
      while (pending > 0) {
        if (index >= schema.size()) return make_error("corrupt footer: the schema ends inside field \"" + e.name + "\"");
        const SchemaElement& sub = schema[index++];
        if (sub.num_children < 0) return make_error("corrupt footer: a negative child count inside \"" + e.name + "\"");
        --pending;
        if (sub.num_children > 0) {
          pending += static_cast<uint64_t>(sub.num_children);
        } else {
          ++leaves;
        }
      }
    } else {
      if (e.type < 0) return make_error("corrupt footer: field \"" + e.name + "\" has neither a type nor children");
      info.type = e.type;
      info.nested = info.repetition == Repetition::Repeated;
      ++index;
      ++leaves;
    }
    file.columns_.push_back(std::move(info));
  }
  if (index != schema.size()) {
    return make_error("corrupt footer: the schema has " + std::to_string(schema.size() - index) +
                      " elements beyond the root's children");
  }
  file.num_leaves_ = leaves;

  // Row groups: one chunk per leaf; chunk byte ranges must lie before the footer.
  const uint64_t data_end = file.file_.size() - 8 - footer.size();
  for (size_t g = 0; g < chunks.size(); ++g) {
    const std::string where = "row group " + std::to_string(g);
    if (chunks[g].size() != leaves) {
      return make_error("corrupt footer: " + where + " has " + std::to_string(chunks[g].size()) +
                        " column chunks, the schema has " + std::to_string(leaves) + " columns");
    }
    RowGroupMeta group;
    group.num_rows = group_rows[g];
    for (size_t c = 0; c < chunks[g].size(); ++c) {
      RawChunk& raw = chunks[g][c];
      ColumnChunkMeta meta = raw.meta;
      if (raw.external || !raw.has_meta) {
        // Marked unreadable (size 0, start 0); reading that column reports it.
        meta.start = 0;
        meta.size = 0;
        meta.num_values = raw.external ? -1 : -2;
        group.chunks.push_back(meta);
        continue;
      }
      int64_t start = raw.data_page_offset;
      if (raw.dictionary_page_offset > 0 && raw.dictionary_page_offset < start) start = raw.dictionary_page_offset;
      const int64_t size = raw.total_compressed_size;
      if (start < 4 || size < 0 || static_cast<uint64_t>(start) > data_end ||
          static_cast<uint64_t>(size) > data_end - static_cast<uint64_t>(start)) {
        return make_error("corrupt footer: " + where + ", column chunk " + std::to_string(c) + " claims bytes [" +
                          std::to_string(start) + ", +" + std::to_string(size) +
                          ") outside the data area [4, " + std::to_string(data_end) + ")");
      }
      if (meta.num_values < 0) {
        return make_error("corrupt footer: " + where + ", column chunk " + std::to_string(c) + " has " +
                          std::to_string(meta.num_values) + " values");
      }
      meta.start = static_cast<uint64_t>(start);
      meta.size = static_cast<uint64_t>(size);
      group.chunks.push_back(meta);
    }
    file.row_groups_.push_back(std::move(group));
  }
  return ok_status();
}

Expected<std::shared_ptr<const ParquetFile>> ParquetFile::open(const std::string& path, const ReadLimits& limits) {
  KIPP_ASSIGN_OR_RETURN(MappedFile mapping, MappedFile::open(path));
  auto file = std::make_shared<ParquetFile>();
  file->file_ = std::move(mapping);
  file->limits_ = limits;
  const uint8_t* data = file->file_.data();
  const size_t size = file->file_.size();
  const auto fail = [&](const std::string& what) { return make_error(path + ": " + what); };
  if (size < 12) {
    return fail("not a Parquet file: " + std::to_string(size) +
                " bytes is too small (a Parquet file has at least 12: magic, footer length, magic)");
  }
  if (std::memcmp(data, kMagic, 4) != 0) return fail("not a Parquet file: it does not start with the magic \"PAR1\"");
  if (std::memcmp(data + size - 4, "PARE", 4) == 0) return fail("encrypted Parquet files are not supported");
  if (std::memcmp(data + size - 4, kMagic, 4) != 0) {
    return fail("not a Parquet file, or truncated: it does not end with the magic \"PAR1\"");
  }
  const uint64_t footer_size = load_u32_le(data + size - 8);
  if (footer_size > size - 12) {
    return fail("corrupt footer: its length " + std::to_string(footer_size) + " exceeds the file (" +
                std::to_string(size) + " bytes)");
  }
  if (footer_size > limits.max_footer_bytes) {
    return fail("footer of " + std::to_string(footer_size) + " bytes exceeds the limit of " +
                std::to_string(limits.max_footer_bytes));
  }
  const std::span<const uint8_t> footer(data + size - 8 - footer_size, static_cast<size_t>(footer_size));
  const Status parsed = FooterParser::parse(*file, footer);
  if (!parsed.ok()) return fail(parsed.message());
  return std::shared_ptr<const ParquetFile>(std::move(file));
}

std::vector<std::string> ParquetFile::column_names() const {
  std::vector<std::string> names;
  for (const ColumnInfo& column : columns_) names.push_back(column.name);
  return names;
}

Expected<const ColumnInfo*> ParquetFile::find_column(std::string_view name) const {
  for (const ColumnInfo& column : columns_) {
    if (column.name == name) return &column;
  }
  std::string list;
  for (const ColumnInfo& column : columns_) list += (list.empty() ? "\"" : ", \"") + column.name + "\"";
  return make_error(path() + ": no column \"" + std::string(name) + "\" (the file has: " +
                    (list.empty() ? "no columns" : list) + ")");
}

// ---- One data page's values ------------------------------------------------------------------

class PageDecoder {
 public:
  // `values`: the page's value bytes; `levels`: its definition levels (RLE hybrid, width 1),
  // empty for a required column.
  Status reset(int32_t encoding, std::span<const uint8_t> values, std::span<const uint8_t> levels, bool optional,
               int64_t num_values, const std::vector<std::string_view>* dictionary) {
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
      case kEncodingPlain:
        break;
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

  int64_t values_left() const { return values_left_; }
  size_t buffer_bytes() const { return previous_.capacity(); }

  bool next(std::optional<std::string_view>& value, std::string& error) {
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
      default:
        error = "unsupported encoding";
        return false;
    }
  }

 private:
  // Every non-null value has a length; more lengths than values in the page is corrupt (and
  // would let a tiny header claim billions).
  bool check_count(uint64_t count, std::string& error) const {
    if (count > static_cast<uint64_t>(values_left_)) {
      error = "delta encoding claims " + std::to_string(count) + " values in a page of " +
              std::to_string(values_left_);
      return false;
    }
    return true;
  }

  bool init_lengths(const uint8_t* start, std::string& error) {
    if (!lengths_.init(start, end_, error) || !check_count(lengths_.total(), error)) return false;
    DeltaDecoder scan = lengths_;
    if (!scan.skip_all(error)) return false;
    p_ = scan.position();  // the concatenated value bytes follow the lengths
    return true;
  }

  bool next_suffix(std::string_view& bytes, std::string& error) {
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

// ---- Column reader ---------------------------------------------------------------------------

StringColumnReader::StringColumnReader(std::shared_ptr<const ParquetFile> file, ColumnInfo info)
    : file_(std::move(file)), info_(std::move(info)), decoder_(std::make_unique<PageDecoder>()) {}

StringColumnReader::~StringColumnReader() = default;

Expected<std::unique_ptr<StringColumnReader>> StringColumnReader::open(std::shared_ptr<const ParquetFile> file,
                                                                       std::string_view column) {
  KIPP_ASSIGN_OR_RETURN(const ColumnInfo* info, file->find_column(column));
  if (info->nested) {
    return make_error(file->path() + ": column \"" + info->name +
                      "\" is nested or repeated; only flat (top-level primitive) columns can be read");
  }
  if (info->type != static_cast<int32_t>(PhysicalType::ByteArray)) {
    return make_error(file->path() + ": column \"" + info->name + "\" has type " + physical_type_name(info->type) +
                      ", not BYTE_ARRAY (strings)");
  }
  ColumnInfo copy = *info;
  return std::unique_ptr<StringColumnReader>(new StringColumnReader(std::move(file), std::move(copy)));
}

Error StringColumnReader::error(const std::string& what) const {
  return make_error(file_->path() + ": column \"" + info_.name + "\", row group " + std::to_string(row_group_) +
                    ": " + what);
}

void StringColumnReader::note_buffers() {
  const size_t held = page_buffer_.capacity() + dictionary_buffer_.capacity() +
                      dictionary_.capacity() * sizeof(std::string_view) + decoder_->buffer_bytes() +
                      static_cast<size_t>(current_page_compressed_);
  peak_buffer_bytes_ = std::max(peak_buffer_bytes_, held);
}

Status StringColumnReader::start_row_group(size_t index) {
  const RowGroupMeta& group = file_->row_groups()[index];
  const ColumnChunkMeta& chunk = group.chunks[info_.leaf_index];
  if (chunk.num_values == -1) return error("the column chunk is stored in another file, which is not supported");
  if (chunk.num_values == -2) return error("the column chunk has no metadata (an encrypted column?)");
  if (chunk.type != info_.type) {
    return error("the column chunk has type " + physical_type_name(chunk.type) + ", the schema says " +
                 physical_type_name(info_.type));
  }
  if (chunk.codec != kCodecUncompressed && chunk.codec != kCodecSnappy && chunk.codec != kCodecGzip &&
      chunk.codec != kCodecZstd) {
    return error("compression codec " + codec_name(chunk.codec) +
                 " is not supported (supported: UNCOMPRESSED, SNAPPY, GZIP, ZSTD)");
  }
  if (chunk.num_values != group.num_rows) {
    return error("the column chunk holds " + std::to_string(chunk.num_values) + " values for " +
                 std::to_string(group.num_rows) + " rows");
  }
  chunk_pos_ = chunk.start;
  chunk_end_ = chunk.start + chunk.size;
  codec_ = chunk.codec;
  chunk_values_left_ = chunk.num_values;
  dictionary_.clear();
  has_dictionary_ = false;
  in_chunk_ = true;
  ++stats_.row_groups;
  return ok_status();
}

Status StringColumnReader::read_page() {
  const ParquetFile& file = *file_;
  const uint8_t* base = file.mapping().data();
  const uint64_t max_page = file.limits().max_page_bytes;
  while (true) {
    if (chunk_pos_ >= chunk_end_) {
      return error("the column chunk ends with " + std::to_string(chunk_values_left_) + " values still to read");
    }
    // The previous page's bytes are no longer needed: let the kernel drop them.
    if (current_page_compressed_ > 0) {
      drop_mapped_pages({base + current_page_begin_, static_cast<size_t>(chunk_pos_ - current_page_begin_)});
    }
    const uint64_t header_at = chunk_pos_;
    page_offset_ = header_at;
    CompactReader r({base + chunk_pos_, static_cast<size_t>(chunk_end_ - chunk_pos_)});
    const PageHeader h = parse_page_header(r);
    const auto at = [&](const std::string& what) { return error("page at byte " + std::to_string(header_at) + ": " + what); };
    if (!r.ok()) return at("corrupt page header: " + r.error());
    const uint64_t data_start = chunk_pos_ + r.position();
    const auto compressed = static_cast<uint64_t>(h.compressed_size);
    const auto uncompressed = static_cast<uint64_t>(h.uncompressed_size);
    if (compressed > chunk_end_ - data_start) {
      return at("compressed size " + std::to_string(compressed) + " exceeds the " +
                std::to_string(chunk_end_ - data_start) + " bytes left in the column chunk");
    }
    if (uncompressed > max_page || compressed > max_page) {
      return at("page size " + std::to_string(std::max(compressed, uncompressed)) + " exceeds the limit of " +
                std::to_string(max_page) + " bytes");
    }
    chunk_pos_ = data_start + compressed;
    current_page_begin_ = header_at;
    current_page_compressed_ = compressed;
    const std::span<const uint8_t> raw(base + data_start, static_cast<size_t>(compressed));

    // The whole page's bytes after decompression (v1 and dictionary pages).
    const auto whole_page = [&](std::vector<uint8_t>& buffer, std::span<const uint8_t>& out) -> Status {
      if (codec_ == kCodecUncompressed) {
        if (compressed != uncompressed) {
          return at("uncompressed page has sizes " + std::to_string(compressed) + " and " + std::to_string(uncompressed));
        }
        out = raw;
        return ok_status();
      }
      const Status status = decompress(codec_, raw, static_cast<size_t>(uncompressed), buffer);
      if (!status.ok()) return at(status.message());
      out = {buffer.data(), static_cast<size_t>(uncompressed)};
      return ok_status();
    };

    if (h.type == kPageDictionary) {
      if (!h.has_dictionary) return at("dictionary page without a DictionaryPageHeader");
      if (has_dictionary_) return at("a second dictionary page in the column chunk");
      if (h.encoding != kEncodingPlain && h.encoding != kEncodingPlainDictionary) {
        return at("dictionary page encoding " + encoding_name(h.encoding) + " is not supported");
      }
      std::span<const uint8_t> bytes;
      KIPP_RETURN_IF_ERROR(whole_page(dictionary_buffer_, bytes));
      // Every entry takes at least its 4-byte length.
      if (h.num_values < 0 || static_cast<uint64_t>(h.num_values) > bytes.size() / 4) {
        return at("dictionary claims " + std::to_string(h.num_values) + " entries in " + std::to_string(bytes.size()) +
                  " bytes");
      }
      dictionary_.clear();
      dictionary_.reserve(static_cast<size_t>(h.num_values));
      size_t pos = 0;
      for (int32_t i = 0; i < h.num_values; ++i) {
        if (bytes.size() - pos < 4) return at("dictionary entry " + std::to_string(i) + " runs past the page");
        const uint32_t length = load_u32_le(bytes.data() + pos);
        pos += 4;
        if (length > bytes.size() - pos) return at("dictionary entry " + std::to_string(i) + " runs past the page");
        dictionary_.push_back(as_view(bytes.data() + pos, length));
        pos += length;
      }
      has_dictionary_ = true;
      ++stats_.dictionary_pages;
      note_buffers();
      continue;
    }
    if (h.type != kPageData && h.type != kPageDataV2) continue;  // index pages and future kinds: skipped

    int64_t num_values = 0;
    std::span<const uint8_t> levels;
    std::span<const uint8_t> values;
    const bool optional = info_.repetition == Repetition::Optional;
    if (h.type == kPageData) {
      if (!h.has_data) return at("data page without a DataPageHeader");
      num_values = h.num_values;
      std::span<const uint8_t> bytes;
      KIPP_RETURN_IF_ERROR(whole_page(page_buffer_, bytes));
      if (optional) {
        if (h.def_encoding != kEncodingRle) {
          return at("definition level encoding " + encoding_name(h.def_encoding) + " is not supported (only RLE)");
        }
        if (bytes.size() < 4) return at("definition levels run past the page");
        const uint32_t length = load_u32_le(bytes.data());
        if (length > bytes.size() - 4) return at("definition levels run past the page");
        levels = bytes.subspan(4, length);
        values = bytes.subspan(4 + static_cast<size_t>(length));
      } else {
        values = bytes;
      }
    } else {
      if (!h.has_data_v2) return at("data page v2 without a DataPageHeaderV2");
      num_values = h.num_values;
      if (h.def_bytes < 0 || h.rep_bytes < 0 ||
          static_cast<uint64_t>(h.def_bytes) + static_cast<uint64_t>(h.rep_bytes) > compressed ||
          static_cast<uint64_t>(h.def_bytes) + static_cast<uint64_t>(h.rep_bytes) > uncompressed) {
        return at("level lengths " + std::to_string(h.rep_bytes) + " + " + std::to_string(h.def_bytes) +
                  " do not fit in the page");
      }
      const auto level_bytes = static_cast<size_t>(h.rep_bytes + h.def_bytes);
      levels = raw.subspan(static_cast<size_t>(h.rep_bytes), static_cast<size_t>(h.def_bytes));
      if (!optional) levels = {};
      const std::span<const uint8_t> rest = raw.subspan(level_bytes);
      const uint64_t rest_size = uncompressed - level_bytes;
      if (codec_ == kCodecUncompressed || !h.is_compressed) {
        if (rest.size() != rest_size) {
          return at("uncompressed values take " + std::to_string(rest.size()) + " bytes, the header says " +
                    std::to_string(rest_size));
        }
        values = rest;
      } else {
        const Status status = decompress(codec_, rest, static_cast<size_t>(rest_size), page_buffer_);
        if (!status.ok()) return at(status.message());
        values = {page_buffer_.data(), static_cast<size_t>(rest_size)};
      }
    }
    if (num_values < 0 || num_values > chunk_values_left_) {
      return at("page claims " + std::to_string(num_values) + " values, the column chunk has " +
                std::to_string(chunk_values_left_) + " left");
    }
    const Status reset =
        decoder_->reset(h.encoding, values, levels, optional, num_values, has_dictionary_ ? &dictionary_ : nullptr);
    if (!reset.ok()) return at(reset.message());
    chunk_values_left_ -= num_values;
    ++(h.type == kPageData ? stats_.data_pages_v1 : stats_.data_pages_v2);
    if (h.encoding >= 0 && h.encoding < 32) stats_.encodings |= 1u << h.encoding;
    note_buffers();
    return ok_status();
  }
}

Expected<bool> StringColumnReader::next(std::optional<std::string_view>& value) {
  while (true) {
    if (decoder_->values_left() > 0) {
      std::string message;
      if (!decoder_->next(value, message)) {
        return error("page at byte " + std::to_string(page_offset_) + ": " + message);
      }
      ++rows_read_;
      return true;
    }
    if (in_chunk_ && chunk_values_left_ > 0) {
      KIPP_RETURN_IF_ERROR(read_page());
      continue;
    }
    if (in_chunk_) {
      in_chunk_ = false;
      ++row_group_;
    }
    if (row_group_ >= file_->row_groups().size()) return false;
    KIPP_RETURN_IF_ERROR(start_row_group(row_group_));
  }
}

// ---- Row-aligned readers ---------------------------------------------------------------------

Expected<std::unique_ptr<StringRowReader>> StringRowReader::open(std::shared_ptr<const ParquetFile> file,
                                                                 const std::vector<std::string>& columns) {
  auto reader = std::unique_ptr<StringRowReader>(new StringRowReader());
  reader->file_ = file;
  for (const std::string& column : columns) {
    KIPP_ASSIGN_OR_RETURN(auto column_reader, StringColumnReader::open(file, column));
    reader->readers_.push_back(std::move(column_reader));
  }
  return reader;
}

Expected<bool> StringRowReader::next(std::vector<std::optional<std::string_view>>& row) {
  row.resize(readers_.size());
  size_t ended = 0;
  for (size_t i = 0; i < readers_.size(); ++i) {
    KIPP_ASSIGN_OR_RETURN(const bool more, readers_[i]->next(row[i]));
    if (!more) ++ended;
  }
  if (ended == readers_.size()) return false;
  if (ended > 0) {
    return make_error(file_->path() + ": columns end at different rows (after row " + std::to_string(rows_read_) + ")");
  }
  ++rows_read_;
  return true;
}

size_t StringRowReader::peak_buffer_bytes() const {
  size_t total = 0;
  for (const auto& reader : readers_) total += reader->peak_buffer_bytes();
  return total;
}

}  // namespace kipp::parquet
