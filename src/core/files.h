// Whole-file reads, atomic writes (temp file + fsync + rename) and SHA-256.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"

namespace kipp {

Expected<std::string> read_text_file(const std::string& path);
// `dir`/`name` with one separator.
std::string join_path(const std::string& dir, std::string_view name);
bool file_exists(const std::string& path);
Expected<uint64_t> file_size(const std::string& path);

// Writes `contents` to `path` so that readers see either the old file or the whole new one.
Status write_file_atomic(const std::string& path, std::span<const uint8_t> contents);
Status write_text_file_atomic(const std::string& path, const std::string& contents);

// A file being written under a temporary name; commit() fsyncs and renames it into place.
// Destroying an uncommitted AtomicFile removes the temporary file.
class AtomicFile {
 public:
  static Expected<AtomicFile> create(const std::string& path);
  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  AtomicFile(const AtomicFile&) = delete;
  ~AtomicFile();

  Status write(std::span<const uint8_t> bytes);
  Status write_zeros(uint64_t count);
  uint64_t bytes_written() const { return written_; }
  Status commit();

 private:
  AtomicFile(std::string path, std::string temp_path, std::FILE* stream);

  std::string path_;
  std::string temp_path_;
  std::FILE* stream_ = nullptr;
  uint64_t written_ = 0;
};

// Lower-case hex SHA-256.
std::string sha256_hex(std::span<const uint8_t> bytes);
Expected<std::string> sha256_file_hex(const std::string& path);

// Incremental SHA-256 for data that arrives in pieces.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(std::span<const uint8_t> bytes);
  std::string finish_hex();

 private:
  void* context_;
};

// An exclusive advisory lock (flock) on `path` (created if absent), held until destruction, so
// two processes never write one folder at once. Fails at once, naming `holder`, if taken.
class ExclusiveLock {
 public:
  static Expected<ExclusiveLock> acquire(const std::string& path, const std::string& holder);
  ExclusiveLock(ExclusiveLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  ExclusiveLock& operator=(ExclusiveLock&&) = delete;
  ExclusiveLock(const ExclusiveLock&) = delete;
  ~ExclusiveLock();

 private:
  explicit ExclusiveLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace kipp
