#include "server/web_ui.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>

namespace kipp::server {
namespace {

// The page loads its own script and style sheet and talks to this server; nothing else.
constexpr const char* kContentSecurityPolicy =
    "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

const char* content_type_of(std::string_view path) {
  static constexpr std::pair<std::string_view, const char*> kTypes[] = {{".html", "text/html; charset=utf-8"},
                                                                        {".js", "text/javascript; charset=utf-8"},
                                                                        {".css", "text/css; charset=utf-8"},
                                                                        {".svg", "image/svg+xml"},
                                                                        {".png", "image/png"},
                                                                        {".json", "application/json"},
                                                                        {".woff2", "font/woff2"},
                                                                        {".ico", "image/x-icon"}};
  for (const auto& [suffix, type] : kTypes)
    if (path.size() >= suffix.size() && path.substr(path.size() - suffix.size()) == suffix) return type;
  return "application/octet-stream";
}

const WebAsset* find_asset(std::string_view path) {
  if (path == "/") path = "/index.html";
  const auto assets = embedded_web_assets();
  const auto found = std::find_if(assets.begin(), assets.end(), [&](const WebAsset& a) { return a.path == path; });
  return found == assets.end() ? nullptr : &*found;
}

// Whether an If-None-Match value ("*" or a list of entity tags, weak or strong) names `etag`.
bool etag_matches(std::string_view if_none_match, std::string_view etag) {
  while (!if_none_match.empty()) {
    const size_t comma = if_none_match.find(',');
    std::string_view tag = trim(if_none_match.substr(0, comma));
    if (tag == "*") return true;
    if (tag.substr(0, 2) == "W/") tag.remove_prefix(2);
    if (tag == etag) return true;
    if (comma == std::string_view::npos) break;
    if_none_match.remove_prefix(comma + 1);
  }
  return false;
}

bool inflate_gzip(std::string_view gzip, std::string& out) {
  z_stream stream{};
  if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK) return false;
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gzip.data()));
  stream.avail_in = static_cast<uInt>(gzip.size());
  char buffer[16384];
  int result = Z_OK;
  while (result == Z_OK) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof buffer;
    result = inflate(&stream, Z_NO_FLUSH);
    out.append(buffer, sizeof buffer - stream.avail_out);
  }
  inflateEnd(&stream);
  return result == Z_STREAM_END;
}

}  // namespace

bool is_web_ui_path(std::string_view path) { return find_asset(path) != nullptr; }

bool accepts_gzip(std::string_view accept_encoding) {
  while (!accept_encoding.empty()) {
    const size_t comma = accept_encoding.find(',');
    const std::string_view entry = trim(accept_encoding.substr(0, comma));
    const size_t semicolon = entry.find(';');
    const std::string_view coding = trim(entry.substr(0, semicolon));
    if (equal_ignoring_case(coding, "gzip") || coding == "*") {
      std::string_view params = semicolon == std::string_view::npos ? "" : entry.substr(semicolon + 1);
      params = trim(params);
      // q=0, q=0.0, q=0.00 ... refuse the coding; any other weight accepts it.
      const bool refused = params.size() >= 3 && (params[0] == 'q' || params[0] == 'Q') && params[1] == '=' &&
                           params.substr(2).find_first_not_of("0.") == std::string_view::npos;
      return !refused;
    }
    if (comma == std::string_view::npos) break;
    accept_encoding.remove_prefix(comma + 1);
  }
  return false;
}

std::optional<WebReply> web_ui_reply(std::string_view path, std::string_view accept_encoding,
                                     std::string_view if_none_match) {
  const WebAsset* asset = find_asset(path);
  if (asset == nullptr) return std::nullopt;
  WebReply reply;
  reply.content_type = content_type_of(asset->path);
  reply.headers = {{"ETag", std::string(asset->etag)},
                   {"Cache-Control", "no-cache"},  // revalidate: the names stay, the contents change
                   {"Vary", "Accept-Encoding"},
                   {"Content-Security-Policy", kContentSecurityPolicy},
                   {"X-Content-Type-Options", "nosniff"},
                   {"Referrer-Policy", "no-referrer"}};
  if (etag_matches(if_none_match, asset->etag)) {
    reply.status = 304;
    return reply;
  }
  if (accepts_gzip(accept_encoding)) {
    reply.body = asset->gzip;
    reply.headers.emplace_back("Content-Encoding", "gzip");
  } else if (!inflate_gzip(asset->gzip, reply.body)) {
    reply.status = 500;
    reply.body.clear();
  }
  return reply;
}

}  // namespace kipp::server
