// The Parquet footer: FileMetaData (Thrift compact protocol) into ParquetFile's columns and row
// groups, every count and byte range checked against the schema and the file.
#include "format/parquet.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "format/parquet_encodings.h"
#include "format/thrift_compact.h"

namespace kipp::parquet {

using thrift::CompactReader;
using thrift::CompactType;
using thrift::FieldHeader;

std::string physical_type_name(int32_t type) {
  static const char* const names[] = {"BOOLEAN", "INT32",  "INT64",      "INT96",
                                      "FLOAT",   "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
  if (type >= 0 && type < 8) return names[type];
  return "type " + std::to_string(type);
}

namespace {

constexpr char kMagic[4] = {'P', 'A', 'R', '1'};

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
      case 4:
        e.name = thrift::read_binary_field(r, f, "SchemaElement.name");
        has_name = true;
        break;
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
      case 1:
        c.meta.type = thrift::read_i32_field(r, f, "ColumnMetaData.type");
        seen |= 1;
        break;
      case 4:
        c.meta.codec = thrift::read_i32_field(r, f, "ColumnMetaData.codec");
        seen |= 2;
        break;
      case 5:
        c.meta.num_values = thrift::read_i64_field(r, f, "ColumnMetaData.num_values");
        seen |= 4;
        break;
      case 7:
        c.total_compressed_size = thrift::read_i64_field(r, f, "ColumnMetaData.total_compressed_size");
        seen |= 8;
        break;
      case 9:
        c.data_page_offset = thrift::read_i64_field(r, f, "ColumnMetaData.data_page_offset");
        seen |= 16;
        break;
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

// One RowGroup: its column chunks into `chunks`; its num_rows, -1 when absent.
int64_t parse_row_group(CompactReader& r, std::vector<RawChunk>& chunks) {
  int64_t rows = -1;
  r.begin_struct();
  for (FieldHeader f = r.next_field(); r.ok() && f.type != CompactType::Stop; f = r.next_field()) {
    if (f.id == 1) {
      const thrift::ListHeader columns = thrift::read_list_field(r, f, "RowGroup.columns");
      for (uint32_t c = 0; c < columns.size && r.ok(); ++c) {
        if (columns.element != CompactType::Struct) {
          r.fail("column chunk list elements are not structs");
          break;
        }
        parse_column_chunk(r, chunks.emplace_back());
      }
    } else if (f.id == 3) {
      rows = thrift::read_i64_field(r, f, "RowGroup.num_rows");
    } else {
      r.skip(f.type);
    }
  }
  r.end_struct();
  return rows;
}

// FileMetaData as the footer holds it, before it is checked against itself and the file.
struct RawFooter {
  std::vector<SchemaElement> schema;
  std::vector<std::vector<RawChunk>> chunks;  // per row group, per leaf column
  std::vector<int64_t> group_rows;
  uint64_t num_rows = 0;
  std::string created_by;
};

Expected<RawFooter> parse_file_metadata(std::span<const uint8_t> footer) {
  CompactReader r(footer);
  RawFooter out;
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
          parse_schema_element(r, out.schema.emplace_back());
        }
        has_schema = true;
        break;
      }
      case 3: {
        const int64_t rows = thrift::read_i64_field(r, f, "FileMetaData.num_rows");
        if (r.ok() && rows < 0) r.fail("num_rows is negative (" + std::to_string(rows) + ")");
        out.num_rows = static_cast<uint64_t>(rows);
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
          const int64_t rows = parse_row_group(r, out.chunks.emplace_back());
          if (r.ok() && rows < 0) r.fail("row group " + std::to_string(g) + " has no (or a negative) num_rows");
          out.group_rows.push_back(rows);
        }
        has_groups = true;
        break;
      }
      case 6: out.created_by = thrift::read_binary_field(r, f, "FileMetaData.created_by"); break;
      default: r.skip(f.type);
    }
  }
  r.end_struct();
  if (!r.ok()) return make_error("corrupt footer (FileMetaData): " + r.error());
  if (!has_schema || !has_rows || !has_groups) {
    return make_error("corrupt footer: FileMetaData lacks its schema, num_rows or row_groups");
  }
  return out;
}

// The schema's top-level fields into `columns`, and the number of leaf columns into `leaves`.
// The schema is a depth-first list; element 0 is the root. Top-level groups (and repeated
// primitives) are nested columns: their leaves are counted so later columns find their chunk.
Status collect_columns(const std::vector<SchemaElement>& schema, std::vector<ColumnInfo>& columns, size_t& leaves) {
  if (schema.empty()) return make_error("corrupt footer: the schema is empty");
  if (schema[0].num_children < 0) return make_error("corrupt footer: the schema root has a negative child count");
  size_t index = 1;
  leaves = 0;
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
        if (index >= schema.size())
          return make_error("corrupt footer: the schema ends inside field \"" + e.name + "\"");
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
    columns.push_back(std::move(info));
  }
  if (index != schema.size()) {
    return make_error("corrupt footer: the schema has " + std::to_string(schema.size() - index) +
                      " elements beyond the root's children");
  }
  return ok_status();
}

// Column chunk `c` of `where` (a row group), its byte range checked to lie in [4, data_end).
Expected<ColumnChunkMeta> chunk_meta(const RawChunk& raw, const std::string& where, size_t c, uint64_t data_end) {
  ColumnChunkMeta meta = raw.meta;
  if (raw.external || !raw.has_meta) {
    // Marked unreadable (size 0, start 0); reading that column reports it.
    meta.start = 0;
    meta.size = 0;
    meta.num_values = raw.external ? -1 : -2;
    return meta;
  }
  int64_t start = raw.data_page_offset;
  if (raw.dictionary_page_offset > 0 && raw.dictionary_page_offset < start) start = raw.dictionary_page_offset;
  const int64_t size = raw.total_compressed_size;
  if (start < 4 || size < 0 || static_cast<uint64_t>(start) > data_end ||
      static_cast<uint64_t>(size) > data_end - static_cast<uint64_t>(start)) {
    return make_error("corrupt footer: " + where + ", column chunk " + std::to_string(c) + " claims bytes [" +
                      std::to_string(start) + ", +" + std::to_string(size) + ") outside the data area [4, " +
                      std::to_string(data_end) + ")");
  }
  if (meta.num_values < 0) {
    return make_error("corrupt footer: " + where + ", column chunk " + std::to_string(c) + " has " +
                      std::to_string(meta.num_values) + " values");
  }
  meta.start = static_cast<uint64_t>(start);
  meta.size = static_cast<uint64_t>(size);
  return meta;
}

// Row groups: one chunk per leaf; chunk byte ranges must lie before the footer.
Status collect_row_groups(const RawFooter& raw, size_t leaves, uint64_t data_end, std::vector<RowGroupMeta>& groups) {
  for (size_t g = 0; g < raw.chunks.size(); ++g) {
    const std::string where = "row group " + std::to_string(g);
    if (raw.chunks[g].size() != leaves) {
      return make_error("corrupt footer: " + where + " has " + std::to_string(raw.chunks[g].size()) +
                        " column chunks, the schema has " + std::to_string(leaves) + " columns");
    }
    RowGroupMeta group;
    group.num_rows = raw.group_rows[g];
    for (size_t c = 0; c < raw.chunks[g].size(); ++c) {
      KIPP_ASSIGN_OR_RETURN(ColumnChunkMeta meta, chunk_meta(raw.chunks[g][c], where, c, data_end));
      group.chunks.push_back(meta);
    }
    groups.push_back(std::move(group));
  }
  return ok_status();
}

}  // namespace

class FooterParser {
 public:
  static Status parse(ParquetFile& file, std::span<const uint8_t> footer);
};

Status FooterParser::parse(ParquetFile& file, std::span<const uint8_t> footer) {
  KIPP_ASSIGN_OR_RETURN(RawFooter raw, parse_file_metadata(footer));
  file.num_rows_ = raw.num_rows;
  file.created_by_ = std::move(raw.created_by);
  KIPP_RETURN_IF_ERROR(collect_columns(raw.schema, file.columns_, file.num_leaves_));
  const uint64_t data_end = file.file_.size() - 8 - footer.size();
  return collect_row_groups(raw, file.num_leaves_, data_end, file.row_groups_);
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
  return make_error(path() + ": no column \"" + std::string(name) +
                    "\" (the file has: " + (list.empty() ? "no columns" : list) + ")");
}

}  // namespace kipp::parquet
