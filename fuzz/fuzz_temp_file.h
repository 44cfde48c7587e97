// A per-process scratch file for fuzz targets whose readers take a path (the Parquet reader
// memory-maps its file; the dataset readers stream one): the input is written there each run.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace kipp::fuzz {

// Writes `data` to a file named by `suffix` (the extension the reader dispatches on) in
// $TMPDIR (or /tmp), one per process so parallel fuzzers (-jobs / -workers) do not collide.
// Aborts when the file cannot be written: the run would test nothing.
// The file is removed when the suffix changes and at a normal exit (a crash leaves it behind).
inline const std::string& write_temp_file(const uint8_t* data, size_t size, const std::string& suffix) {
  static std::string path;
  static const bool registered = std::atexit([] {
                                   if (!path.empty()) ::unlink(path.c_str());
                                 }) == 0;
  (void)registered;
  const char* dir = std::getenv("TMPDIR");
  std::string wanted =
      std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/kipp_fuzz_" + std::to_string(::getpid()) + suffix;
  if (wanted != path) {
    if (!path.empty()) ::unlink(path.c_str());
    path = std::move(wanted);
  }
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr || (size > 0 && std::fwrite(data, 1, size, file) != size) || std::fclose(file) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
  return path;
}

}  // namespace kipp::fuzz
