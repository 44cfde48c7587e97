// A Parquet reader for string (BYTE_ARRAY) columns of flat schemas, written from the
// apache/parquet-format specification: the footer (FileMetaData, Thrift compact protocol),
// column chunks read one page at a time (data pages v1 and v2, dictionary pages), encodings
// PLAIN, PLAIN_DICTIONARY / RLE_DICTIONARY, DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY,
// definition levels for optional columns, and the codecs UNCOMPRESSED, SNAPPY, GZIP and ZSTD.
//
// Memory stays bounded whatever the file size: the file is memory-mapped, and a column reader
// holds only its current page (the decompressed bytes and, for dictionary-encoded chunks, the
// chunk's dictionary page); pages it is done with are dropped from the mapping's resident set.
//
// Every offset, length and count read from the file is checked against the file and the
// buffers, so malformed input gives one error naming the file and the problem, never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "core/status.h"

namespace kipp::parquet {

// Parquet's physical types (parquet.thrift `Type`).
enum class PhysicalType : int32_t {
  Boolean = 0,
  Int32 = 1,
  Int64 = 2,
  Int96 = 3,
  Float = 4,
  Double = 5,
  ByteArray = 6,
  FixedLenByteArray = 7,
};
std::string physical_type_name(int32_t type);

enum class Repetition : int32_t { Required = 0, Optional = 1, Repeated = 2 };

// One top-level field of the schema.
struct ColumnInfo {
  std::string name;
  // A group (struct, list, map) or a repeated primitive: listed, but not readable here.
  bool nested = false;
  int32_t type = -1;  // PhysicalType of a primitive; -1 for a group
  Repetition repetition = Repetition::Required;
  size_t leaf_index = 0;  // index of its (first) column chunk in each row group
};

// Limits that keep hostile files from making the reader allocate without bound.
struct ReadLimits {
  // Largest page (compressed or decompressed) and largest footer accepted.
  uint64_t max_page_bytes = 1ull << 30;
  uint64_t max_footer_bytes = 256ull << 20;
};

struct ColumnChunkMeta {
  int32_t type = -1;
  int32_t codec = 0;
  int64_t num_values = 0;
  uint64_t start = 0;  // first page (the dictionary page when there is one)
  uint64_t size = 0;   // total_compressed_size
};

struct RowGroupMeta {
  int64_t num_rows = 0;
  std::vector<ColumnChunkMeta> chunks;  // one per leaf column, in schema order
};

// An opened file: the mapping and the parsed footer. Shared by the column readers over it.
class ParquetFile {
 public:
  static Expected<std::shared_ptr<const ParquetFile>> open(const std::string& path, const ReadLimits& limits = {});

  const std::string& path() const { return file_.path(); }
  uint64_t num_rows() const { return num_rows_; }
  const std::vector<ColumnInfo>& columns() const { return columns_; }
  std::vector<std::string> column_names() const;
  const std::vector<RowGroupMeta>& row_groups() const { return row_groups_; }
  const ReadLimits& limits() const { return limits_; }
  const MappedFile& mapping() const { return file_; }
  std::string created_by() const { return created_by_; }

  // The top-level column `name`; an error listing the file's columns when there is none.
  Expected<const ColumnInfo*> find_column(std::string_view name) const;

 private:
  friend class FooterParser;
  MappedFile file_;
  ReadLimits limits_;
  uint64_t num_rows_ = 0;
  std::vector<ColumnInfo> columns_;
  size_t num_leaves_ = 0;
  std::vector<RowGroupMeta> row_groups_;
  std::string created_by_;
};

class PageDecoder;

// What a column reader has read so far (tests check fixtures exercise what they claim to).
struct PageStats {
  uint64_t data_pages_v1 = 0;
  uint64_t data_pages_v2 = 0;
  uint64_t dictionary_pages = 0;
  uint64_t row_groups = 0;
  uint32_t encodings = 0;  // bit (1 << encoding) for each data page encoding seen
};

// Streams one string column's values, row by row, across pages and row groups.
class StringColumnReader {
 public:
  // Errors: no such column (listing the columns), a nested/repeated column, a column that is
  // not BYTE_ARRAY.
  static Expected<std::unique_ptr<StringColumnReader>> open(std::shared_ptr<const ParquetFile> file,
                                                            std::string_view column);
  ~StringColumnReader();

  // The next value into `value` (nullopt for null): true, or false at the end of the column.
  // The view stays valid until the next call.
  Expected<bool> next(std::optional<std::string_view>& value);

  uint64_t rows_read() const { return rows_read_; }
  const PageStats& page_stats() const { return stats_; }
  // The most bytes the reader held at once in its page buffers (decompressed page, dictionary,
  // the previous value for DELTA_BYTE_ARRAY): the bound the streaming claim is about.
  size_t peak_buffer_bytes() const { return peak_buffer_bytes_; }
  const std::string& column() const { return info_.name; }

 private:
  StringColumnReader(std::shared_ptr<const ParquetFile> file, ColumnInfo info);
  Status start_row_group(size_t index);
  struct Page;
  Status read_page();            // the next data page of the current chunk into decoder_ (dictionary pages on the way)
  Status next_page(Page& page);  // the next page's header, its sizes checked against the chunk and the limits
  Expected<std::span<const uint8_t>> page_bytes(const Page& page, std::vector<uint8_t>& buffer);
  Status read_dictionary_page(const Page& page);
  Status data_page_v1(const Page& page, std::span<const uint8_t>& levels, std::span<const uint8_t>& values);
  Status data_page_v2(const Page& page, std::span<const uint8_t>& levels, std::span<const uint8_t>& values);
  Status start_data_page(const Page& page);  // a v1 or v2 data page's values into decoder_
  void note_buffers();
  Error error(const std::string& what) const;
  Error page_error(const Page& page, const std::string& what) const;

  std::shared_ptr<const ParquetFile> file_;
  ColumnInfo info_;
  size_t row_group_ = 0;
  bool in_chunk_ = false;
  uint64_t chunk_pos_ = 0;  // absolute file offset of the next page header
  uint64_t chunk_end_ = 0;
  uint64_t page_offset_ = 0;              // the current data page's header, for error messages
  uint64_t current_page_begin_ = 0;       // the last page read (header and data)
  uint64_t current_page_compressed_ = 0;  // its compressed size
  int32_t codec_ = 0;
  bool has_dictionary_ = false;
  int64_t chunk_values_left_ = 0;
  uint64_t rows_read_ = 0;
  PageStats stats_;
  size_t peak_buffer_bytes_ = 0;

  std::vector<uint8_t> page_buffer_;          // the current data page, decompressed
  std::vector<uint8_t> dictionary_buffer_;    // the chunk's dictionary page, decompressed
  std::vector<std::string_view> dictionary_;  // views into dictionary_buffer_
  std::unique_ptr<PageDecoder> decoder_;
};

// Several string columns of one file read row-aligned (one reader per column, advancing in
// lockstep); e.g. the Alpaca columns instruction, input, output.
class StringRowReader {
 public:
  static Expected<std::unique_ptr<StringRowReader>> open(std::shared_ptr<const ParquetFile> file,
                                                         const std::vector<std::string>& columns);
  // The next row's values, one per column in the order given: true, or false after the last row.
  Expected<bool> next(std::vector<std::optional<std::string_view>>& row);
  uint64_t rows_read() const { return rows_read_; }
  size_t peak_buffer_bytes() const;
  const ParquetFile& file() const { return *file_; }
  const StringColumnReader& column(size_t index) const { return *readers_[index]; }

 private:
  std::shared_ptr<const ParquetFile> file_;
  std::vector<std::unique_ptr<StringColumnReader>> readers_;
  uint64_t rows_read_ = 0;
};

}  // namespace kipp::parquet
