#include "data/records.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "data/csv_reader.h"
#include "data/json_records.h"
#include "data/record_source.h"
#include "data/text_records.h"

namespace kipp::data {
namespace {

namespace fs = std::filesystem;

constexpr std::array<std::pair<DatasetFormat, std::string_view>, 8> kFormatNames = {{
    {DatasetFormat::Auto, "auto"},
    {DatasetFormat::Text, "text"},
    {DatasetFormat::Jsonl, "jsonl"},
    {DatasetFormat::Csv, "csv"},
    {DatasetFormat::Parquet, "parquet"},
    {DatasetFormat::Alpaca, "alpaca"},
    {DatasetFormat::ShareGpt, "sharegpt"},
    {DatasetFormat::OpenAi, "openai"},
}};

// Malformed records reported per file; the rest are summed up in one line at its end.
constexpr uint64_t kReportsPerFile = 20;

// ---- expand_inputs ----

bool has_glob_characters(const std::string& input) { return input.find_first_of("*?[") != std::string::npos; }

bool is_hidden(const fs::path& path) {
  const std::string name = path.filename().string();
  return !name.empty() && name[0] == '.';
}

// Every regular file below `folder` (recursively), skipping hidden files and folders.
Status add_folder(const std::string& folder, std::vector<std::string>& out) {
  std::error_code error;
  fs::recursive_directory_iterator it(folder, fs::directory_options::none, error);
  const fs::recursive_directory_iterator end;
  for (; !error && it != end; it.increment(error)) {
    const fs::path& path = it->path();
    if (is_hidden(path)) {
      if (it->is_directory(error)) it.disable_recursion_pending();
      error.clear();
      continue;
    }
    if (it->is_regular_file(error)) out.push_back(path.lexically_normal().string());
    error.clear();
  }
  if (error) return make_error("listing " + folder + ": " + error.message());
  return {};
}

// A file or folder: its files into `out`.
Status add_path(const std::string& path, std::vector<std::string>& out) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return make_error(path + ": " + std::strerror(errno));
  if (S_ISDIR(info.st_mode)) return add_folder(path, out);
  if (!S_ISREG(info.st_mode)) return make_error(path + ": not a regular file or a folder");
  out.push_back(fs::path(path).lexically_normal().string());
  return {};
}

// ---- format resolution ----

std::string lower_extension(const std::string& path) {
  std::string extension = fs::path(path).extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c); });
  return extension;
}

std::string column_list(const std::vector<std::string>& columns) {
  std::string out;
  for (const std::string& name : columns) out += (out.empty() ? "\"" : ", \"") + name + "\"";
  return out.empty() ? "none" : out;
}

bool contains(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

// Parquet (column `text_field`) or Alpaca (instruction, output) for a Parquet file, checked
// against its columns.
Expected<DatasetFormat> resolve_parquet(const std::string& path, DatasetFormat format, const DatasetOptions& options) {
  KIPP_ASSIGN_OR_RETURN(std::vector<std::string> columns, ParquetRecordSource::column_names(path));
  const bool alpaca = contains(columns, "instruction") && contains(columns, "output");
  if (format == DatasetFormat::Auto) {
    if (alpaca) return DatasetFormat::Alpaca;
    if (contains(columns, options.text_field)) return DatasetFormat::Parquet;
    return make_error(path + ": cannot tell the dataset format: no column \"" + options.text_field +
                      "\" and no \"instruction\" and \"output\" (alpaca) among its columns (" + column_list(columns) +
                      ")");
  }
  if (format == DatasetFormat::Alpaca && !alpaca) {
    return make_error(
        path + ": alpaca needs the columns \"instruction\" and \"output\" (columns: " + column_list(columns) + ")");
  }
  if (format == DatasetFormat::Parquet && !contains(columns, options.text_field)) {
    return make_error(path + ": no column \"" + options.text_field + "\" (columns: " + column_list(columns) + ")");
  }
  return format;
}

// The format one file is read in; checks what can be checked before streaming it (CSV header,
// Parquet columns, the first JSON record under Auto).
Expected<DatasetFormat> resolve_format(const std::string& path, const DatasetOptions& options) {
  const std::string extension = lower_extension(path);
  static constexpr std::array<std::string_view, 8> kCompressed = {".gz",  ".bz2", ".xz",  ".zst",
                                                                  ".zip", ".7z",  ".lz4", ".tgz"};
  if (std::find(kCompressed.begin(), kCompressed.end(), extension) != kCompressed.end()) {
    return make_error(path + ": compressed files are not supported; decompress it first");
  }
  DatasetFormat format = options.format;
  if (extension == ".parquet" || format == DatasetFormat::Parquet) {
    if (format != DatasetFormat::Auto && format != DatasetFormat::Parquet && format != DatasetFormat::Alpaca) {
      return make_error(path + ": a Parquet file cannot be read as " + std::string(dataset_format_name(format)) +
                        " (use parquet, alpaca or auto)");
    }
    return resolve_parquet(path, format, options);
  }
  if (format == DatasetFormat::Auto) {
    if (extension == ".csv") {
      format = DatasetFormat::Csv;
    } else if (extension == ".jsonl" || extension == ".json" || extension == ".ndjson") {
      return detect_json_format(path, options);
    } else {
      return DatasetFormat::Text;
    }
  }
  if (format == DatasetFormat::Csv) KIPP_RETURN_IF_ERROR(open_csv_source(path, options));  // checks the header
  return format;
}

// ParquetRecordSource behind the per-file interface. Its progress is the whole file once done.
class ParquetAdapter final : public RecordSource {
 public:
  ParquetAdapter(std::string path, std::unique_ptr<ParquetRecordSource> source)
      : path_(std::move(path)), source_(std::move(source)) {}

  Expected<bool> next(Record& record, std::string& malformed) override {
    record.origin = {};
    KIPP_ASSIGN_OR_RETURN(bool more, source_->next(record, malformed));
    if (record.origin.file.empty()) record.origin.file = path_;
    return more;
  }

  uint64_t bytes_consumed() const override { return 0; }

 private:
  std::string path_;
  std::unique_ptr<ParquetRecordSource> source_;
};

Expected<std::unique_ptr<RecordSource>> open_source(const std::string& path, DatasetFormat format,
                                                    const DatasetOptions& options) {
  const bool parquet =
      format == DatasetFormat::Parquet || (format == DatasetFormat::Alpaca && lower_extension(path) == ".parquet");
  if (parquet) {
    KIPP_ASSIGN_OR_RETURN(std::unique_ptr<ParquetRecordSource> source,
                          ParquetRecordSource::open(path, format, options));
    return std::unique_ptr<RecordSource>(std::make_unique<ParquetAdapter>(path, std::move(source)));
  }
  switch (format) {
    case DatasetFormat::Text: return open_text_source(path, options.document_separator);
    case DatasetFormat::Csv: return open_csv_source(path, options);
    default: return open_json_source(path, format, options);
  }
}

struct InputFile {
  std::string path;
  DatasetFormat format;
  uint64_t size;
};

class MultiFileReader final : public RecordReader {
 public:
  MultiFileReader(std::vector<InputFile> files, DatasetOptions options, std::function<void(const std::string&)> report)
      : files_(std::move(files)), options_(std::move(options)), report_(std::move(report)) {
    for (const InputFile& file : files_) total_ += file.size;
  }

  Expected<bool> next(Record& record) override {
    while (true) {
      if (!source_) {
        if (next_file_ == files_.size()) return false;
        const InputFile& file = files_[next_file_];
        KIPP_ASSIGN_OR_RETURN(source_, open_source(file.path, file.format, options_));
        ++stats_.files;
        file_malformed_ = 0;
      }
      malformed_.clear();
      record.tools.clear();  // only JSON sources set them
      KIPP_ASSIGN_OR_RETURN(bool more, source_->next(record, malformed_));
      stats_.bytes = done_bytes_ + source_->bytes_consumed();
      if (!more) {
        finish_file();
        continue;
      }
      if (malformed_.empty()) {
        ++stats_.records;
        return true;
      }
      const std::string line = record.origin.to_string() + ": " + malformed_;
      if (options_.strict) return make_error(line);
      ++stats_.malformed;
      if (file_malformed_++ < kReportsPerFile && report_) report_(line);
    }
  }

  const ReadStats& stats() const override { return stats_; }
  uint64_t total_bytes() const override { return total_; }

 private:
  void finish_file() {
    const InputFile& file = files_[next_file_];
    if (file_malformed_ > kReportsPerFile && report_) {
      report_(file.path + ": ... " + std::to_string(file_malformed_ - kReportsPerFile) + " more malformed records");
    }
    done_bytes_ += file.size;
    stats_.bytes = done_bytes_;
    source_.reset();
    ++next_file_;
  }

  std::vector<InputFile> files_;
  DatasetOptions options_;
  std::function<void(const std::string&)> report_;
  ReadStats stats_;
  uint64_t total_ = 0;
  size_t next_file_ = 0;
  std::unique_ptr<RecordSource> source_;
  uint64_t done_bytes_ = 0;
  uint64_t file_malformed_ = 0;
  std::string malformed_;
};

}  // namespace

std::string_view dataset_format_name(DatasetFormat format) {
  for (const auto& [value, name] : kFormatNames) {
    if (value == format) return name;
  }
  return "unknown";
}

Expected<DatasetFormat> parse_dataset_format(std::string_view name) {
  std::string names;
  for (const auto& [value, known] : kFormatNames) {
    if (known == name) return value;
    names += (names.empty() ? "" : ", ") + std::string(known);
  }
  return make_error("unknown dataset format \"" + std::string(name) + "\" (expected one of: " + names + ")");
}

std::string RecordOrigin::to_string() const { return file + ":" + std::to_string(line); }

Expected<std::vector<std::string>> expand_inputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const std::string& input : inputs) {
    const size_t before = files.size();
    if (has_glob_characters(input)) {
      glob_t matches{};
      const int result = ::glob(input.c_str(), 0, nullptr, &matches);
      if (result != 0 && result != GLOB_NOMATCH) {
        globfree(&matches);
        return make_error(input + ": cannot expand the pattern");
      }
      Status status;
      for (size_t i = 0; i < matches.gl_pathc && status.ok(); ++i) status = add_path(matches.gl_pathv[i], files);
      globfree(&matches);
      KIPP_RETURN_IF_ERROR(status);
    } else {
      KIPP_RETURN_IF_ERROR(add_path(input, files));
    }
    if (files.size() == before) return make_error(input + ": matches no files");
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

Expected<std::unique_ptr<RecordReader>> RecordReader::open(std::vector<std::string> files,
                                                           const DatasetOptions& options,
                                                           std::function<void(const std::string&)> on_malformed) {
  std::vector<InputFile> inputs;
  inputs.reserve(files.size());
  for (std::string& path : files) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) return make_error(path + ": " + std::strerror(errno));
    if (!S_ISREG(info.st_mode)) return make_error(path + ": not a regular file");
    KIPP_ASSIGN_OR_RETURN(DatasetFormat format, resolve_format(path, options));
    inputs.push_back({std::move(path), format, static_cast<uint64_t>(info.st_size)});
  }
  return std::unique_ptr<RecordReader>(
      std::make_unique<MultiFileReader>(std::move(inputs), options, std::move(on_malformed)));
}

}  // namespace kipp::data
