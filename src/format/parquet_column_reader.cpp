// The Parquet column reader: page headers, then a chunk's pages one at a time (its dictionary
// page, data pages v1 and v2) into the page decoder of parquet_encodings.h, and the row-aligned
// reader over several columns.
#include "format/parquet.h"

#include <algorithm>
#include <span>

#include "format/parquet_encodings.h"
#include "format/thrift_compact.h"

namespace kipp::parquet {

using thrift::CompactReader;
using thrift::CompactType;
using thrift::FieldHeader;

namespace {

constexpr int32_t kPageData = 0, kPageDictionary = 2, kPageDataV2 = 3;

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
      case 1:
        h.num_values = thrift::read_i32_field(r, f, "num_values");
        seen[0] = true;
        break;
      case 2:
        h.encoding = thrift::read_i32_field(r, f, "encoding");
        seen[1] = true;
        break;
      case 3:
        h.def_encoding = thrift::read_i32_field(r, f, "definition_level_encoding");
        seen[2] = true;
        break;
      case 4:
        thrift::read_i32_field(r, f, "repetition_level_encoding");
        seen[3] = true;
        break;
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
      case 1:
        h.num_values = thrift::read_i32_field(r, f, "num_values");
        seen |= 1;
        break;
      case 2:
        h.num_nulls = thrift::read_i32_field(r, f, "num_nulls");
        seen |= 2;
        break;
      case 3:
        thrift::read_i32_field(r, f, "num_rows");
        seen |= 4;
        break;
      case 4:
        h.encoding = thrift::read_i32_field(r, f, "encoding");
        seen |= 8;
        break;
      case 5:
        h.def_bytes = thrift::read_i32_field(r, f, "definition_levels_byte_length");
        seen |= 16;
        break;
      case 6:
        h.rep_bytes = thrift::read_i32_field(r, f, "repetition_levels_byte_length");
        seen |= 32;
        break;
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
      case 1:
        h.num_values = thrift::read_i32_field(r, f, "num_values");
        seen |= 1;
        break;
      case 2:
        h.encoding = thrift::read_i32_field(r, f, "encoding");
        seen |= 2;
        break;
      default: r.skip(f.type);
    }
  }
  r.end_struct();
  if (r.ok() && seen != 3) r.fail("DictionaryPageHeader lacks a required field");
}

// A page header's nested struct (data, dictionary or data v2 header) read into h, marking it
// present; a field of another type is skipped.
void read_nested_header(CompactReader& r, const FieldHeader& f, PageHeader& h,
                        void (*parse)(CompactReader&, PageHeader&), bool& present) {
  if (f.type != CompactType::Struct) {
    r.skip(f.type);
    return;
  }
  parse(r, h);
  present = true;
}

PageHeader parse_page_header(CompactReader& r) {
  PageHeader h;
  r.begin_struct();
  for (FieldHeader f = r.next_field(); r.ok() && f.type != CompactType::Stop; f = r.next_field()) {
    switch (f.id) {
      case 1: h.type = thrift::read_i32_field(r, f, "type"); break;
      case 2: h.uncompressed_size = thrift::read_i32_field(r, f, "uncompressed_page_size"); break;
      case 3: h.compressed_size = thrift::read_i32_field(r, f, "compressed_page_size"); break;
      case 5: read_nested_header(r, f, h, parse_data_page_header, h.has_data); break;
      case 7: read_nested_header(r, f, h, parse_dictionary_page_header, h.has_dictionary); break;
      case 8: read_nested_header(r, f, h, parse_data_page_header_v2, h.has_data_v2); break;
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
  return make_error(file_->path() + ": column \"" + info_.name + "\", row group " + std::to_string(row_group_) + ": " +
                    what);
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

// A page header and where the page's data lies in the mapping.
struct StringColumnReader::Page {
  PageHeader header;
  uint64_t offset = 0;           // of the header in the file
  std::span<const uint8_t> raw;  // the data as stored (compressed with the chunk's codec)
};

Error StringColumnReader::page_error(const Page& page, const std::string& what) const {
  return error("page at byte " + std::to_string(page.offset) + ": " + what);
}

Status StringColumnReader::read_page() {
  while (true) {
    Page page;
    KIPP_RETURN_IF_ERROR(next_page(page));
    if (page.header.type == kPageDictionary) {
      KIPP_RETURN_IF_ERROR(read_dictionary_page(page));
      continue;
    }
    if (page.header.type == kPageData || page.header.type == kPageDataV2) return start_data_page(page);
    // Index pages and future kinds: skipped.
  }
}

Status StringColumnReader::next_page(Page& page) {
  const ParquetFile& file = *file_;
  const uint8_t* base = file.mapping().data();
  const uint64_t max_page = file.limits().max_page_bytes;
  if (chunk_pos_ >= chunk_end_) {
    return error("the column chunk ends with " + std::to_string(chunk_values_left_) + " values still to read");
  }
  // The previous page's bytes are no longer needed: let the kernel drop them.
  if (current_page_compressed_ > 0) {
    drop_mapped_pages({base + current_page_begin_, static_cast<size_t>(chunk_pos_ - current_page_begin_)});
  }
  page.offset = chunk_pos_;
  page_offset_ = page.offset;
  CompactReader r({base + chunk_pos_, static_cast<size_t>(chunk_end_ - chunk_pos_)});
  page.header = parse_page_header(r);
  if (!r.ok()) return page_error(page, "corrupt page header: " + r.error());
  const uint64_t data_start = chunk_pos_ + r.position();
  const auto compressed = static_cast<uint64_t>(page.header.compressed_size);
  const auto uncompressed = static_cast<uint64_t>(page.header.uncompressed_size);
  if (compressed > chunk_end_ - data_start) {
    return page_error(page, "compressed size " + std::to_string(compressed) + " exceeds the " +
                                std::to_string(chunk_end_ - data_start) + " bytes left in the column chunk");
  }
  if (uncompressed > max_page || compressed > max_page) {
    return page_error(page, "page size " + std::to_string(std::max(compressed, uncompressed)) +
                                " exceeds the limit of " + std::to_string(max_page) + " bytes");
  }
  chunk_pos_ = data_start + compressed;
  current_page_begin_ = page.offset;
  current_page_compressed_ = compressed;
  page.raw = {base + data_start, static_cast<size_t>(compressed)};
  return ok_status();
}

// The whole page's bytes after decompression (v1 and dictionary pages); `buffer` holds them
// unless the chunk is uncompressed.
Expected<std::span<const uint8_t>> StringColumnReader::page_bytes(const Page& page, std::vector<uint8_t>& buffer) {
  const uint64_t compressed = page.raw.size();
  const auto uncompressed = static_cast<uint64_t>(page.header.uncompressed_size);
  if (codec_ == kCodecUncompressed) {
    if (compressed != uncompressed) {
      return page_error(
          page, "uncompressed page has sizes " + std::to_string(compressed) + " and " + std::to_string(uncompressed));
    }
    return page.raw;
  }
  const Status status = decompress(codec_, page.raw, static_cast<size_t>(uncompressed), buffer);
  if (!status.ok()) return page_error(page, status.message());
  return std::span<const uint8_t>(buffer.data(), static_cast<size_t>(uncompressed));
}

Status StringColumnReader::read_dictionary_page(const Page& page) {
  const PageHeader& h = page.header;
  if (!h.has_dictionary) return page_error(page, "dictionary page without a DictionaryPageHeader");
  if (has_dictionary_) return page_error(page, "a second dictionary page in the column chunk");
  if (h.encoding != kEncodingPlain && h.encoding != kEncodingPlainDictionary) {
    return page_error(page, "dictionary page encoding " + encoding_name(h.encoding) + " is not supported");
  }
  KIPP_ASSIGN_OR_RETURN(const std::span<const uint8_t> bytes, page_bytes(page, dictionary_buffer_));
  // Every entry takes at least its 4-byte length.
  if (h.num_values < 0 || static_cast<uint64_t>(h.num_values) > bytes.size() / 4) {
    return page_error(page, "dictionary claims " + std::to_string(h.num_values) + " entries in " +
                                std::to_string(bytes.size()) + " bytes");
  }
  dictionary_.clear();
  dictionary_.reserve(static_cast<size_t>(h.num_values));
  size_t pos = 0;
  for (int32_t i = 0; i < h.num_values; ++i) {
    if (bytes.size() - pos < 4) {
      return page_error(page, "dictionary entry " + std::to_string(i) + " runs past the page");
    }
    const uint32_t length = load_u32_le(bytes.data() + pos);
    pos += 4;
    if (length > bytes.size() - pos) {
      return page_error(page, "dictionary entry " + std::to_string(i) + " runs past the page");
    }
    dictionary_.push_back(as_view(bytes.data() + pos, length));
    pos += length;
  }
  has_dictionary_ = true;
  ++stats_.dictionary_pages;
  note_buffers();
  return ok_status();
}

// A v1 data page holds levels and values in one (compressed) block, the levels prefixed by
// their length.
Status StringColumnReader::data_page_v1(const Page& page, std::span<const uint8_t>& levels,
                                        std::span<const uint8_t>& values) {
  const PageHeader& h = page.header;
  if (!h.has_data) return page_error(page, "data page without a DataPageHeader");
  KIPP_ASSIGN_OR_RETURN(const std::span<const uint8_t> bytes, page_bytes(page, page_buffer_));
  if (info_.repetition != Repetition::Optional) {
    values = bytes;
    return ok_status();
  }
  if (h.def_encoding != kEncodingRle) {
    return page_error(page,
                      "definition level encoding " + encoding_name(h.def_encoding) + " is not supported (only RLE)");
  }
  if (bytes.size() < 4) return page_error(page, "definition levels run past the page");
  const uint32_t length = load_u32_le(bytes.data());
  if (length > bytes.size() - 4) return page_error(page, "definition levels run past the page");
  levels = bytes.subspan(4, length);
  values = bytes.subspan(4 + static_cast<size_t>(length));
  return ok_status();
}

// A v2 data page stores its levels uncompressed ahead of the (maybe compressed) values.
Status StringColumnReader::data_page_v2(const Page& page, std::span<const uint8_t>& levels,
                                        std::span<const uint8_t>& values) {
  const PageHeader& h = page.header;
  if (!h.has_data_v2) return page_error(page, "data page v2 without a DataPageHeaderV2");
  const uint64_t compressed = page.raw.size();
  const auto uncompressed = static_cast<uint64_t>(h.uncompressed_size);
  if (h.def_bytes < 0 || h.rep_bytes < 0 ||
      static_cast<uint64_t>(h.def_bytes) + static_cast<uint64_t>(h.rep_bytes) > compressed ||
      static_cast<uint64_t>(h.def_bytes) + static_cast<uint64_t>(h.rep_bytes) > uncompressed) {
    return page_error(page, "level lengths " + std::to_string(h.rep_bytes) + " + " + std::to_string(h.def_bytes) +
                                " do not fit in the page");
  }
  const auto level_bytes = static_cast<size_t>(h.rep_bytes + h.def_bytes);
  if (info_.repetition == Repetition::Optional) {
    levels = page.raw.subspan(static_cast<size_t>(h.rep_bytes), static_cast<size_t>(h.def_bytes));
  }
  const std::span<const uint8_t> rest = page.raw.subspan(level_bytes);
  const uint64_t rest_size = uncompressed - level_bytes;
  if (codec_ == kCodecUncompressed || !h.is_compressed) {
    if (rest.size() != rest_size) {
      return page_error(page, "uncompressed values take " + std::to_string(rest.size()) + " bytes, the header says " +
                                  std::to_string(rest_size));
    }
    values = rest;
    return ok_status();
  }
  const Status status = decompress(codec_, rest, static_cast<size_t>(rest_size), page_buffer_);
  if (!status.ok()) return page_error(page, status.message());
  values = {page_buffer_.data(), static_cast<size_t>(rest_size)};
  return ok_status();
}

Status StringColumnReader::start_data_page(const Page& page) {
  const PageHeader& h = page.header;
  std::span<const uint8_t> levels;
  std::span<const uint8_t> values;
  KIPP_RETURN_IF_ERROR(h.type == kPageData ? data_page_v1(page, levels, values) : data_page_v2(page, levels, values));
  const int64_t num_values = h.num_values;
  if (num_values < 0 || num_values > chunk_values_left_) {
    return page_error(page, "page claims " + std::to_string(num_values) + " values, the column chunk has " +
                                std::to_string(chunk_values_left_) + " left");
  }
  const bool optional = info_.repetition == Repetition::Optional;
  const Status reset =
      decoder_->reset(h.encoding, values, levels, optional, num_values, has_dictionary_ ? &dictionary_ : nullptr);
  if (!reset.ok()) return page_error(page, reset.message());
  chunk_values_left_ -= num_values;
  ++(h.type == kPageData ? stats_.data_pages_v1 : stats_.data_pages_v2);
  if (h.encoding >= 0 && h.encoding < 32) stats_.encodings |= 1u << h.encoding;
  note_buffers();
  return ok_status();
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
