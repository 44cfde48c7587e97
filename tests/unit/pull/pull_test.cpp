// `kipp pull` against tools/hub_test_server.py (a local stand-in for the Hub with Range
// support, SHA-256 ETags and fault injection), on a miniature checkpoint built by the test:
// clean pulls (single file and sharded behind LFS-style redirects), resume after dropped
// connections and from a .part left behind, servers that ignore Range, corrupted bytes,
// idempotent re-pulls, registry pins that synthetic weights must fail, and bad input.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/files.h"
#include "model/model.h"
#include "model/registry.h"
#include "pull/progress.h"
#include "pull/pull.h"
#include "unit/helpers/mini_checkpoint.h"

#ifndef KIPP_SOURCE_DIR
#error "KIPP_SOURCE_DIR must be defined (tests/CMakeLists.txt) to find tools/hub_test_server.py"
#endif

extern char** environ;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kRepo = "acme/tiny-qwen3";
constexpr const char* kRevision = "0123456789abcdef0123456789abcdef01234567";

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<std::string> files_ending_in(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> found;
  if (!fs::is_directory(dir)) return found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(suffix)) found.push_back(name);
  }
  return found;
}

// tools/hub_test_server.py as a child process; its first stdout line is the bound port.
class HubServer {
 public:
  HubServer(const std::string& root, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {
        "/usr/bin/python3", std::string(KIPP_SOURCE_DIR) + "/tools/hub_test_server.py", "--root", root, "--port", "0",
        "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
    posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
    posix_spawn_file_actions_addclose(&actions, pipe_fds[1]);
    const int spawned = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(pipe_fds[1]);
    stdout_fd_ = pipe_fds[0];
    if (spawned != 0) {
      pid_ = -1;
      return;
    }
    std::string line;
    pollfd poll_fd{stdout_fd_, POLLIN, 0};
    while (line.find('\n') == std::string::npos && ::poll(&poll_fd, 1, 20000) == 1) {
      char buffer[64];
      const ssize_t got = ::read(stdout_fd_, buffer, sizeof buffer);
      if (got <= 0) break;
      line.append(buffer, static_cast<size_t>(got));
    }
    port_ = std::atoi(line.c_str());
  }

  ~HubServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    if (stdout_fd_ >= 0) ::close(stdout_fd_);
  }

  HubServer(const HubServer&) = delete;
  HubServer& operator=(const HubServer&) = delete;

  bool running() const { return pid_ > 0 && port_ > 0; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int port_ = 0;
};

class PullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = (fs::temp_directory_path() / ("kipp_pull_" + std::to_string(::getpid()) + "_" + info->name())).string();
    fs::remove_all(root_);
    fs::create_directories(hub_root());
  }

  void TearDown() override {
    server_.reset();
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }

  std::string hub_root() const { return root_ + "/hub"; }
  std::string dest() const { return root_ + "/dest"; }
  std::string published(const std::string& name, const std::string& repo = kRepo,
                        const std::string& revision = kRevision) const {
    return hub_root() + "/" + repo + "/" + revision + "/" + name;
  }

  // Puts a mini checkpoint on the test hub under repo@revision.
  void publish(const kipp::testing::MiniCheckpointOptions& options = {}, const std::string& repo = kRepo,
               const std::string& revision = kRevision) {
    const std::string dir = hub_root() + "/" + repo + "/" + revision;
    fs::create_directories(dir);
    const auto written = kipp::testing::write_mini_checkpoint(dir, options);
    ASSERT_TRUE(written.ok()) << written.message();
  }

  void start_server(const std::vector<std::string>& extra = {}) {
    server_ = std::make_unique<HubServer>(hub_root(), extra);
    ASSERT_TRUE(server_->running()) << "tools/hub_test_server.py did not start";
  }

  kipp::PullOptions options(const std::string& repo = kRepo, const std::string& revision = kRevision) {
    kipp::PullOptions pull;
    pull.repository = repo;
    pull.revision = revision;
    pull.dir = dest();
    pull.base_url = server_ ? server_->base_url() : "http://127.0.0.1:9";
    pull.retry_delay_s = 0;
    pull.stall_timeout_s = 10;
    pull.log = [this](const std::string& line) { log_ += line + "\n"; };
    pull.progress = [this](const kipp::DownloadProgress& progress) {
      ++progress_events_;
      if (progress.resumed_from > 0) resumed_ = true;
    };
    return pull;
  }

  void expect_identical(const std::string& name, const std::string& repo = kRepo,
                        const std::string& revision = kRevision) {
    const auto expected = read_bytes(published(name, repo, revision));
    ASSERT_FALSE(expected.empty()) << name;
    EXPECT_TRUE(expected == read_bytes(dest() + "/" + name)) << name << " differs from the served file";
  }

  const kipp::PulledFile* find_file(const kipp::PullReport& report, const std::string& name) {
    for (const auto& file : report.files) {
      if (file.name == name) return &file;
    }
    return nullptr;
  }

  std::string root_;
  std::unique_ptr<HubServer> server_;
  std::string log_;
  int progress_events_ = 0;
  bool resumed_ = false;
};

const std::vector<std::string> kSingleFileNames = {"config.json", "generation_config.json", "tokenizer.json",
                                                   "tokenizer_config.json", "model.safetensors"};

TEST_F(PullTest, CleanPullVerifiesWritesManifestAndConvertsWithLocalProvenance) {
  publish();
  start_server();
  auto result = kipp::pull_checkpoint(options());
  ASSERT_TRUE(result.ok()) << result.message() << "\n" << log_;
  const kipp::PullReport& report = result.value();

  EXPECT_FALSE(report.registry);
  ASSERT_EQ(report.files.size(), kSingleFileNames.size());
  for (const auto& name : kSingleFileNames) {
    const kipp::PulledFile* file = find_file(report, name);
    ASSERT_NE(file, nullptr) << name;
    EXPECT_TRUE(file->downloaded) << name;
    EXPECT_EQ(file->sha256_checked_against, "server ETag") << name;
    EXPECT_EQ(file->sha256, kipp::sha256_file_hex(published(name)).value()) << name;
    expect_identical(name);
  }
  EXPECT_TRUE(files_ending_in(dest(), ".part").empty());
  EXPECT_GT(progress_events_, 0);

  // The manifest records exactly what was verified.
  const json manifest = json::parse(kipp::read_text_file(dest() + "/kipp-pull.json").value());
  EXPECT_EQ(manifest["registry"], false);
  EXPECT_EQ(manifest["repository"], kRepo);
  EXPECT_EQ(manifest["revision"], kRevision);
  EXPECT_EQ(manifest["base_url"], server_->base_url());
  ASSERT_EQ(manifest["files"].size(), kSingleFileNames.size());
  for (const json& file : manifest["files"]) {
    const std::string name = file["name"];
    EXPECT_EQ(file["size"].get<uint64_t>(), kipp::file_size(published(name)).value()) << name;
    EXPECT_EQ(file["sha256"], kipp::sha256_file_hex(published(name)).value()) << name;
  }
  const std::string completed = manifest["completed_at"];
  EXPECT_EQ(completed.size(), 20u) << completed;  // 2026-01-02T03:04:05Z
  EXPECT_EQ(completed.back(), 'Z');

  // Converted next to the files, with local provenance: not a registry checkpoint.
  EXPECT_EQ(report.output_path, dest() + "/tiny-qwen3.gguf");
  ASSERT_TRUE(report.converted.has_value());
  auto model = kipp::Model::open(report.output_path);
  ASSERT_TRUE(model.ok()) << model.message();
  EXPECT_EQ(model->provenance().kind, kipp::ProvenanceKind::Local);
  EXPECT_EQ(model->registry_entry(), nullptr);
  EXPECT_EQ(model->config().hidden_size, kipp::testing::mini_config().hidden_size);
  EXPECT_EQ(model->config().vocab_size, kipp::testing::mini_config().vocab_size);
}

TEST_F(PullTest, ShardedCheckpointBehindLfsRedirectsIsDiscoveredFromTheIndex) {
  kipp::testing::MiniCheckpointOptions mini;
  mini.shards = 3;
  publish(mini);
  start_server({"--lfs-redirect"});
  auto pull = options();
  pull.scheme = kipp::QuantScheme::Q8_0;
  auto result = kipp::pull_checkpoint(pull);
  ASSERT_TRUE(result.ok()) << result.message() << "\n" << log_;
  for (const char* shard :
       {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"}) {
    const kipp::PulledFile* file = find_file(*result, shard);
    ASSERT_NE(file, nullptr) << shard;
    // From X-Linked-Etag on the redirect; the CDN's own ETag is an MD5 and must not count.
    EXPECT_EQ(file->sha256_checked_against, "server ETag") << shard;
    expect_identical(shard);
  }
  expect_identical("model.safetensors.index.json");
  EXPECT_FALSE(fs::exists(dest() + "/model.safetensors"));
  EXPECT_EQ(result->output_path, dest() + "/tiny-qwen3-q8_0.gguf");
  auto model = kipp::Model::open(result->output_path);
  ASSERT_TRUE(model.ok()) << model.message();
  EXPECT_EQ(model->provenance().scheme, kipp::QuantScheme::Q8_0);
}

TEST_F(PullTest, ResumesAfterTruncatedTransfersAndIsByteIdentical) {
  publish();
  start_server({"--fail-mode", "truncate-once"});
  auto result = kipp::pull_checkpoint(options());
  ASSERT_TRUE(result.ok()) << result.message() << "\n" << log_;
  for (const auto& name : kSingleFileNames) expect_identical(name);
  EXPECT_TRUE(resumed_) << "no transfer resumed from a .part";
  EXPECT_TRUE(contains(log_, "model.safetensors: ")) << log_;
  EXPECT_TRUE(contains(log_, "2 attempts")) << log_;
  EXPECT_TRUE(result->converted.has_value());
}

TEST_F(PullTest, ResumesFromAPartFileLeftByAnEarlierRun) {
  publish();
  start_server();
  fs::create_directories(dest());
  const auto full = read_bytes(published("model.safetensors"));
  write_bytes(dest() + "/model.safetensors.part", {full.begin(), full.begin() + static_cast<long>(full.size() / 3)});
  auto pull = options();
  pull.convert = false;
  auto result = kipp::pull_checkpoint(pull);
  ASSERT_TRUE(result.ok()) << result.message();
  expect_identical("model.safetensors");
  EXPECT_TRUE(resumed_);
  uint64_t side_files = 0;
  for (const auto& file : result->files) side_files += file.name == "model.safetensors" ? 0 : file.size;
  EXPECT_EQ(result->bytes_transferred, side_files + full.size() - full.size() / 3);
  EXPECT_FALSE(fs::exists(dest() + "/tiny-qwen3.gguf"));  // --no-convert
}

TEST_F(PullTest, NeverCompletingTransferFailsClearlyAndKeepsThePartFile) {
  publish();
  start_server({"--fail-mode", "truncate-always", "--fault-files", "*.safetensors"});
  auto result = kipp::pull_checkpoint(options());
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(contains(result.message(), "model.safetensors")) << result.message();
  EXPECT_TRUE(contains(result.message(), "after 3 attempts")) << result.message();
  EXPECT_TRUE(fs::exists(dest() + "/model.safetensors.part"));
  EXPECT_FALSE(fs::exists(dest() + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(dest() + "/kipp-pull.json"));
  EXPECT_TRUE(files_ending_in(dest(), ".gguf").empty());
}

TEST_F(PullTest, CorruptedBytesAreDetectedThePartRemovedAndNothingConverted) {
  publish();
  start_server({"--fail-mode", "corrupt", "--fault-files", "*.safetensors"});
  auto result = kipp::pull_checkpoint(options());
  ASSERT_FALSE(result.ok());
  const std::string& message = result.message();
  const std::string real_sha = kipp::sha256_file_hex(published("model.safetensors")).value();
  EXPECT_TRUE(contains(message, "model.safetensors: SHA-256 mismatch")) << message;
  EXPECT_TRUE(contains(message, "expected " + real_sha)) << message;
  EXPECT_TRUE(contains(message, "found ")) << message;
  EXPECT_FALSE(fs::exists(dest() + "/model.safetensors.part"));
  EXPECT_FALSE(fs::exists(dest() + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(dest() + "/kipp-pull.json"));
  EXPECT_TRUE(files_ending_in(dest(), ".gguf").empty());
}

TEST_F(PullTest, ServerIgnoringRangeStillCompletes) {
  publish();
  start_server({"--fail-mode", "no-range"});
  fs::create_directories(dest());
  // A stale half file: the server answers the Range request with 200 and the whole body.
  const auto full = read_bytes(published("model.safetensors"));
  write_bytes(dest() + "/model.safetensors.part", {full.begin(), full.begin() + static_cast<long>(full.size() / 2)});
  auto result = kipp::pull_checkpoint(options());
  ASSERT_TRUE(result.ok()) << result.message() << "\n" << log_;
  for (const auto& name : kSingleFileNames) expect_identical(name);
  EXPECT_TRUE(result->converted.has_value());
}

TEST_F(PullTest, RepullSkipsVerifiedFilesAndRefetchesAChangedOne) {
  publish();
  start_server();
  auto first = kipp::pull_checkpoint(options());
  ASSERT_TRUE(first.ok()) << first.message();

  auto second = kipp::pull_checkpoint(options());
  ASSERT_TRUE(second.ok()) << second.message();
  EXPECT_EQ(second->bytes_transferred, 0u);
  for (const auto& file : second->files) {
    EXPECT_FALSE(file.downloaded) << file.name;
    EXPECT_EQ(file.sha256_checked_against, "kipp-pull.json") << file.name;
  }
  EXPECT_TRUE(fs::exists(second->output_path));

  // Without the manifest the server's ETags vouch for the files; a damaged one is fetched again.
  fs::remove(dest() + "/kipp-pull.json");
  auto tokenizer = read_bytes(dest() + "/tokenizer.json");
  tokenizer[10] ^= 1;
  write_bytes(dest() + "/tokenizer.json", tokenizer);
  auto third = kipp::pull_checkpoint(options());
  ASSERT_TRUE(third.ok()) << third.message();
  for (const auto& file : third->files) {
    EXPECT_EQ(file.downloaded, file.name == "tokenizer.json") << file.name;
  }
  EXPECT_EQ(third->bytes_transferred, kipp::file_size(published("tokenizer.json")).value());
  expect_identical("tokenizer.json");
}

TEST_F(PullTest, RegistryIdWithSyntheticFilesFailsAgainstTheRegistryPins) {
  const kipp::RegistryEntry* entry = kipp::Registry::builtin().find("Qwen/Qwen3-0.6B");
  ASSERT_NE(entry, nullptr);
  publish({}, entry->id, entry->revision);
  start_server();
  auto pull = options("", "");
  pull.id = "qwen3-0.6b";  // the name alone, any case
  auto result = kipp::pull_checkpoint(pull);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(contains(result.message(), "mismatch")) << result.message();
  EXPECT_TRUE(contains(result.message(), "registry Qwen/Qwen3-0.6B@" + entry->revision.substr(0, 12)))
      << result.message();
  EXPECT_TRUE(files_ending_in(dest(), ".gguf").empty());
  EXPECT_TRUE(files_ending_in(dest(), ".part").empty());
  EXPECT_FALSE(fs::exists(dest() + "/kipp-pull.json"));

  // --repo naming the pinned checkpoint is held to the registry just the same.
  auto by_repo = kipp::pull_checkpoint(options(entry->id, entry->revision));
  ASSERT_FALSE(by_repo.ok());
  EXPECT_TRUE(contains(by_repo.message(), "registry Qwen/Qwen3-0.6B@")) << by_repo.message();
  EXPECT_TRUE(files_ending_in(dest(), ".gguf").empty());
}

TEST_F(PullTest, RegistryEntryWithoutFileListRejectsAForeignConfigBeforeTheWeights) {
  const kipp::RegistryEntry* entry = kipp::Registry::builtin().find("Qwen/Qwen3-4B-Thinking-2507");
  ASSERT_NE(entry, nullptr);
  ASSERT_TRUE(entry->files.empty()) << "the registry now pins files for this entry; pick another";
  kipp::testing::MiniCheckpointOptions mini;
  mini.shards = 2;
  publish(mini, entry->id, entry->revision);
  start_server();
  auto pull = options("", "");
  pull.id = entry->id;
  auto result = kipp::pull_checkpoint(pull);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(contains(result.message(), "config.json does not match the registry Qwen/Qwen3-4B-Thinking-2507@"))
      << result.message();
  EXPECT_TRUE(contains(result.message(), "hidden_size 64 (expected 2560)")) << result.message();
  // Rejected before any weights were fetched.
  EXPECT_TRUE(files_ending_in(dest(), ".safetensors").empty());
  EXPECT_TRUE(files_ending_in(dest(), ".gguf").empty());
}

TEST_F(PullTest, UnknownIdFailsAndPointsAtTheRegistry) {
  auto pull = options("", "");
  pull.id = "Qwen/Qwen3-1000B";
  auto result = kipp::pull_checkpoint(pull);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(contains(result.message(), "'Qwen/Qwen3-1000B' is not a registry checkpoint")) << result.message();
  EXPECT_TRUE(contains(result.message(), "kipp registry")) << result.message();
  EXPECT_FALSE(fs::exists(dest()));
}

TEST_F(PullTest, ConflictingOrMissingTargetsAreRejected) {
  auto both = options();
  both.id = "Qwen3-0.6B";
  EXPECT_FALSE(kipp::pull_checkpoint(both).ok());
  auto neither = options("", "");
  EXPECT_TRUE(contains(kipp::pull_checkpoint(neither).message(), "nothing to pull"));
  auto no_revision = options(kRepo, "");
  EXPECT_TRUE(contains(kipp::pull_checkpoint(no_revision).message(), "needs --revision"));
  auto other_revision = options("", "main");
  other_revision.id = "Qwen3-0.6B";
  EXPECT_TRUE(contains(kipp::pull_checkpoint(other_revision).message(), "is pinned at revision"));
  auto bad_base = options();
  bad_base.base_url = "file:///etc";
  EXPECT_TRUE(contains(kipp::pull_checkpoint(bad_base).message(), "not an http"));
}

TEST_F(PullTest, IndexNamingPathsOutsideTheFolderIsRejected) {
  kipp::testing::MiniCheckpointOptions mini;
  mini.shards = 2;
  publish(mini);
  json index = json::parse(kipp::read_text_file(published("model.safetensors.index.json")).value());
  index["weight_map"]["model.norm.weight"] = "../../escape.safetensors";
  ASSERT_TRUE(kipp::write_text_file_atomic(published("model.safetensors.index.json"), index.dump()).ok());
  start_server();
  auto result = kipp::pull_checkpoint(options());
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(contains(result.message(), "'../../escape.safetensors' is not a plain")) << result.message();
  EXPECT_FALSE(fs::exists(root_ + "/escape.safetensors"));
}

TEST_F(PullTest, MissingOptionalFileIsSkippedAndMissingRequiredFileFails) {
  kipp::testing::MiniCheckpointOptions mini;
  mini.generation_config = false;
  publish(mini);
  start_server();
  auto result = kipp::pull_checkpoint(options());
  ASSERT_TRUE(result.ok()) << result.message();
  EXPECT_EQ(find_file(*result, "generation_config.json"), nullptr);
  EXPECT_TRUE(contains(log_, "generation_config.json: not on the server (404), skipped")) << log_;

  fs::remove(published("tokenizer.json"));
  fs::remove_all(dest());
  auto missing = kipp::pull_checkpoint(options());
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(contains(missing.message(), "tokenizer.json: not found on the server (HTTP 404")) << missing.message();
}

TEST_F(PullTest, BearerTokenIsSentAndARefusalNamesHfToken) {
  publish();
  start_server({"--require-token", "hf_secret"});
  auto refused = kipp::pull_checkpoint(options());
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(contains(refused.message(), "HTTP 401")) << refused.message();
  EXPECT_TRUE(contains(refused.message(), "HF_TOKEN")) << refused.message();

  auto pull = options();
  pull.hf_token = "hf_secret";
  pull.convert = false;
  auto accepted = kipp::pull_checkpoint(pull);
  EXPECT_TRUE(accepted.ok()) << accepted.message();
}

TEST_F(PullTest, ASecondPullIntoTheSameFolderIsRefusedWhileOneRuns) {
  fs::create_directories(dest());
  const int held = ::open((dest() + "/.kipp-pull.lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
  auto result = kipp::pull_checkpoint(options());
  ::close(held);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(contains(result.message(), "another kipp pull is writing")) << result.message();
}

TEST(PullHelpers, EtagsUrlsNamesAndDirectories) {
  const std::string sha = "504a6b58c4271583724e66584b6b7698aea18450209df6b2f7582df0e89cee59";
  EXPECT_EQ(kipp::sha256_from_etag("\"" + sha + "\""), sha);
  EXPECT_EQ(kipp::sha256_from_etag("W/\"" + sha + "\""), sha);
  EXPECT_EQ(kipp::sha256_from_etag("504A6B58C4271583724E66584B6B7698AEA18450209DF6B2F7582DF0E89CEE59"), sha);
  EXPECT_FALSE(kipp::sha256_from_etag("\"a2e5e7b3e4f1c2d3b4a5968778695a4b3c2d1e0f\"").has_value());  // git SHA-1
  EXPECT_FALSE(kipp::sha256_from_etag("\"" + sha.substr(1) + "z\"").has_value());

  EXPECT_EQ(kipp::hub_file_url("https://huggingface.co", "Qwen/Qwen3-0.6B", "abc", "model.safetensors"),
            "https://huggingface.co/Qwen/Qwen3-0.6B/resolve/abc/model.safetensors");
  EXPECT_EQ(kipp::url_encode_segment("a b/c"), "a%20b%2Fc");

  EXPECT_TRUE(kipp::check_shard_name("model-00001-of-00002.safetensors").ok());
  for (const char* bad : {"../model.safetensors", "a/b.safetensors", ".hidden.safetensors", "model.bin", "",
                          "x..y.safetensors", "a\\b.safetensors"}) {
    EXPECT_FALSE(kipp::check_shard_name(bad).ok()) << bad;
  }
  EXPECT_TRUE(kipp::check_repository_id("Qwen/Qwen3-0.6B").ok());
  for (const char* bad : {"Qwen3-0.6B", "a/b/c", "../x", "a/..", "/x", "a b/c"}) {
    EXPECT_FALSE(kipp::check_repository_id(bad).ok()) << bad;
  }
  EXPECT_FALSE(kipp::check_revision("refs/pr/1").ok());
  EXPECT_TRUE(kipp::check_revision("main").ok());

  const char* saved_dir = std::getenv("KIPP_MODELS_DIR");
  const std::string saved = saved_dir ? saved_dir : "";
  ::setenv("KIPP_MODELS_DIR", "/models", 1);
  EXPECT_EQ(kipp::default_pull_dir("Qwen/Qwen3-0.6B", "c1899de289a04d12100db370d81485cdf75e47ca").value(),
            "/models/Qwen--Qwen3-0.6B@c1899de289a0");
  saved_dir ? ::setenv("KIPP_MODELS_DIR", saved.c_str(), 1) : ::unsetenv("KIPP_MODELS_DIR");

  const char* saved_url = std::getenv("KIPP_HUB_BASE_URL");
  const std::string saved_base = saved_url ? saved_url : "";
  ::setenv("KIPP_HUB_BASE_URL", "http://mirror.example/", 1);
  EXPECT_EQ(kipp::resolve_hub_base_url(""), "http://mirror.example");
  EXPECT_EQ(kipp::resolve_hub_base_url("http://flag.example"), "http://flag.example");
  ::unsetenv("KIPP_HUB_BASE_URL");
  EXPECT_EQ(kipp::resolve_hub_base_url(""), "https://huggingface.co");
  if (saved_url) ::setenv("KIPP_HUB_BASE_URL", saved_base.c_str(), 1);
}

TEST(PullHelpers, VerifyFileNamesTheFileBothValuesAndTheSource) {
  const auto size = kipp::verify_file("a.bin", 10, "00", uint64_t{12}, "registry X", std::nullopt, "");
  ASSERT_FALSE(size.ok());
  EXPECT_EQ(size.message(), "a.bin: size mismatch: expected 12 bytes (registry X), found 10");
  const auto sha = kipp::verify_file("a.bin", 10, "00", uint64_t{10}, "server", std::string("ff"), "server ETag");
  ASSERT_FALSE(sha.ok());
  EXPECT_EQ(sha.message(), "a.bin: SHA-256 mismatch: expected ff (server ETag), found 00");
  EXPECT_TRUE(kipp::verify_file("a.bin", 10, "AB", uint64_t{10}, "", std::string("ab"), "").ok());
}

TEST(PullHelpers, ProgressInALogIsALineEveryTenPercent) {
  std::FILE* stream = std::tmpfile();
  ASSERT_NE(stream, nullptr);
  {
    kipp::ProgressPrinter printer(stream, /*interactive=*/false);
    printer.update({"config.json", 100, uint64_t{100}, 0, true});  // small: no progress lines
    const uint64_t total = 100'000'000;
    for (uint64_t done = 0; done <= total; done += total / 143) {
      printer.update({"model.safetensors", done, total, 0, false});
    }
    printer.update({"model.safetensors", total, total, 0, true});
  }
  std::rewind(stream);
  std::string text;
  char buffer[256];
  while (std::fgets(buffer, sizeof buffer, stream)) text += buffer;
  std::fclose(stream);
  const auto lines = std::count(text.begin(), text.end(), '\n');
  EXPECT_GE(lines, 10) << text;
  EXPECT_LE(lines, 12) << text;
  EXPECT_TRUE(contains(text, "model.safetensors  100.0 MB / 100.0 MB  100%")) << text;
  EXPECT_FALSE(contains(text, "config.json")) << text;
  EXPECT_TRUE(contains(text, "verified")) << text;
}

}  // namespace
