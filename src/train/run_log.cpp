#include "train/run_log.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/files.h"

namespace kipp::train {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// JSON has no NaN or infinity: those become null (the plot and the reader skip them).
Json number(double value) { return std::isfinite(value) ? Json(value) : Json(nullptr); }

Json record_head(const char* type, uint64_t step, double time) {
  Json line = Json::object();
  line["type"] = type;
  line["step"] = step;
  line["time"] = time;
  return line;
}

// Removes the event files an earlier, never-checkpointed run left (a new run owns the folder).
Status remove_stale_event_files(const std::string& dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) return ok_status();
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("events.out.tfevents.") && entry.is_regular_file()) {
      fs::remove(entry.path(), error);
      if (error) return make_error("cannot remove stale event file " + entry.path().string() + ": " + error.message());
    }
  }
  if (error) return make_error("cannot list " + dir + ": " + error.message());
  return ok_status();
}

std::string sample_markdown(const std::string& prompt, const std::string& text) {
  // Indented lines are a Markdown code block: TensorBoard's text tab then shows the model's
  // output verbatim instead of rendering it.
  auto indent = [](const std::string& body) {
    std::string out = "    ";
    for (const char c : body) {
      out.push_back(c);
      if (c == '\n') out += "    ";
    }
    return out;
  };
  return "**prompt**\n\n" + indent(prompt) + "\n\n**generated**\n\n" + indent(text) + "\n";
}

}  // namespace

Expected<std::string> trim_metrics_jsonl(const std::string& contents, uint64_t max_step) {
  std::string kept;
  size_t begin = 0;
  uint64_t line_number = 0;
  while (begin < contents.size()) {
    const size_t end = contents.find('\n', begin);
    ++line_number;
    if (end == std::string::npos) break;  // unterminated: a write the crash cut short
    const std::string_view line(contents.data() + begin, end - begin);
    begin = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const Json record = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded() || !record.is_object()) {
      return make_error("line " + std::to_string(line_number) + " is not a JSON object");
    }
    const auto step = record.find("step");
    if (step != record.end() && step->is_number() && step->get<double>() > double(max_step)) continue;
    kept.append(line);
    kept.push_back('\n');
  }
  return kept;
}

Expected<RunLog> RunLog::open(const std::string& run_dir, const RunLogOptions& options) {
  std::error_code error;
  fs::create_directories(run_dir, error);
  if (error) return make_error("cannot create " + run_dir + ": " + error.message());

  RunLog log;
  log.clock_ = options.clock;
  log.sample_gpu_ = options.sample_gpu;
  log.metrics_path_ = join_path(run_dir, kMetricsFileName);
  const char* mode = "wb";
  if (options.resume_step) {
    mode = "ab";
    if (file_exists(log.metrics_path_)) {
      KIPP_ASSIGN_OR_RETURN(const std::string contents, read_text_file(log.metrics_path_));
      KIPP_ASSIGN_OR_RETURN(const std::string kept,
                            with_context(trim_metrics_jsonl(contents, *options.resume_step), log.metrics_path_));
      // Temp file + rename: a crash here leaves either the old log or the trimmed one.
      if (kept != contents) KIPP_RETURN_IF_ERROR(write_text_file_atomic(log.metrics_path_, kept));
    }
  }
  std::FILE* stream = std::fopen(log.metrics_path_.c_str(), mode);
  if (stream == nullptr) return make_error("cannot open " + log.metrics_path_ + ": " + std::strerror(errno));
  log.metrics_.reset(stream);

  if (options.tensorboard) {
    const std::string events_dir = join_path(run_dir, kTensorBoardDirName);
    if (!options.resume_step) KIPP_RETURN_IF_ERROR(remove_stale_event_files(events_dir));
    KIPP_ASSIGN_OR_RETURN(EventFileWriter writer, EventFileWriter::create(events_dir, log.now()));
    if (options.resume_step) {
      KIPP_RETURN_IF_ERROR(writer.write_session_start(log.now(), int64_t(*options.resume_step + 1)));
    }
    log.events_.emplace(std::move(writer));
  }
  return log;
}

double RunLog::now() const {
  if (clock_) return clock_();
  const auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  return std::chrono::duration<double>(since_epoch).count();
}

Status RunLog::append_line(const std::string& line) {
  const std::string text = line + "\n";
  if (std::fwrite(text.data(), 1, text.size(), metrics_.get()) != text.size() || std::fflush(metrics_.get()) != 0) {
    return make_error("cannot write " + metrics_path_ + ": " + std::strerror(errno));
  }
  return ok_status();
}

Status RunLog::record_step(const StepReport& report) {
  const double time = now();
  Json line = record_head("step", report.step, time);
  line["loss"] = number(report.loss);
  line["smoothed_loss"] = number(report.smoothed_loss);
  line["lr"] = number(report.lr);
  line["grad_norm"] = number(report.grad_norm);
  line["tokens_per_second"] = number(report.tokens_per_second);
  line["tokens_seen"] = report.tokens_seen;
  line["epoch"] = report.epoch;
  line["max_steps"] = report.max_steps;
  line["elapsed_seconds"] = number(report.elapsed_seconds);
  line["eta_seconds"] = number(report.eta_seconds);
  line["skipped_steps"] = report.skipped_steps;
  if (report.ranks > 1) {
    line["ranks"] = report.ranks;
    line["allreduce_seconds"] = number(report.allreduce_seconds);
    line["allreduce_wait_seconds"] = number(report.allreduce_wait_seconds);
    line["allreduce_share"] = number(report.allreduce_share);
  }
  std::optional<GpuSample> gpu;
  if (sample_gpu_) {
    if (auto sample = sample_gpu_()) {
      gpu = std::move(*sample);
    } else {
      sample_gpu_ = nullptr;
    }
  }
  if (gpu) {
    line["gpu_name"] = gpu->name;
    line["gpu_utilization_percent"] = number(gpu->utilization_percent);
    line["gpu_memory_used_bytes"] = gpu->memory_used_bytes;
    line["gpu_memory_peak_bytes"] = gpu->memory_peak_bytes;
    line["gpu_memory_total_bytes"] = gpu->memory_total_bytes;
    line["gpu_memory_scope"] = gpu_memory_scope_name(gpu->memory_scope);
  }
  KIPP_RETURN_IF_ERROR(append_line(line.dump()));
  if (!events_) return ok_status();
  std::vector<ScalarValue> scalars = {
      {"train/loss", to_summary_float(report.loss)},
      {"train/smoothed_loss", to_summary_float(report.smoothed_loss)},
      {"train/lr", to_summary_float(report.lr)},
      {"train/grad_norm", to_summary_float(report.grad_norm)},
      {"train/tokens_per_second", to_summary_float(report.tokens_per_second)},
  };
  if (report.ranks > 1) scalars.push_back({"train/allreduce_share", to_summary_float(report.allreduce_share)});
  if (gpu) {
    scalars.push_back({"gpu/utilization_percent", to_summary_float(gpu->utilization_percent)});
    scalars.push_back({"gpu/memory_used_gib", to_summary_float(double(gpu->memory_used_bytes) / double(1ull << 30))});
  }
  return events_->write_scalars(time, int64_t(report.step), scalars);
}

Status RunLog::record_eval(const EvalReport& report) {
  const double time = now();
  Json line = record_head("eval", report.step, time);
  line["loss"] = number(report.loss);
  line["perplexity"] = number(report.perplexity);
  line["is_best"] = report.is_best;
  KIPP_RETURN_IF_ERROR(append_line(line.dump()));
  if (!events_) return ok_status();
  const ScalarValue scalars[] = {
      {"val/loss", to_summary_float(report.loss)},
      {"val/perplexity", to_summary_float(report.perplexity)},
  };
  return events_->write_scalars(time, int64_t(report.step), scalars);
}

Status RunLog::record_sample(uint64_t step, const std::string& prompt, const std::string& text) {
  const double time = now();
  Json line = record_head("sample", step, time);
  line["prompt"] = prompt;
  line["text"] = text;
  // Invalid UTF-8 (a token cut mid-character) is replaced rather than failing the dump.
  KIPP_RETURN_IF_ERROR(append_line(line.dump(-1, ' ', false, Json::error_handler_t::replace)));
  if (!events_) return ok_status();
  if (step != sample_step_) {
    sample_step_ = step;
    samples_at_step_ = 0;
  }
  const std::string tag = "sample/" + std::to_string(samples_at_step_++);
  return events_->write_text(time, int64_t(step), tag, sample_markdown(prompt, text));
}

Status RunLog::record_scalars(uint64_t step, const std::vector<NamedScalar>& values) {
  const double time = now();
  Json line = record_head("scalars", step, time);
  Json fields = Json::object();
  for (const NamedScalar& scalar : values) fields[scalar.tag] = number(scalar.value);
  line["values"] = std::move(fields);
  KIPP_RETURN_IF_ERROR(append_line(line.dump(-1, ' ', false, Json::error_handler_t::replace)));
  if (!events_) return ok_status();
  std::vector<ScalarValue> scalars;
  scalars.reserve(values.size());
  for (const NamedScalar& scalar : values) scalars.push_back({scalar.tag, to_summary_float(scalar.value)});
  return events_->write_scalars(time, int64_t(step), scalars);
}

}  // namespace kipp::train
