#include "pull/downloader.h"

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "core/files.h"

namespace kipp {
namespace {

CURL* as_curl(void* handle) { return static_cast<CURL*>(handle); }

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<uint64_t> parse_u64(std::string_view text) {
  text = trim(text);
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// "bytes FIRST-LAST/TOTAL" or "bytes */TOTAL" (the latter with 416).
struct ContentRange {
  std::optional<uint64_t> first;
  std::optional<uint64_t> total;
};

std::optional<ContentRange> parse_content_range(std::string_view value) {
  value = trim(value);
  if (!value.starts_with("bytes ")) return std::nullopt;
  value.remove_prefix(6);
  const size_t slash = value.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  ContentRange range;
  range.total = parse_u64(value.substr(slash + 1));
  const std::string_view span = value.substr(0, slash);
  const size_t dash = span.find('-');
  if (dash != std::string_view::npos) range.first = parse_u64(span.substr(0, dash));
  return range;
}

// The headers of the response in hand. With redirects followed, curl reports every response
// of the chain; X-Linked-* survive a new response because the Hub sends them on the redirect
// to the CDN only, and the CDN's own ETag is not the content hash.
struct ResponseHeaders {
  long status = 0;
  std::optional<uint64_t> content_length;
  std::optional<ContentRange> content_range;
  std::optional<std::string> etag;
  std::optional<std::string> linked_etag;
  std::optional<uint64_t> linked_size;

  void begin_response(long code) {
    status = code;
    content_length.reset();
    content_range.reset();
    etag.reset();
  }

  std::optional<std::string> sha256() const {
    if (linked_etag) {
      if (auto sha = sha256_from_etag(*linked_etag)) return sha;
    }
    return etag ? sha256_from_etag(*etag) : std::nullopt;
  }

  void add_line(std::string_view line) {
    line = trim(line);
    if (line.starts_with("HTTP/")) {
      const size_t space = line.find(' ');
      long code = 0;
      if (space != std::string_view::npos) {
        const std::string_view digits = line.substr(space + 1, 3);
        std::from_chars(digits.data(), digits.data() + digits.size(), code);
      }
      begin_response(code);
      return;
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return;
    const std::string key = lower(trim(line.substr(0, colon)));
    const std::string_view value = trim(line.substr(colon + 1));
    if (key == "content-length") {
      content_length = parse_u64(value);
    } else if (key == "content-range") {
      content_range = parse_content_range(value);
    } else if (key == "etag") {
      etag = std::string(value);
    } else if (key == "x-linked-etag") {
      linked_etag = std::string(value);
    } else if (key == "x-linked-size") {
      linked_size = parse_u64(value);
    }
  }
};

size_t on_header(char* data, size_t size, size_t count, void* user) {
  static_cast<ResponseHeaders*>(user)->add_line(std::string_view(data, size * count));
  return size * count;
}

size_t discard_body(char*, size_t size, size_t count, void*) { return size * count; }

// Transport failures worth another attempt: the connection, not the request, went wrong.
bool is_transient(CURLcode code) {
  switch (code) {
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_RANGE_ERROR: return true;
    default: return false;
  }
}

bool is_transient_status(long status) { return status == 408 || status == 429 || status >= 500; }

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

Expected<std::unique_ptr<Sha256>> hash_prefix(const std::string& path, uint64_t bytes) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return make_error("cannot open " + path + ": " + std::strerror(errno));
  auto hasher = std::make_unique<Sha256>();
  std::vector<uint8_t> buffer(1 << 20);
  uint64_t left = bytes;
  while (left > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(left, buffer.size()));
    const size_t got = std::fread(buffer.data(), 1, want, file);
    if (got == 0) break;
    hasher->update({buffer.data(), got});
    left -= got;
  }
  std::fclose(file);
  if (left != 0) return make_error("cannot read " + path + " (it shrank while being resumed)");
  return hasher;
}

std::string http_status_message(long status, const std::string& url, const std::string& body, bool sent_token) {
  std::string message = "HTTP " + std::to_string(status) + " for " + url;
  if (status == 401 || status == 403) {
    message += sent_token ? " (HF_TOKEN was sent and refused: check its access to this repository)"
                          : " (gated or private repository? set HF_TOKEN to a Hugging Face access token)";
  }
  const std::string snippet(trim(body.substr(0, 200)));
  if (!snippet.empty()) message += ": " + snippet;
  return message;
}

}  // namespace

std::optional<std::string> sha256_from_etag(std::string_view etag) {
  etag = trim(etag);
  if (etag.starts_with("W/")) etag.remove_prefix(2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  if (etag.size() != 64) return std::nullopt;
  for (char c : etag) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  return lower(etag);
}

Status verify_file(const std::string& name, uint64_t found_size, const std::string& found_sha256,
                   std::optional<uint64_t> expected_size, const std::string& size_source,
                   const std::optional<std::string>& expected_sha256, const std::string& sha256_source) {
  if (expected_size && *expected_size != found_size) {
    return make_error(name + ": size mismatch: expected " + std::to_string(*expected_size) + " bytes (" + size_source +
                      "), found " + std::to_string(found_size));
  }
  if (expected_sha256 && lower(*expected_sha256) != lower(found_sha256)) {
    return make_error(name + ": SHA-256 mismatch: expected " + *expected_sha256 + " (" + sha256_source + "), found " +
                      found_sha256);
  }
  return ok_status();
}

std::string url_encode_segment(std::string_view text) {
  static const char* const kHex = "0123456789ABCDEF";
  std::string out;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    }
  }
  return out;
}

// ---- one GET -------------------------------------------------------------------------------

struct HttpDownloader::Attempt {
  enum class Kind { Complete, Retry, Fatal, NotFound };
  Kind kind = Kind::Fatal;
  std::string message;
  bool remove_part = false;
  uint64_t size = 0;
  std::string sha256;
  std::optional<uint64_t> server_size;
  std::optional<std::string> server_sha256;
  uint64_t transferred = 0;
};

namespace {

// The state of one GET, shared with the libcurl callbacks.
struct Transfer {
  enum class Abort { None, Fatal, Restart };

  const DownloadRequest* request = nullptr;
  std::string part_path;
  const ProgressCallback* progress = nullptr;
  ResponseHeaders headers;
  uint64_t offset = 0;  // bytes on disk when the request was sent
  std::unique_ptr<Sha256> prefix_hasher;

  bool body_started = false;
  bool to_file = false;
  std::FILE* file = nullptr;
  std::unique_ptr<Sha256> hasher;
  uint64_t on_disk = 0;
  uint64_t received = 0;
  std::optional<uint64_t> total;
  std::string error_body;
  Abort abort = Abort::None;
  std::string abort_message;

  bool fail(Abort kind, std::string message) {
    abort = kind;
    abort_message = std::move(message);
    return false;
  }

  void report() const {
    if (progress && *progress) {
      (*progress)(DownloadProgress{request->name, on_disk, total, offset, false});
    }
  }

  // Called once the final response's status is known: decides where the body goes and
  // rejects a file the pinned values already rule out, before its bytes are fetched.
  bool begin_body() {
    body_started = true;
    const long status = headers.status;
    if (status == 206) {
      if (!headers.content_range || headers.content_range->first != offset) {
        return fail(Abort::Restart, "the server answered Range bytes=" + std::to_string(offset) +
                                        "- with another range; starting over");
      }
      file = std::fopen(part_path.c_str(), "ab");
      hasher = std::move(prefix_hasher);
      on_disk = offset;
      total = headers.content_range->total;
    } else if (status == 200) {
      // Also the answer of a server that ignores Range: the body is the whole file again.
      file = std::fopen(part_path.c_str(), "wb");
      hasher = std::make_unique<Sha256>();
      on_disk = 0;
      offset = 0;
      total = headers.content_length;
    } else {
      return true;  // an error page: kept in memory for the message
    }
    to_file = true;
    if (file == nullptr) return fail(Abort::Fatal, "cannot open " + part_path + ": " + std::strerror(errno));
    const DownloadRequest& pinned = *request;
    if (pinned.expected_size && total && *total != *pinned.expected_size) {
      return fail(Abort::Fatal, "size mismatch: expected " + std::to_string(*pinned.expected_size) + " bytes (" +
                                    pinned.expected_source + "), the server offers " + std::to_string(*total));
    }
    const auto server_sha = headers.sha256();
    if (pinned.expected_sha256 && server_sha && *server_sha != lower(*pinned.expected_sha256)) {
      return fail(Abort::Fatal, "SHA-256 mismatch: expected " + *pinned.expected_sha256 + " (" +
                                    pinned.expected_source + "), the server's ETag says " + *server_sha);
    }
    report();
    return true;
  }

  bool write(const char* data, size_t size) {
    if (!body_started && !begin_body()) return false;
    if (!to_file) {
      if (error_body.size() < 4096) error_body.append(data, std::min<size_t>(size, 4096 - error_body.size()));
      return true;
    }
    if (std::fwrite(data, 1, size, file) != size) {
      return fail(Abort::Fatal, "cannot write " + part_path + ": " + std::strerror(errno));
    }
    hasher->update({reinterpret_cast<const uint8_t*>(data), size});
    on_disk += size;
    received += size;
    const auto limit = request->expected_size ? request->expected_size : total;
    if (limit && on_disk > *limit) {
      return fail(Abort::Fatal, "the server sent more than the " + std::to_string(*limit) + " bytes expected");
    }
    report();
    return true;
  }

  Status close() {
    if (file == nullptr) return ok_status();
    bool ok = std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0;
    ok = std::fclose(file) == 0 && ok;
    file = nullptr;
    if (!ok) return make_error("cannot write " + part_path + ": " + std::strerror(errno));
    return ok_status();
  }
};

size_t on_body(char* data, size_t size, size_t count, void* user) {
  return static_cast<Transfer*>(user)->write(data, size * count) ? size * count : 0;
}

}  // namespace

HttpDownloader::HttpDownloader(HttpOptions options) : options_(std::move(options)) {
  global_init();
  curl_ = curl_easy_init();
  if (!options_.bearer_token.empty()) {
    const std::string header = "Authorization: Bearer " + options_.bearer_token;
    headers_ = curl_slist_append(nullptr, header.c_str());
  }
}

HttpDownloader::~HttpDownloader() {
  if (headers_ != nullptr) curl_slist_free_all(static_cast<curl_slist*>(headers_));
  if (curl_ != nullptr) curl_easy_cleanup(as_curl(curl_));
}

void HttpDownloader::prepare(const std::string& url) {
  CURL* curl = as_curl(curl_);
  curl_easy_reset(curl);  // keeps the connection cache
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, options_.connect_timeout_s);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, options_.stall_timeout_s);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "kipp/0.1");
  curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, 512L * 1024L);
  // libcurl drops a custom Authorization header when a redirect leaves the host, so the
  // token never reaches the CDN that serves LFS files.
  if (headers_ != nullptr) curl_easy_setopt(curl, CURLOPT_HTTPHEADER, static_cast<curl_slist*>(headers_));
}

Expected<RemoteFileInfo> HttpDownloader::probe_once(const std::string& url, bool& retryable) {
  retryable = false;
  prepare(url);
  CURL* curl = as_curl(curl_);
  ResponseHeaders headers;
  curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard_body);
  const CURLcode code = curl_easy_perform(curl);
  if (code != CURLE_OK) {
    retryable = is_transient(code);
    return make_error("HEAD " + url + " failed: " + curl_easy_strerror(code));
  }
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  RemoteFileInfo info;
  if (status == 404) return info;
  if (status != 200) {
    retryable = is_transient_status(status);
    return make_error(http_status_message(status, url, "", headers_ != nullptr));
  }
  info.found = true;
  info.size = headers.content_length ? headers.content_length : headers.linked_size;
  info.sha256 = headers.sha256();
  return info;
}

Expected<RemoteFileInfo> HttpDownloader::probe(const std::string& url) {
  std::string last_error;
  for (int attempt = 1; attempt <= std::max(1, options_.max_attempts); ++attempt) {
    if (attempt > 1) std::this_thread::sleep_for(std::chrono::duration<double>(options_.retry_delay_s * (attempt - 1)));
    bool retryable = false;
    auto result = probe_once(url, retryable);
    if (result.ok() || !retryable) return result;
    last_error = result.message();
  }
  return make_error(last_error + " (gave up after " + std::to_string(options_.max_attempts) + " attempts)");
}

HttpDownloader::Attempt HttpDownloader::attempt_once(const DownloadRequest& request, const std::string& part_path,
                                                     const ProgressCallback& progress) {
  using Kind = Attempt::Kind;
  Attempt outcome;
  const auto stop = [&outcome](Kind kind, std::string message, bool remove_part = false) {
    outcome.kind = kind;
    outcome.message = std::move(message);
    outcome.remove_part = remove_part;
    return outcome;
  };
  Transfer transfer;
  transfer.request = &request;
  transfer.part_path = part_path;
  transfer.progress = &progress;
  if (file_exists(part_path)) {
    auto size = file_size(part_path);
    if (!size.ok()) return stop(Kind::Fatal, size.message());
    transfer.offset = *size;
    // A .part longer than the pinned size cannot become the pinned file.
    if (request.expected_size && transfer.offset > *request.expected_size) {
      std::remove(part_path.c_str());
      transfer.offset = 0;
    }
  }
  if (transfer.offset > 0) {
    auto hasher = hash_prefix(part_path, transfer.offset);
    if (!hasher.ok()) return stop(Kind::Fatal, hasher.message());
    transfer.prefix_hasher = std::move(hasher).value();
    // A .part of exactly the pinned size (e.g. a run stopped just before the rename) needs no
    // request: the pinned SHA-256 decides.
    if (request.expected_size && request.expected_sha256 && transfer.offset == *request.expected_size) {
      outcome.kind = Kind::Complete;
      outcome.size = transfer.offset;
      outcome.sha256 = transfer.prefix_hasher->finish_hex();
      return outcome;
    }
  }

  prepare(request.url);
  CURL* curl = as_curl(curl_);
  const std::string range = std::to_string(transfer.offset) + "-";
  if (transfer.offset > 0) curl_easy_setopt(curl, CURLOPT_RANGE, range.c_str());
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer.headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  const CURLcode code = curl_easy_perform(curl);
  if (code == CURLE_OK && !transfer.body_started) transfer.begin_body();  // an empty body
  const Status closed = transfer.close();
  outcome.transferred = transfer.received;

  if (transfer.abort == Transfer::Abort::Fatal) {
    return stop(Kind::Fatal, transfer.abort_message, /*remove_part=*/true);
  }
  if (transfer.abort == Transfer::Abort::Restart) {
    std::remove(part_path.c_str());
    return stop(Kind::Retry, transfer.abort_message);
  }
  if (!closed.ok()) return stop(Kind::Fatal, closed.message());
  const std::string got = std::to_string(transfer.on_disk) + " of " +
                          (transfer.total ? std::to_string(*transfer.total) : std::string("?")) + " bytes";
  if (code != CURLE_OK) {
    std::string message = std::string(curl_easy_strerror(code)) + " (" + request.url + ")";
    if (code == CURLE_PARTIAL_FILE) {
      message = "connection closed after " + got;
    } else if (transfer.body_started) {
      message += " after " + got;
    }
    return stop(is_transient(code) ? Kind::Retry : Kind::Fatal, message);
  }
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  if (status == 404) return stop(Kind::NotFound, "HTTP 404 for " + request.url);
  if (status == 416) {
    // The .part is at least as long as the file: it cannot be trusted to be this file.
    std::remove(part_path.c_str());
    return stop(Kind::Retry,
                "the server refused to resume at byte " + std::to_string(transfer.offset) + "; starting over");
  }
  if (status != 200 && status != 206) {
    const std::string message = http_status_message(status, request.url, transfer.error_body, headers_ != nullptr);
    return stop(is_transient_status(status) ? Kind::Retry : Kind::Fatal, message);
  }
  if (transfer.total && transfer.on_disk < *transfer.total) return stop(Kind::Retry, "transfer truncated at " + got);
  outcome.kind = Kind::Complete;
  outcome.size = transfer.on_disk;
  outcome.sha256 = transfer.hasher->finish_hex();
  outcome.server_size = transfer.total;
  outcome.server_sha256 = transfer.headers.sha256();
  return outcome;
}

Expected<DownloadResult> HttpDownloader::download(const DownloadRequest& request, const ProgressCallback& progress) {
  using Kind = Attempt::Kind;
  const std::string part_path = request.destination + ".part";
  DownloadResult result;
  std::string last_error;
  const int attempts = std::max(1, options_.max_attempts);
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    if (attempt > 1) std::this_thread::sleep_for(std::chrono::duration<double>(options_.retry_delay_s * (attempt - 1)));
    Attempt outcome = attempt_once(request, part_path, progress);
    result.bytes_transferred += outcome.transferred;
    result.attempts = attempt;
    switch (outcome.kind) {
      case Kind::NotFound: result.found = false; return result;
      case Kind::Retry: last_error = outcome.message; continue;
      case Kind::Fatal:
        if (outcome.remove_part) {
          std::remove(part_path.c_str());
          outcome.message += "; removed " + part_path;
        }
        return make_error(request.name + ": " + outcome.message);
      case Kind::Complete: break;
    }
    result.size = outcome.size;
    result.sha256 = outcome.sha256;
    std::optional<uint64_t> expected_size = request.expected_size;
    std::optional<std::string> expected_sha = request.expected_sha256;
    result.size_checked_against = request.expected_source;
    result.sha256_checked_against = request.expected_source;
    if (!expected_size && outcome.server_size) {
      expected_size = outcome.server_size;
      result.size_checked_against = "server";
    }
    if (!expected_sha && outcome.server_sha256) {
      expected_sha = outcome.server_sha256;
      result.sha256_checked_against = "server ETag";
    }
    if (!expected_size) result.size_checked_against.clear();
    if (!expected_sha) result.sha256_checked_against.clear();
    const Status verified = verify_file(request.name, result.size, result.sha256, expected_size,
                                        result.size_checked_against, expected_sha, result.sha256_checked_against);
    if (!verified.ok()) {
      std::remove(part_path.c_str());
      return make_error(verified.message() + "; removed " + part_path);
    }
    if (std::rename(part_path.c_str(), request.destination.c_str()) != 0) {
      return make_error("cannot rename " + part_path + " to " + request.destination + ": " + std::strerror(errno));
    }
    if (progress) progress(DownloadProgress{request.name, result.size, result.size, 0, true});
    return result;
  }
  std::string message = request.name + ": download did not complete after " + std::to_string(attempts) +
                        " attempts (last: " + last_error + ")";
  if (file_exists(part_path)) message += "; " + part_path + " is kept and the next pull resumes it";
  return make_error(message);
}

}  // namespace kipp
