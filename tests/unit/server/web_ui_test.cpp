// The embedded chat page (src/server/web_ui.h): the bytes are webui/dist's files, each path
// answers with its content type, gzip or inflated text, ETag revalidation, and the page's own
// references resolve to embedded files.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "core/files.h"
#include "server/web_ui.h"

namespace kipp::server {
namespace {

std::string header(const WebReply& reply, const std::string& name) {
  for (const auto& [key, value] : reply.headers)
    if (key == name) return value;
  return "";
}

TEST(WebUi, EmbeddedBytesAreTheCommittedFiles) {
  const auto assets = embedded_web_assets();
  ASSERT_GE(assets.size(), 3u);
  for (const WebAsset& asset : assets) {
    auto file = read_text_file(std::string(KIPP_SOURCE_DIR) + "/webui/dist" + std::string(asset.path) + ".gz");
    ASSERT_TRUE(file.ok()) << file.message();
    EXPECT_EQ(*file, asset.gzip) << asset.path;
    auto digest = sha256_file_hex(std::string(KIPP_SOURCE_DIR) + "/webui/dist" + std::string(asset.path) + ".gz");
    ASSERT_TRUE(digest.ok());
    EXPECT_EQ(asset.etag, "\"" + digest->substr(0, 32) + "\"") << asset.path;
  }
}

TEST(WebUi, RepliesWithTypeEncodingAndRevalidation) {
  ASSERT_TRUE(is_web_ui_path("/"));
  ASSERT_TRUE(is_web_ui_path("/index.html"));
  EXPECT_FALSE(is_web_ui_path("/v1/models"));
  EXPECT_FALSE(is_web_ui_path("/assets/missing.js"));
  EXPECT_FALSE(web_ui_reply("/nope", "gzip", "").has_value());

  auto page = web_ui_reply("/", "gzip, deflate, br", "");
  ASSERT_TRUE(page.has_value());
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->content_type, "text/html; charset=utf-8");
  EXPECT_EQ(header(*page, "Content-Encoding"), "gzip");
  EXPECT_NE(header(*page, "Content-Security-Policy").find("default-src 'self'"), std::string::npos);
  EXPECT_EQ(page->body.substr(0, 2), "\x1f\x8b");  // the gzip magic

  auto plain = web_ui_reply("/index.html", "identity", "");
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->status, 200);
  EXPECT_EQ(header(*plain, "Content-Encoding"), "");
  EXPECT_EQ(header(*plain, "ETag"), header(*page, "ETag"));
  EXPECT_EQ(plain->body.rfind("<!doctype html>", 0), 0u) << plain->body.substr(0, 40);

  // Every script and style sheet the page names is embedded, with the right type.
  const std::regex reference(R"re((src|href)="(/assets/[^"]+)")re");
  int references = 0;
  for (auto it = std::sregex_iterator(plain->body.begin(), plain->body.end(), reference); it != std::sregex_iterator();
       ++it, ++references) {
    const std::string path = (*it)[2];
    auto asset = web_ui_reply(path, "", "");
    ASSERT_TRUE(asset.has_value()) << path;
    EXPECT_EQ(asset->status, 200) << path;
    const bool script = path.size() > 3 && path.substr(path.size() - 3) == ".js";
    EXPECT_EQ(asset->content_type, script ? "text/javascript; charset=utf-8" : "text/css; charset=utf-8") << path;
    EXPECT_GT(asset->body.size(), web_ui_reply(path, "gzip", "")->body.size()) << path;
  }
  EXPECT_EQ(references, 2);

  const std::string etag = header(*page, "ETag");
  for (const std::string& condition : {etag, "W/" + etag, "\"other\", " + etag, std::string("*")})
    EXPECT_EQ(web_ui_reply("/", "gzip", condition)->status, 304) << condition;
  EXPECT_EQ(web_ui_reply("/", "gzip", "\"other\"")->status, 200);
}

TEST(WebUi, AcceptEncoding) {
  for (const char* yes : {"gzip", "GZIP", "deflate, gzip;q=0.5", "br, *", " gzip ; q=1", "gzip;q=0.001"})
    EXPECT_TRUE(accepts_gzip(yes)) << yes;
  for (const char* no : {"", "identity", "br", "gzip;q=0", "gzip; q=0.000", "x-gzip2", "*;q=0"})
    EXPECT_FALSE(accepts_gzip(no)) << no;
}

}  // namespace
}  // namespace kipp::server
