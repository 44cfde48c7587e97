#include "core/files.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace kipp {

std::string join_path(const std::string& dir, std::string_view name) {
  return (std::filesystem::path(dir) / std::filesystem::path(name)).string();
}

Expected<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot open " + path + ": " + std::strerror(errno));
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return make_error("cannot read " + path);
  return contents.str();
}

bool file_exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

Expected<uint64_t> file_size(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return make_error("cannot stat " + path + ": " + std::strerror(errno));
  return static_cast<uint64_t>(info.st_size);
}

AtomicFile::AtomicFile(std::string path, std::string temp_path, std::FILE* stream)
    : path_(std::move(path)), temp_path_(std::move(temp_path)), stream_(stream) {}

Expected<AtomicFile> AtomicFile::create(const std::string& path) {
  std::string temp_path = path + ".tmp." + std::to_string(::getpid());
  std::FILE* stream = std::fopen(temp_path.c_str(), "wb");
  if (stream == nullptr) return make_error("cannot create " + temp_path + ": " + std::strerror(errno));
  return AtomicFile(path, std::move(temp_path), stream);
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : path_(std::move(other.path_)),
      temp_path_(std::move(other.temp_path_)),
      stream_(other.stream_),
      written_(other.written_) {
  other.stream_ = nullptr;
}

AtomicFile::~AtomicFile() {
  if (stream_ != nullptr) {
    std::fclose(stream_);
    std::remove(temp_path_.c_str());
  }
}

Status AtomicFile::write(std::span<const uint8_t> bytes) {
  if (stream_ == nullptr) return make_error("write to a closed file " + path_);
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), stream_) != bytes.size()) {
    return make_error("cannot write " + temp_path_ + ": " + std::strerror(errno));
  }
  written_ += bytes.size();
  return ok_status();
}

Status AtomicFile::write_zeros(uint64_t count) {
  static const uint8_t zeros[4096] = {};
  while (count > 0) {
    const uint64_t chunk = count < sizeof zeros ? count : sizeof zeros;
    KIPP_RETURN_IF_ERROR(write({zeros, static_cast<size_t>(chunk)}));
    count -= chunk;
  }
  return ok_status();
}

Status AtomicFile::commit() {
  if (stream_ == nullptr) return make_error("commit of a closed file " + path_);
  const bool flushed = std::fflush(stream_) == 0 && ::fsync(::fileno(stream_)) == 0;
  const int saved = errno;
  std::fclose(stream_);
  stream_ = nullptr;
  if (!flushed) {
    std::remove(temp_path_.c_str());
    return make_error("cannot flush " + temp_path_ + ": " + std::strerror(saved));
  }
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int rename_errno = errno;
    std::remove(temp_path_.c_str());
    return make_error("cannot rename " + temp_path_ + " to " + path_ + ": " + std::strerror(rename_errno));
  }
  return ok_status();
}

Status write_file_atomic(const std::string& path, std::span<const uint8_t> contents) {
  KIPP_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::create(path));
  KIPP_RETURN_IF_ERROR(file.write(contents));
  return file.commit();
}

Status write_text_file_atomic(const std::string& path, const std::string& contents) {
  return write_file_atomic(path, {reinterpret_cast<const uint8_t*>(contents.data()), contents.size()});
}

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(context_), EVP_sha256(), nullptr);
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(context_)); }

void Sha256::update(std::span<const uint8_t> bytes) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(context_), bytes.data(), bytes.size());
}

std::string Sha256::finish_hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(context_), digest, &length);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(hex[digest[i] >> 4]);
    out.push_back(hex[digest[i] & 15]);
  }
  return out;
}

std::string sha256_hex(std::span<const uint8_t> bytes) {
  Sha256 hasher;
  hasher.update(bytes);
  return hasher.finish_hex();
}

Expected<std::string> sha256_file_hex(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot open " + path + ": " + std::strerror(errno));
  Sha256 hasher;
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto got = in.gcount();
    if (got > 0) hasher.update({reinterpret_cast<const uint8_t*>(buffer.data()), static_cast<size_t>(got)});
  }
  if (in.bad()) return make_error("cannot read " + path);
  return hasher.finish_hex();
}

Expected<ExclusiveLock> ExclusiveLock::acquire(const std::string& path, const std::string& holder) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return make_error("cannot create " + path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return make_error("another " + holder + " (" + path + " is locked)");
  }
  return ExclusiveLock(fd);
}

ExclusiveLock::~ExclusiveLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

}  // namespace kipp
