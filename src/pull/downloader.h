// Resumable, verified HTTP downloads (libcurl) of single files from a Hugging-Face-style file
// server. Bytes go to `<destination>.part`; a later attempt resumes from that file's size with
// a Range request. Only a file whose size and SHA-256 check out is renamed into place, so a
// file under its final name is always a verified one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace kipp {

// What a server says about a file: its size and, when it sends one, the SHA-256 of its
// content (the Hub sends it as the ETag or X-Linked-Etag of LFS files).
struct RemoteFileInfo {
  bool found = false;  // false: HTTP 404
  std::optional<uint64_t> size;
  std::optional<std::string> sha256;
};

struct HttpOptions {
  std::string bearer_token;  // sent as `Authorization: Bearer ...` when not empty
  long connect_timeout_s = 30;
  long stall_timeout_s = 60;   // a transfer that moves no byte for this long is retried
  int max_attempts = 3;        // per file, for dropped connections, timeouts, 429 and 5xx
  double retry_delay_s = 1.0;  // grows linearly with the attempt number
};

struct DownloadProgress {
  std::string_view name;
  uint64_t done = 0;              // bytes of the file on disk so far
  std::optional<uint64_t> total;  // unknown until the server says
  uint64_t resumed_from = 0;      // bytes already on disk when this transfer started
  bool finished = false;          // the file is complete and verified
};
using ProgressCallback = std::function<void(const DownloadProgress&)>;

struct DownloadRequest {
  std::string url;
  std::string destination;  // final path; the transfer writes destination + ".part"
  std::string name;         // for messages and progress
  // Pinned values (the registry's); each one known overrides what the server says.
  std::optional<uint64_t> expected_size;
  std::optional<std::string> expected_sha256;
  std::string expected_source = "registry";  // names where the pinned values come from
};

struct DownloadResult {
  bool found = true;  // false: the server answered 404 and nothing was written
  uint64_t size = 0;
  std::string sha256;
  std::string size_checked_against;    // "registry", "server" or empty (unchecked)
  std::string sha256_checked_against;  // "registry", "server ETag" or empty (unchecked)
  uint64_t bytes_transferred = 0;      // over the network, all attempts together
  int attempts = 0;
};

// One HTTP client (one libcurl handle, so connections are reused); not thread-safe.
class HttpDownloader {
 public:
  explicit HttpDownloader(HttpOptions options);
  ~HttpDownloader();
  HttpDownloader(const HttpDownloader&) = delete;
  HttpDownloader& operator=(const HttpDownloader&) = delete;

  // A HEAD request (redirects followed). 404 is a result, not an error.
  Expected<RemoteFileInfo> probe(const std::string& url);

  // Downloads, resumes, verifies and renames into place. A verification failure removes the
  // .part file; a dropped connection keeps it for the next attempt (or the next run).
  Expected<DownloadResult> download(const DownloadRequest& request, const ProgressCallback& progress = {});

 private:
  struct Attempt;
  Attempt attempt_once(const DownloadRequest& request, const std::string& part_path, const ProgressCallback& progress);
  Expected<RemoteFileInfo> probe_once(const std::string& url, bool& retryable);
  void prepare(const std::string& url);

  HttpOptions options_;
  void* curl_ = nullptr;
  void* headers_ = nullptr;  // curl_slist with the Authorization header
};

// The SHA-256 an ETag or X-Linked-Etag value carries, if it is one (64 hex digits, quoted or
// weak or not); the Hub's non-LFS files carry a git SHA-1 instead, which is no use here.
std::optional<std::string> sha256_from_etag(std::string_view etag);

// Compares what arrived with what was expected; the message names the file, both values and
// where the expected one comes from.
Status verify_file(const std::string& name, uint64_t found_size, const std::string& found_sha256,
                   std::optional<uint64_t> expected_size, const std::string& size_source,
                   const std::optional<std::string>& expected_sha256, const std::string& sha256_source);

// Percent-encodes everything but RFC 3986 unreserved characters (for one path segment).
std::string url_encode_segment(std::string_view text);

}  // namespace kipp
