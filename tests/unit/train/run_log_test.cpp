// The training log: CRC32C against published check values, the hand-written protobuf encoding
// of an event byte for byte, the TFRecord framing, metrics.jsonl contents and resume trimming,
// and the loss-curve SVG (well-formed, one polyline point per finite value, clear errors).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/gpu_stats.h"
#include "train/loss_plot.h"
#include "train/run_log.h"
#include "train/tfevents.h"
#include "unit/helpers/test_assertions.h"

namespace kipp::train {
namespace {

namespace fs = std::filesystem;
using test_support::has_substr;

std::string bytes_of(std::initializer_list<int> values) {
  std::string out;
  for (const int value : values) out.push_back(char(uint8_t(value)));
  return out;
}

uint32_t read_u32(const std::string& bytes, size_t at) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= uint32_t(uint8_t(bytes[at + i])) << (8 * i);
  return value;
}

uint64_t read_u64(const std::string& bytes, size_t at) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t(uint8_t(bytes[at + i])) << (8 * i);
  return value;
}

// A fresh folder under the build's temp dir, removed afterwards.
class TempDir {
 public:
  TempDir() {
    path_ = (fs::temp_directory_path() / ("kipp-run-log-" + std::to_string(getpid()) + "-" +
                                          ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                .string();
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  const Expected<std::string> text = read_text_file(path);
  EXPECT_TRUE(text.ok());
  std::vector<nlohmann::json> lines;
  size_t begin = 0;
  while (text.ok() && begin < text->size()) {
    const size_t end = text->find('\n', begin);
    EXPECT_NE(end, std::string::npos) << "every line ends with a newline";
    if (end == std::string::npos) break;
    lines.push_back(nlohmann::json::parse(text->substr(begin, end - begin)));
    begin = end + 1;
  }
  return lines;
}

// ---- CRC32C -------------------------------------------------------------------------------

TEST(Crc32c, CheckValue) { EXPECT_EQ(crc32c(std::string_view("123456789")), 0xE3069283u); }

TEST(Crc32c, Rfc3720Vectors) {
  std::vector<uint8_t> bytes(32, 0x00);
  EXPECT_EQ(crc32c(bytes), 0x8A9136AAu);
  std::fill(bytes.begin(), bytes.end(), 0xFF);
  EXPECT_EQ(crc32c(bytes), 0x62A8AB43u);
  for (size_t i = 0; i < 32; ++i) bytes[i] = uint8_t(i);
  EXPECT_EQ(crc32c(bytes), 0x46DD794Eu);
  for (size_t i = 0; i < 32; ++i) bytes[i] = uint8_t(31 - i);
  EXPECT_EQ(crc32c(bytes), 0x113FDB5Cu);
}

TEST(Crc32c, EmptyAndContinuation) {
  EXPECT_EQ(crc32c(std::string_view()), 0u);
  EXPECT_EQ(crc32c(std::string_view("56789"), crc32c(std::string_view("1234"))), 0xE3069283u);
}

TEST(Crc32c, Mask) {
  // ((crc >> 15) | (crc << 17)) + 0xa282ead8, by hand: rotate 0x00000001 right by 15 = 0x00020000.
  EXPECT_EQ(mask_crc32c(0u), 0xa282ead8u);
  EXPECT_EQ(mask_crc32c(1u), 0x00020000u + 0xa282ead8u);
  EXPECT_EQ(mask_crc32c(0x8000u), 0x00000001u + 0xa282ead8u);
}

// ---- Protobuf encoding --------------------------------------------------------------------

TEST(TfEvents, ScalarEventBytes) {
  // Event{wall_time: 1.5, step: 300, summary{value{tag: "a/b", simple_value: 2.0}}}, by hand:
  //   09 <1.5 as LE double: 00 00 00 00 00 00 f8 3f>     field 1, fixed64
  //   10 ac 02                                           field 2, varint 300 = 0b10_0101100
  //   2a 0c                                              field 5, 12 bytes of Summary
  //     0a 0a                                            Summary.value, 10 bytes
  //       0a 03 'a' '/' 'b'                              Value.tag
  //       15 <2.0f: 00 00 00 40>                         Value.simple_value, fixed32
  const ScalarValue value{"a/b", 2.0f};
  const std::string expected = bytes_of({0x09, 0,    0,    0,    0,    0,   0,   0xf8, 0x3f, 0x10, 0xac, 0x02, 0x2a,
                                         0x0c, 0x0a, 0x0a, 0x0a, 0x03, 'a', '/', 'b',  0x15, 0,    0,    0,    0x40});
  EXPECT_EQ(encode_scalars_event(1.5, 300, std::span(&value, 1)), expected);
}

TEST(TfEvents, ZeroValueIsStillWritten) {
  // simple_value sits in a oneof, so 0.0 is written; step 0 and wall_time 0 are proto3 defaults.
  const ScalarValue value{"x", 0.0f};
  EXPECT_EQ(encode_scalars_event(0, 0, std::span(&value, 1)),
            bytes_of({0x2a, 0x0a, 0x0a, 0x08, 0x0a, 0x01, 'x', 0x15, 0, 0, 0, 0}));
}

TEST(TfEvents, FileVersionAndSessionStart) {
  EXPECT_EQ(encode_file_version_event(0),
            "\x1a\x0d"
            "brain.Event:2");
  // step 5, session_log (field 7) {status (field 1) START = 1}
  EXPECT_EQ(encode_session_start_event(0, 5), bytes_of({0x10, 0x05, 0x3a, 0x02, 0x08, 0x01}));
}

TEST(TfEvents, TextEventCarriesTheTextPlugin) {
  const std::string event = encode_text_event(0, 1, "sample/0", "hi");
  EXPECT_NE(event.find("text"), std::string::npos);
  EXPECT_NE(event.find(bytes_of({0x08, 0x07})), std::string::npos);            // dtype DT_STRING
  EXPECT_NE(event.find(bytes_of({0x42, 0x02, 'h', 'i'})), std::string::npos);  // string_val
}

TEST(TfEvents, SummaryFloatSaturates) {
  EXPECT_EQ(to_summary_float(1e300), std::numeric_limits<float>::infinity());
  EXPECT_EQ(to_summary_float(-1e300), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(to_summary_float(std::nan(""))));
  EXPECT_EQ(to_summary_float(0.25), 0.25f);
}

TEST(TfEvents, RecordFraming) {
  const std::string data = "hello";
  const std::string record = frame_record(data);
  ASSERT_EQ(record.size(), 8u + 4u + data.size() + 4u);
  EXPECT_EQ(read_u64(record, 0), data.size());
  EXPECT_EQ(read_u32(record, 8), mask_crc32c(crc32c(std::string_view(record.data(), 8))));
  EXPECT_EQ(record.substr(12, data.size()), data);
  EXPECT_EQ(read_u32(record, 12 + data.size()), mask_crc32c(crc32c(std::string_view(data))));
}

TEST(TfEvents, WriterStartsWithFileVersionAndNeverReusesAName) {
  TempDir dir;
  Expected<EventFileWriter> first = EventFileWriter::create(dir.path() + "/tb", 1000.0);
  ASSERT_TRUE(first.ok()) << first.message();
  Expected<EventFileWriter> second = EventFileWriter::create(dir.path() + "/tb", 1000.0);
  ASSERT_TRUE(second.ok()) << second.message();
  EXPECT_NE(first->path(), second->path());
  EXPECT_TRUE(has_substr(first->path(), "/tb/events.out.tfevents.1000."));
  const ScalarValue value{"t", 1.0f};
  ASSERT_TRUE(first->write_scalars(1001.0, 7, std::span(&value, 1)).ok());
  const Expected<std::string> contents = read_text_file(first->path());
  ASSERT_TRUE(contents.ok());
  const std::string expected = frame_record(encode_file_version_event(1000.0)) +
                               frame_record(encode_scalars_event(1001.0, 7, std::span(&value, 1)));
  EXPECT_EQ(*contents, expected);
}

// ---- RunLog -------------------------------------------------------------------------------

RunLogOptions fixed_clock(std::optional<uint64_t> resume_step = std::nullopt) {
  RunLogOptions options;
  options.resume_step = resume_step;
  options.clock = [] { return 1700000000.25; };
  return options;
}

StepReport step_report(uint64_t step, double loss) {
  StepReport report;
  report.step = step;
  report.max_steps = 10;
  report.loss = loss;
  report.smoothed_loss = loss + 0.5;
  report.lr = 1e-3;
  report.grad_norm = 0.75;
  report.tokens_per_second = 1234.5;
  report.tokens_seen = step * 100;
  return report;
}

TEST(RunLog, WritesJsonLines) {
  TempDir dir;
  Expected<RunLog> log = RunLog::open(dir.path(), fixed_clock());
  ASSERT_TRUE(log.ok()) << log.message();
  ASSERT_TRUE(log->record_step(step_report(1, 3.5)).ok());
  ASSERT_TRUE(log->record_eval(EvalReport{1, 3.25, std::exp(3.25), true}).ok());
  ASSERT_TRUE(log->record_sample(1, "Once", " upon a time").ok());
  ASSERT_TRUE(log->record_scalar(1, "data/epoch_fraction", 0.5).ok());
  ASSERT_TRUE(log->record_step(step_report(2, std::nan(""))).ok());

  const std::vector<nlohmann::json> lines = read_jsonl(log->metrics_path());
  ASSERT_EQ(lines.size(), 5u);
  const Expected<std::string> text = read_text_file(log->metrics_path());
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->substr(0, text->find('\n')),  // fields in this order: type, step, time first
            R"({"type":"step","step":1,"time":1700000000.25,"loss":3.5,"smoothed_loss":4.0,"lr":0.001,)"
            R"("grad_norm":0.75,"tokens_per_second":1234.5,"tokens_seen":100,"epoch":0,"max_steps":10,)"
            R"("elapsed_seconds":0.0,"eta_seconds":0.0,"skipped_steps":0})");
  EXPECT_EQ(lines[1]["type"], "eval");
  EXPECT_EQ(lines[1]["loss"], 3.25);
  EXPECT_EQ(lines[1]["is_best"], true);
  EXPECT_EQ(lines[2]["type"], "sample");
  EXPECT_EQ(lines[2]["prompt"], "Once");
  EXPECT_EQ(lines[2]["text"], " upon a time");
  EXPECT_EQ(lines[3]["type"], "scalars");
  EXPECT_EQ(lines[3]["values"]["data/epoch_fraction"], 0.5);
  EXPECT_TRUE(lines[4]["loss"].is_null()) << "NaN is written as null";
  EXPECT_EQ(lines[4]["smoothed_loss"], nullptr);

  const std::string events = log->events_path();
  EXPECT_TRUE(has_substr(events, dir.path() + "/tensorboard/events.out.tfevents.1700000000."));
  const Expected<std::string> contents = read_text_file(events);
  ASSERT_TRUE(contents.ok());
  const ScalarValue expected_scalars[] = {{"train/loss", 3.5f},
                                          {"train/smoothed_loss", 4.0f},
                                          {"train/lr", 1e-3f},
                                          {"train/grad_norm", 0.75f},
                                          {"train/tokens_per_second", 1234.5f}};
  const std::string expected_head = frame_record(encode_file_version_event(1700000000.25)) +
                                    frame_record(encode_scalars_event(1700000000.25, 1, expected_scalars));
  EXPECT_EQ(contents->substr(0, expected_head.size()), expected_head);
}

TEST(RunLog, ResumeDropsRedoneStepsAndAppends) {
  TempDir dir;
  {
    Expected<RunLog> log = RunLog::open(dir.path(), fixed_clock());
    ASSERT_TRUE(log.ok()) << log.message();
    for (uint64_t step = 1; step <= 6; ++step)
      ASSERT_TRUE(log->record_step(step_report(step, 10.0 - double(step))).ok());
    ASSERT_TRUE(log->record_eval(EvalReport{4, 5.0, std::exp(5.0), true}).ok());
    ASSERT_TRUE(log->record_eval(EvalReport{6, 4.0, std::exp(4.0), true}).ok());
  }
  // A crash cut the last write short.
  {
    std::FILE* stream = std::fopen((dir.path() + "/metrics.jsonl").c_str(), "ab");
    ASSERT_NE(stream, nullptr);
    std::fputs("{\"type\":\"step\",\"step\":7,\"lo", stream);
    std::fclose(stream);
  }
  Expected<RunLog> log = RunLog::open(dir.path(), fixed_clock(4));
  ASSERT_TRUE(log.ok()) << log.message();
  ASSERT_TRUE(log->record_step(step_report(5, 1.0)).ok());

  const std::vector<nlohmann::json> lines = read_jsonl(log->metrics_path());
  std::vector<std::string> kept;
  for (const nlohmann::json& line : lines)
    kept.push_back(line["type"].get<std::string>() + std::to_string(line["step"].get<int>()));
  EXPECT_EQ(kept, (std::vector<std::string>{"step1", "step2", "step3", "step4", "eval4", "step5"}));
  EXPECT_EQ(lines.back()["loss"], 1.0);

  // Two event files now; the new one starts with file_version then SessionLog START at step 5.
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir.path() + "/tensorboard")) files.push_back(entry.path().string());
  ASSERT_EQ(files.size(), 2u);
  const Expected<std::string> contents = read_text_file(log->events_path());
  ASSERT_TRUE(contents.ok());
  const std::string head = frame_record(encode_file_version_event(1700000000.25)) +
                           frame_record(encode_session_start_event(1700000000.25, 5));
  EXPECT_EQ(contents->substr(0, head.size()), head);
}

TEST(RunLog, NewRunStartsEmptyAndRemovesStaleEventFiles) {
  TempDir dir;
  {
    Expected<RunLog> log = RunLog::open(dir.path(), fixed_clock());
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE(log->record_step(step_report(1, 2.0)).ok());
  }
  Expected<RunLog> log = RunLog::open(dir.path(), fixed_clock());
  ASSERT_TRUE(log.ok());
  EXPECT_TRUE(read_jsonl(log->metrics_path()).empty());
  size_t files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path() + "/tensorboard")) ++files;
  EXPECT_EQ(files, 1u);
}

TEST(RunLog, ResumeRefusesAMalformedLineNamingIt) {
  TempDir dir;
  ASSERT_TRUE(write_text_file_atomic(dir.path() + "/metrics.jsonl", "{\"type\":\"step\",\"step\":1}\nnot json\n").ok());
  Expected<RunLog> log = RunLog::open(dir.path(), fixed_clock(1));
  ASSERT_FALSE(log.ok());
  EXPECT_TRUE(has_substr(log.message(), "metrics.jsonl: line 2 is not a JSON object"));
}

TEST(RunLog, TrimKeepsStepLessLinesAndBlankLinesGo) {
  const Expected<std::string> kept =
      trim_metrics_jsonl("{\"step\":1}\n\n{\"note\":\"x\"}\n{\"step\":3}\n{\"step\":2}\n", 2);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, "{\"step\":1}\n{\"note\":\"x\"}\n{\"step\":2}\n");
}

TEST(RunLog, WithoutTensorBoard) {
  TempDir dir;
  RunLogOptions options = fixed_clock();
  options.tensorboard = false;
  Expected<RunLog> log = RunLog::open(dir.path(), options);
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE(log->record_step(step_report(1, 2.0)).ok());
  EXPECT_TRUE(log->events_path().empty());
  EXPECT_FALSE(fs::exists(dir.path() + "/tensorboard"));
}

TEST(RunLog, GpuFieldsOnStepLinesUntilTheSamplerFails) {
  TempDir dir;
  RunLogOptions options = fixed_clock();
  options.tensorboard = false;
  int calls = 0;
  options.sample_gpu = [&calls]() -> Expected<GpuSample> {
    if (++calls > 1) return make_error("NVML nvmlDeviceGetMemoryInfo: GPU is lost");
    GpuSample sample;
    sample.name = "Test GPU";
    sample.utilization_percent = 87;
    sample.memory_used_bytes = 3ull << 30;
    sample.memory_peak_bytes = 5ull << 30;
    sample.memory_total_bytes = 80ull << 30;
    sample.memory_scope = GpuMemoryScope::Process;
    return sample;
  };
  Expected<RunLog> log = RunLog::open(dir.path(), options);
  ASSERT_TRUE(log.ok()) << log.message();
  for (uint64_t step = 1; step <= 3; ++step) ASSERT_TRUE(log->record_step(step_report(step, 2.0)).ok());
  EXPECT_EQ(calls, 2) << "a failed sampler is not asked again";
  const std::vector<nlohmann::json> lines = read_jsonl(log->metrics_path());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["gpu_name"], "Test GPU");
  EXPECT_EQ(lines[0]["gpu_utilization_percent"], 87.0);
  EXPECT_EQ(lines[0]["gpu_memory_used_bytes"], 3ull << 30);
  EXPECT_EQ(lines[0]["gpu_memory_peak_bytes"], 5ull << 30);
  EXPECT_EQ(lines[0]["gpu_memory_total_bytes"], 80ull << 30);
  EXPECT_EQ(lines[0]["gpu_memory_scope"], "process");
  for (size_t i = 1; i < lines.size(); ++i) {
    for (const auto& [key, value] : lines[i].items()) EXPECT_NE(key.rfind("gpu_", 0), 0u) << key;
    EXPECT_EQ(lines[i]["loss"], 2.0);
  }
}

// A known run with a resume, for tests/cmake/run_log.cmake: with KIPP_RUN_LOG_EXPORT_DIR set, the
// log stays in that folder and tools/tfevents_reader.py checks its CRCs and that the event
// files agree with metrics.jsonl; without it, it runs in a temp folder like any unit test.
TEST(RunLogExport, KnownRunWithResume) {
  const char* export_dir = std::getenv("KIPP_RUN_LOG_EXPORT_DIR");
  std::optional<TempDir> temp;
  if (export_dir == nullptr) temp.emplace();
  const std::string dir = export_dir != nullptr ? std::string(export_dir) : temp->path();
  auto clock = std::make_shared<double>(1700000000.0);
  RunLogOptions options;
  options.clock = [clock] { return *clock += 0.5; };
  {
    Expected<RunLog> log = RunLog::open(dir, options);
    ASSERT_TRUE(log.ok()) << log.message();
    for (uint64_t step = 1; step <= 6; ++step) {
      StepReport report = step_report(step, 8.0 / double(step));
      if (step == 3) report.loss = std::nan("");        // null in the jsonl, NaN in the events
      if (step == 4) report.tokens_per_second = 1e300;  // finite double, float infinity
      if (step == 5) report.grad_norm = std::numeric_limits<double>::infinity();
      ASSERT_TRUE(log->record_step(report).ok());
      if (step % 2 == 0) {
        ASSERT_TRUE(log->record_eval(EvalReport{step, 9.0 / double(step), std::exp(9.0 / double(step)), true}).ok());
      }
    }
    ASSERT_TRUE(log->record_sample(4, "Once upon", " a time\nthere was <b>markup</b>").ok());
    ASSERT_TRUE(log->record_sample(4, "Second", " prompt").ok());
    ASSERT_TRUE(log->record_scalars(5, {{"data/epoch", 0.25}, {"data/tokens", 123456789.0}}).ok());
  }
  // Resume from the checkpoint of step 4: steps 5 and 6 are re-done, with other throughput.
  *clock += 100;
  options.resume_step = 4;
  Expected<RunLog> log = RunLog::open(dir, options);
  ASSERT_TRUE(log.ok()) << log.message();
  for (uint64_t step = 5; step <= 8; ++step) {
    StepReport report = step_report(step, 8.0 / double(step));
    report.tokens_per_second = 999.0 + double(step);
    ASSERT_TRUE(log->record_step(report).ok());
    if (step % 2 == 0) {
      ASSERT_TRUE(log->record_eval(EvalReport{step, 9.0 / double(step), std::exp(9.0 / double(step)), false}).ok());
    }
  }
  ASSERT_TRUE(log->record_sample(8, "Once upon", " a mountain").ok());
  ASSERT_TRUE(log->record_scalar(8, "data/epoch", 0.5).ok());

  const std::vector<nlohmann::json> lines = read_jsonl(log->metrics_path());
  size_t steps = 0;
  for (const nlohmann::json& line : lines) steps += line["type"] == "step";
  EXPECT_EQ(steps, 8u);
  EXPECT_EQ(lines.size(), 8u + 4u + 3u + 1u);  // steps, evals, samples, scalars (step 5's went)
}

// ---- Loss plot ----------------------------------------------------------------------------

// Checks that tags balance (a stack of open element names) and returns the element count.
::testing::AssertionResult balanced_tags(const std::string& svg) {
  std::vector<std::string> open;
  size_t at = 0, elements = 0;
  while ((at = svg.find('<', at)) != std::string::npos) {
    const size_t end = svg.find('>', at);
    if (end == std::string::npos) return ::testing::AssertionFailure() << "unterminated tag at " << at;
    const std::string tag = svg.substr(at + 1, end - at - 1);
    at = end + 1;
    if (tag.starts_with("?") || tag.starts_with("!")) continue;
    if (tag.starts_with("/")) {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) {
        return ::testing::AssertionFailure()
               << "closing </" << name << "> does not match <" << (open.empty() ? "" : open.back()) << ">";
      }
      open.pop_back();
      continue;
    }
    ++elements;
    if (tag.ends_with("/")) continue;
    open.push_back(tag.substr(0, tag.find_first_of(" \n")));
  }
  if (!open.empty()) return ::testing::AssertionFailure() << "<" << open.back() << "> never closed";
  if (elements < 10) return ::testing::AssertionFailure() << "only " << elements << " elements";
  return ::testing::AssertionSuccess();
}

// The (x, y) pairs of the polyline with this id; empty when there is none.
std::vector<std::pair<double, double>> polyline_points(const std::string& svg, const std::string& id) {
  const size_t element = svg.find("<polyline id=\"" + id + "\"");
  if (element == std::string::npos) return {};
  const size_t begin = svg.find("points=\"", element) + 8;
  const std::string points = svg.substr(begin, svg.find('"', begin) - begin);
  std::vector<std::pair<double, double>> out;
  const std::regex pair(R"(([-0-9.]+),([-0-9.]+))");
  for (auto it = std::sregex_iterator(points.begin(), points.end(), pair); it != std::sregex_iterator(); ++it) {
    out.emplace_back(std::stod((*it)[1]), std::stod((*it)[2]));
  }
  return out;
}

std::string metrics_text() {
  return R"({"type":"step","step":1,"time":1,"loss":4.0,"smoothed_loss":4.0}
{"type":"step","step":2,"time":2,"loss":null,"smoothed_loss":3.8}
{"type":"sample","step":2,"time":2,"prompt":"a","text":"b"}
{"type":"step","step":3,"time":3,"loss":3.0,"smoothed_loss":3.5}
{"type":"eval","step":3,"time":3,"loss":3.2,"perplexity":24.5}
{"type":"step","step":4,"time":4,"loss":2.0,"smoothed_loss":3.1}
{"type":"eval","step":4,"time":4,"loss":2.9,"perplexity":18.2}
)";
}

TEST(LossPlot, ParsesAndSkipsNonFinite) {
  const Expected<LossSeries> series = parse_loss_series(metrics_text(), "m.jsonl");
  ASSERT_TRUE(series.ok()) << series.message();
  EXPECT_EQ(series->train_loss.size(), 3u);  // step 2's null loss is skipped
  EXPECT_EQ(series->smoothed_loss.size(), 4u);
  ASSERT_EQ(series->val_loss.size(), 2u);
  EXPECT_EQ(series->val_loss[1].step, 4);
  EXPECT_EQ(series->val_loss[1].value, 2.9);
}

TEST(LossPlot, SvgIsWellFormedWithOnePointPerValue) {
  const Expected<LossSeries> series = parse_loss_series(metrics_text(), "m.jsonl");
  ASSERT_TRUE(series.ok());
  LossPlotOptions options;
  options.title = "tiny <run> & co";
  const std::string svg = render_loss_svg(*series, options);
  EXPECT_TRUE(balanced_tags(svg));
  EXPECT_TRUE(has_substr(svg, "Loss: tiny &lt;run&gt; &amp; co"));
  EXPECT_TRUE(has_substr(svg, "font-family=\"sans-serif\""));
  EXPECT_TRUE(has_substr(svg, ">validation loss<"));
  const auto train = polyline_points(svg, "train-loss");
  const auto smoothed = polyline_points(svg, "smoothed-loss");
  const auto val = polyline_points(svg, "val-loss");
  ASSERT_EQ(train.size(), 3u);
  ASSERT_EQ(smoothed.size(), 4u);
  ASSERT_EQ(val.size(), 2u);
  // x grows with the step, y (pixels, downwards) grows as the loss falls.
  EXPECT_LT(train[0].first, train[1].first);
  EXPECT_LT(train[0].second, train[1].second);
  EXPECT_LT(train[1].second, train[2].second);
  // The same step lands on the same x in every series.
  EXPECT_EQ(train.back().first, val.back().first);
}

TEST(LossPlot, UnigramBaselineIsADashedLevelBetweenTheCurves) {
  const std::string text =
      "{\"type\":\"scalars\",\"step\":0,\"time\":1,\"values\":{\"val/unigram_baseline\":6.0}}\n"
      "{\"type\":\"step\",\"step\":10,\"time\":2,\"loss\":8.0,\"smoothed_loss\":8.0}\n"
      "{\"type\":\"step\",\"step\":20,\"time\":3,\"loss\":4.0,\"smoothed_loss\":4.0}\n";
  const Expected<LossSeries> series = parse_loss_series(text, "m.jsonl");
  ASSERT_TRUE(series.ok()) << series.message();
  ASSERT_TRUE(series->unigram_baseline.has_value());
  EXPECT_EQ(*series->unigram_baseline, 6.0);
  const std::string svg = render_loss_svg(*series, LossPlotOptions{});
  EXPECT_TRUE(balanced_tags(svg));
  EXPECT_TRUE(has_substr(svg, ">unigram baseline<"));
  const size_t at = svg.find("id=\"unigram-baseline\"");
  ASSERT_NE(at, std::string::npos);
  // Its height lies between the two training points' (loss 8 above it, loss 4 below it).
  const double y = std::stod(svg.substr(svg.find("y1=\"", at) + 4));
  const auto train = polyline_points(svg, "train-loss");
  ASSERT_EQ(train.size(), 2u);
  EXPECT_GT(y, train[0].second);
  EXPECT_LT(y, train[1].second);
  // Without the scalar there is no baseline line.
  const Expected<LossSeries> without = parse_loss_series(text.substr(text.find('\n') + 1), "m.jsonl");
  ASSERT_TRUE(without.ok());
  EXPECT_FALSE(has_substr(render_loss_svg(*without, LossPlotOptions{}), "unigram-baseline"));
}

TEST(LossPlot, LogScale) {
  LossSeries series;
  series.train_loss = {{1, 10.0}, {2, 1.0}, {3, 0.0}, {4, 0.1}};  // 0 cannot be drawn on a log axis
  LossPlotOptions options;
  options.log_scale = true;
  const std::string svg = render_loss_svg(series, options);
  EXPECT_TRUE(balanced_tags(svg));
  EXPECT_EQ(polyline_points(svg, "train-loss").size(), 3u);
  EXPECT_TRUE(has_substr(svg, "loss (log scale)"));
  EXPECT_TRUE(has_substr(svg, ">10</text>"));
}

TEST(LossPlot, EmptyAndSinglePointAndNonFinite) {
  const std::string empty = render_loss_svg(LossSeries{}, LossPlotOptions{});
  EXPECT_TRUE(balanced_tags(empty));
  EXPECT_TRUE(has_substr(empty, "no finite loss values"));
  EXPECT_EQ(empty.find("nan"), std::string::npos);

  LossSeries one;
  one.train_loss = {{5, 2.5}};
  one.smoothed_loss = {{5, 2.5}};
  one.val_loss = {{5, std::numeric_limits<double>::infinity()}};
  const std::string svg = render_loss_svg(one, LossPlotOptions{});
  EXPECT_TRUE(balanced_tags(svg));
  EXPECT_EQ(polyline_points(svg, "train-loss").size(), 1u);
  EXPECT_TRUE(polyline_points(svg, "val-loss").empty());
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(LossPlot, MalformedLineIsNamed) {
  const Expected<LossSeries> bad =
      parse_loss_series("{\"type\":\"step\",\"step\":1,\"loss\":2}\n{\"type\":\"step\",\n", "m.jsonl");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(has_substr(bad.message(), "m.jsonl line 2: not valid JSON"));
  const Expected<LossSeries> no_step = parse_loss_series("{\"type\":\"eval\",\"loss\":2}\n", "m.jsonl");
  ASSERT_FALSE(no_step.ok());
  EXPECT_TRUE(has_substr(no_step.message(), "m.jsonl line 1: no \"step\" number"));
  const Expected<LossSeries> bad_loss = parse_loss_series("{\"type\":\"step\",\"step\":1,\"loss\":\"x\"}\n", "m.jsonl");
  ASSERT_FALSE(bad_loss.ok());
  EXPECT_TRUE(has_substr(bad_loss.message(), "line 1: \"loss\" is not a number"));
  // A run still writing: the unterminated last line is ignored.
  const Expected<LossSeries> partial =
      parse_loss_series("{\"type\":\"step\",\"step\":1,\"loss\":2}\n{\"type\":\"st", "m.jsonl");
  ASSERT_TRUE(partial.ok()) << partial.message();
  EXPECT_EQ(partial->train_loss.size(), 1u);
}

TEST(LossPlot, PlotRunWritesTheFileAndNamesAMissingLog) {
  TempDir dir;
  const Expected<std::string> missing = plot_run(dir.path(), "");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(has_substr(missing.message(), dir.path() + "/metrics.jsonl: no such file"));

  ASSERT_TRUE(write_text_file_atomic(dir.path() + "/metrics.jsonl", metrics_text()).ok());
  const Expected<std::string> written = plot_run(dir.path(), "");
  ASSERT_TRUE(written.ok()) << written.message();
  EXPECT_EQ(*written, dir.path() + "/loss.svg");
  const Expected<std::string> svg = read_text_file(*written);
  ASSERT_TRUE(svg.ok());
  EXPECT_TRUE(has_substr(*svg, "Loss: " + fs::path(dir.path()).filename().string()));
}

}  // namespace
}  // namespace kipp::train
