#include "train/loss_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/files.h"
#include "train/run_log.h"

namespace kipp::train {
namespace {

using Json = nlohmann::json;

// A number field of a record: nullopt when missing, null or non-finite (skipped); an error
// when present but not a number.
Expected<std::optional<double>> number_field(const Json& record, const char* name, const std::string& where) {
  const auto field = record.find(name);
  if (field == record.end() || field->is_null()) return std::optional<double>();
  if (!field->is_number()) return make_error(where + ": \"" + name + "\" is not a number");
  const double value = field->get<double>();
  if (!std::isfinite(value)) return std::optional<double>();
  return std::optional<double>(value);
}

// Sorted by step; for a repeated step the last one logged wins (a resumed run re-did it).
void sort_by_step(std::vector<PlotPoint>& points) {
  std::stable_sort(points.begin(), points.end(),
                   [](const PlotPoint& a, const PlotPoint& b) { return a.step < b.step; });
  std::vector<PlotPoint> unique;
  unique.reserve(points.size());
  for (const PlotPoint& point : points) {
    if (!unique.empty() && unique.back().step == point.step) {
      unique.back() = point;
    } else {
      unique.push_back(point);
    }
  }
  points = std::move(unique);
}

std::string xml_escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters are not allowed in XML 1.0 text.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n') out.push_back(c);
    }
  }
  return out;
}

std::string fmt(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

// Coordinates with two decimals: precise enough on screen, compact for 100k-point curves.
std::string coord(double value) { return fmt("%.2f", value); }

// 1, 2 or 5 times a power of ten, about range / target.
double nice_step(double range, int target) {
  const double raw = range / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double fraction = raw / magnitude;
  const double nice = fraction < 1.5 ? 1 : fraction < 3.5 ? 2 : fraction < 7.5 ? 5 : 10;
  return nice * magnitude;
}

std::vector<double> linear_ticks(double low, double high, int target) {
  const double step = nice_step(high - low, target);
  std::vector<double> ticks;
  for (double tick = std::ceil(low / step - 1e-9) * step; tick <= high + step * 1e-9; tick += step) {
    ticks.push_back(std::fabs(tick) < step * 1e-9 ? 0.0 : tick);
    if (ticks.size() > 50) break;  // cannot happen with a sane step; guards float surprises
  }
  return ticks;
}

// Ticks for a log10 axis over [low, high] (in log10 units): decades, then 1-2-5, then 1..9
// within each decade until at least three fall inside; linear ticks for very narrow ranges.
std::vector<double> log_ticks(double low, double high) {
  for (const std::vector<int>& mantissas : {std::vector<int>{1}, {1, 2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}}) {
    std::vector<double> ticks;
    for (int decade = int(std::floor(low)) - 1; decade <= int(std::ceil(high)); ++decade) {
      for (const int mantissa : mantissas) {
        const double tick = decade + std::log10(double(mantissa));
        if (tick >= low - 1e-12 && tick <= high + 1e-12) ticks.push_back(tick);
      }
    }
    if (ticks.size() >= 3 && ticks.size() <= 12) return ticks;
  }
  std::vector<double> ticks;
  for (const double value : linear_ticks(std::pow(10.0, low), std::pow(10.0, high), 5)) {
    if (value > 0) ticks.push_back(std::log10(value));
  }
  return ticks;
}

// A tick label with as many decimals as the tick spacing needs.
std::string tick_label(double value, double spacing) {
  if (value == 0) return "0";
  const double magnitude = std::fabs(value);
  if (magnitude >= 1e6 || magnitude < 1e-4) return fmt("%.3g", value);
  const int decimals = std::clamp(int(std::ceil(-std::log10(spacing) - 1e-9)), 0, 6);
  char format[16];
  std::snprintf(format, sizeof format, "%%.%df", decimals);
  return fmt(format, value);
}

std::string log_tick_label(double log_value) {
  const double value = std::pow(10.0, log_value);
  if (value >= 1e5 || value < 1e-3) return fmt("%.0e", value);
  return fmt("%.4g", value);
}

struct Axis {
  double low = 0, high = 1;  // data range (log10 units on a log axis)
  double pixel_low = 0, pixel_high = 1;
  double to_pixel(double value) const { return pixel_low + (value - low) / (high - low) * (pixel_high - pixel_low); }
};

// Widens a degenerate or empty range so that one point or a flat curve sits mid-axis.
void widen(double& low, double& high, bool have_data, bool zero_floor) {
  if (!have_data) {
    low = 0;
    high = 1;
    return;
  }
  if (high - low <= std::max(std::fabs(high), 1.0) * 1e-12) {
    const double half = std::max(std::fabs(low) * 0.1, 0.5);
    low -= half;
    high += half;
    if (zero_floor && low < 0 && high > 0 && low + half >= 0) {
      high -= low;
      low = 0;
    }
  }
}

constexpr const char* kTrainColor = "#1f77b4";
constexpr const char* kValColor = "#d62728";
constexpr const char* kBaselineColor = "#7f7f7f";

// The curves as drawn: finite points only; on a log axis only positive losses, in log10 units.
struct PlotData {
  std::vector<PlotPoint> train, smoothed, val;
  std::optional<double> baseline;
};

PlotData prepare_data(const LossSeries& input, bool log_scale) {
  const auto prepare = [&](const std::vector<PlotPoint>& points) {
    std::vector<PlotPoint> out;
    for (const PlotPoint& point : points) {
      if (!std::isfinite(point.step) || !std::isfinite(point.value)) continue;
      if (log_scale) {
        if (point.value <= 0) continue;
        out.push_back({point.step, std::log10(point.value)});
      } else {
        out.push_back(point);
      }
    }
    return out;
  };
  PlotData data{prepare(input.train_loss), prepare(input.smoothed_loss), prepare(input.val_loss), std::nullopt};
  if (input.unigram_baseline && std::isfinite(*input.unigram_baseline) && (!log_scale || *input.unigram_baseline > 0)) {
    data.baseline = log_scale ? std::log10(*input.unigram_baseline) : *input.unigram_baseline;
  }
  return data;
}

// The picture's size, the plot area inside it, and the axes' data ranges mapped onto it.
struct Frame {
  bool have_data = false;
  double width = 0, height = 0;
  double left = 0, right = 0, top = 0, bottom = 0;
  Axis x, y;
};

Frame layout(const PlotData& data, const LossPlotOptions& options) {
  double x_low = std::numeric_limits<double>::infinity(), x_high = -x_low;
  double y_low = x_low, y_high = -x_low;
  for (const auto* series : {&data.train, &data.smoothed, &data.val}) {
    for (const PlotPoint& point : *series) {
      x_low = std::min(x_low, point.step);
      x_high = std::max(x_high, point.step);
      y_low = std::min(y_low, point.value);
      y_high = std::max(y_high, point.value);
    }
  }
  Frame frame;
  frame.have_data = std::isfinite(x_low);
  if (frame.have_data && data.baseline) {
    y_low = std::min(y_low, *data.baseline);
    y_high = std::max(y_high, *data.baseline);
  }
  widen(x_low, x_high, frame.have_data, /*zero_floor=*/true);
  widen(y_low, y_high, frame.have_data, /*zero_floor=*/!options.log_scale);
  // 5% headroom above and below the curves.
  const double y_pad = (y_high - y_low) * 0.05;
  y_low -= y_pad;
  y_high += y_pad;

  frame.width = std::max(options.width, 200);
  frame.height = std::max(options.height, 150);
  frame.left = 72;
  frame.right = frame.width - 24;
  frame.top = 48;
  frame.bottom = frame.height - 52;
  frame.x = Axis{x_low, x_high, frame.left, frame.right};
  frame.y = Axis{y_low, y_high, frame.bottom, frame.top};
  return frame;
}

// The XML prolog, the canvas, the plot area's clip path and the title.
std::string svg_head(const Frame& f, const std::string& title) {
  std::string svg;
  svg += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + coord(f.width) + "\" height=\"" + coord(f.height) +
         "\" viewBox=\"0 0 " + coord(f.width) + " " + coord(f.height) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg +=
      "<rect x=\"0\" y=\"0\" width=\"" + coord(f.width) + "\" height=\"" + coord(f.height) + "\" fill=\"#ffffff\"/>\n";
  svg += "<defs><clipPath id=\"plot-area\"><rect x=\"" + coord(f.left) + "\" y=\"" + coord(f.top) + "\" width=\"" +
         coord(f.right - f.left) + "\" height=\"" + coord(f.bottom - f.top) + "\"/></clipPath></defs>\n";
  const std::string heading = title.empty() ? "Loss" : "Loss: " + title;
  svg += "<text x=\"" + coord(f.width / 2) +
         "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">" + xml_escape(heading) +
         "</text>\n";
  return svg;
}

// Grid lines and tick labels, then the plot area's frame and the axes' names.
std::string svg_axes(const Frame& f, bool log_scale) {
  std::string svg = "<g id=\"x-ticks\" stroke=\"#e3e3e3\" stroke-width=\"1\">\n";
  std::string x_labels, y_labels;
  const std::vector<double> x_ticks = linear_ticks(f.x.low, f.x.high, 8);
  const double x_spacing = x_ticks.size() >= 2 ? x_ticks[1] - x_ticks[0] : 1;
  for (const double tick : x_ticks) {
    const std::string x = coord(f.x.to_pixel(tick));
    svg += "<line x1=\"" + x + "\" y1=\"" + coord(f.top) + "\" x2=\"" + x + "\" y2=\"" + coord(f.bottom) + "\"/>\n";
    x_labels += "<text x=\"" + x + "\" y=\"" + coord(f.bottom + 18) + "\" text-anchor=\"middle\">" +
                tick_label(tick, x_spacing) + "</text>\n";
  }
  svg += "</g>\n<g id=\"y-ticks\" stroke=\"#e3e3e3\" stroke-width=\"1\">\n";
  const std::vector<double> y_ticks = log_scale ? log_ticks(f.y.low, f.y.high) : linear_ticks(f.y.low, f.y.high, 6);
  const double y_spacing = y_ticks.size() >= 2 ? y_ticks[1] - y_ticks[0] : 1;
  for (const double tick : y_ticks) {
    const std::string y = coord(f.y.to_pixel(tick));
    svg += "<line x1=\"" + coord(f.left) + "\" y1=\"" + y + "\" x2=\"" + coord(f.right) + "\" y2=\"" + y + "\"/>\n";
    y_labels += "<text x=\"" + coord(f.left - 8) + "\" y=\"" + y + "\" dy=\"4\" text-anchor=\"end\">" +
                (log_scale ? log_tick_label(tick) : tick_label(tick, y_spacing)) + "</text>\n";
  }
  svg += "</g>\n<g id=\"tick-labels\" fill=\"#333333\">\n" + x_labels + y_labels + "</g>\n";

  svg += "<rect x=\"" + coord(f.left) + "\" y=\"" + coord(f.top) + "\" width=\"" + coord(f.right - f.left) +
         "\" height=\"" + coord(f.bottom - f.top) + "\" fill=\"none\" stroke=\"#555555\" stroke-width=\"1\"/>\n";
  svg += "<text x=\"" + coord((f.left + f.right) / 2) + "\" y=\"" + coord(f.height - 12) +
         "\" text-anchor=\"middle\" fill=\"#333333\">step</text>\n";
  svg += "<text x=\"18\" y=\"" + coord((f.top + f.bottom) / 2) +
         "\" text-anchor=\"middle\" fill=\"#333333\" transform=\"rotate(-90 18 " + coord((f.top + f.bottom) / 2) +
         ")\">" + (log_scale ? "loss (log scale)" : "loss") + "</text>\n";
  return svg;
}

// The curves, clipped to the plot area, and the baseline; a note instead when there is no data.
std::string svg_curves(const PlotData& data, const Frame& f) {
  const auto points_text = [&](const std::vector<PlotPoint>& points) {
    std::string text;
    for (const PlotPoint& point : points) {
      if (!text.empty()) text.push_back(' ');
      text += coord(f.x.to_pixel(point.step)) + "," + coord(f.y.to_pixel(point.value));
    }
    return text;
  };
  const auto markers = [&](const std::vector<PlotPoint>& points, const char* color, double radius) {
    std::string text;
    for (const PlotPoint& point : points) {
      text += "<circle cx=\"" + coord(f.x.to_pixel(point.step)) + "\" cy=\"" + coord(f.y.to_pixel(point.value)) +
              "\" r=\"" + coord(radius) + "\" fill=\"" + color + "\"/>\n";
    }
    return text;
  };

  std::string svg =
      "<g clip-path=\"url(#plot-area)\" fill=\"none\" stroke-linejoin=\"round\" stroke-linecap=\"round\">\n";
  if (!data.train.empty()) {
    svg += "<polyline id=\"train-loss\" stroke=\"" + std::string(kTrainColor) +
           "\" stroke-opacity=\"0.3\" stroke-width=\"1\" points=\"" + points_text(data.train) + "\"/>\n";
    if (data.train.size() == 1) svg += markers(data.train, "#9ebfdc", 2.5);
  }
  if (!data.smoothed.empty()) {
    svg += "<polyline id=\"smoothed-loss\" stroke=\"" + std::string(kTrainColor) + "\" stroke-width=\"2\" points=\"" +
           points_text(data.smoothed) + "\"/>\n";
    if (data.smoothed.size() == 1) svg += markers(data.smoothed, kTrainColor, 3);
  }
  if (!data.val.empty()) {
    svg += "<polyline id=\"val-loss\" stroke=\"" + std::string(kValColor) + "\" stroke-width=\"1.5\" points=\"" +
           points_text(data.val) + "\"/>\n";
    svg += "<g id=\"val-points\">\n" + markers(data.val, kValColor, 3.5) + "</g>\n";
  }
  if (f.have_data && data.baseline) {
    const std::string y = coord(f.y.to_pixel(*data.baseline));
    svg += "<line id=\"unigram-baseline\" x1=\"" + coord(f.left) + "\" y1=\"" + y + "\" x2=\"" + coord(f.right) +
           "\" y2=\"" + y + "\" stroke=\"" + kBaselineColor + "\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\n";
  }
  svg += "</g>\n";

  if (!f.have_data) {
    svg += "<text x=\"" + coord((f.left + f.right) / 2) + "\" y=\"" + coord((f.top + f.bottom) / 2) +
           "\" text-anchor=\"middle\" font-size=\"14\" fill=\"#888888\">no finite loss values logged yet</text>\n";
  }
  return svg;
}

// The legend, top right inside the plot; the baseline's entry only when there is one.
std::string svg_legend(const Frame& f, bool has_baseline) {
  const double legend_width = 150, row = 18, legend_x = f.right - legend_width - 10, legend_y = f.top + 10;
  std::string svg = "<g id=\"legend\">\n<rect x=\"" + coord(legend_x) + "\" y=\"" + coord(legend_y) + "\" width=\"" +
                    coord(legend_width) + "\" height=\"" + coord(row * (has_baseline ? 4 : 3) + 10) +
                    "\" fill=\"#ffffff\" fill-opacity=\"0.85\" stroke=\"#cccccc\"/>\n";
  struct Entry {
    const char* label;
    const char* color;
    const char* extra;
  };
  const Entry entries[] = {{"training loss", kTrainColor, "stroke-opacity=\"0.3\" stroke-width=\"1\""},
                           {"smoothed loss", kTrainColor, "stroke-width=\"2\""},
                           {"validation loss", kValColor, "stroke-width=\"1.5\""},
                           {"unigram baseline", kBaselineColor, "stroke-width=\"1.5\" stroke-dasharray=\"6 4\""}};
  for (size_t i = 0; i < (has_baseline ? 4u : 3u); ++i) {
    const double y = legend_y + 5 + row * (double(i) + 0.5);
    svg += "<line x1=\"" + coord(legend_x + 8) + "\" y1=\"" + coord(y) + "\" x2=\"" + coord(legend_x + 36) +
           "\" y2=\"" + coord(y) + "\" stroke=\"" + entries[i].color + "\" " + entries[i].extra + "/>\n";
    if (i == 2) {
      svg += "<circle cx=\"" + coord(legend_x + 22) + "\" cy=\"" + coord(y) + "\" r=\"3.5\" fill=\"" + kValColor +
             "\"/>\n";
    }
    svg += "<text x=\"" + coord(legend_x + 44) + "\" y=\"" + coord(y) + "\" dy=\"4\" fill=\"#333333\">" +
           entries[i].label + "</text>\n";
  }
  svg += "</g>\n";
  return svg;
}

}  // namespace

Expected<LossSeries> parse_loss_series(const std::string& jsonl, const std::string& source) {
  LossSeries series;
  size_t begin = 0;
  uint64_t line_number = 0;
  while (begin < jsonl.size()) {
    size_t end = jsonl.find('\n', begin);
    const bool terminated = end != std::string::npos;
    if (!terminated) end = jsonl.size();
    const std::string_view line(jsonl.data() + begin, end - begin);
    begin = end + 1;
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = source + " line " + std::to_string(line_number);
    Json record;
    try {
      record = Json::parse(line);
    } catch (const Json::parse_error& error) {
      // A training run still writing: its last line may be cut short.
      if (!terminated) break;
      std::string reason = error.what();
      if (const size_t colon = reason.rfind(": "); colon != std::string::npos) reason = reason.substr(colon + 2);
      return make_error(where + ": not valid JSON (" + reason + ")");
    }
    if (!record.is_object()) return make_error(where + ": not a JSON object");
    const auto type = record.find("type");
    if (type == record.end() || !type->is_string()) return make_error(where + ": no \"type\" string");
    if (*type == "scalars") {
      const auto values = record.find("values");
      if (values != record.end() && values->is_object()) {
        const auto baseline = values->find("val/unigram_baseline");
        if (baseline != values->end() && baseline->is_number()) series.unigram_baseline = baseline->get<double>();
      }
      continue;
    }
    if (*type != "step" && *type != "eval") continue;  // samples: not plotted
    KIPP_ASSIGN_OR_RETURN(const std::optional<double> step, number_field(record, "step", where));
    if (!step) return make_error(where + ": no \"step\" number");
    if (*type == "step") {
      KIPP_ASSIGN_OR_RETURN(const std::optional<double> loss, number_field(record, "loss", where));
      KIPP_ASSIGN_OR_RETURN(const std::optional<double> smoothed, number_field(record, "smoothed_loss", where));
      if (loss) series.train_loss.push_back({*step, *loss});
      if (smoothed) series.smoothed_loss.push_back({*step, *smoothed});
    } else {
      KIPP_ASSIGN_OR_RETURN(const std::optional<double> loss, number_field(record, "loss", where));
      if (loss) series.val_loss.push_back({*step, *loss});
    }
  }
  sort_by_step(series.train_loss);
  sort_by_step(series.smoothed_loss);
  sort_by_step(series.val_loss);
  return series;
}

Expected<LossSeries> read_loss_series(const std::string& metrics_path) {
  if (!file_exists(metrics_path)) {
    return make_error(metrics_path + ": no such file (kipp train writes it into the run folder)");
  }
  KIPP_ASSIGN_OR_RETURN(const std::string contents, read_text_file(metrics_path));
  return parse_loss_series(contents, metrics_path);
}

std::string render_loss_svg(const LossSeries& input, const LossPlotOptions& options) {
  const PlotData data = prepare_data(input, options.log_scale);
  const Frame frame = layout(data, options);
  return svg_head(frame, options.title) + svg_axes(frame, options.log_scale) + svg_curves(data, frame) +
         svg_legend(frame, data.baseline.has_value()) + "</svg>\n";
}

Expected<std::string> plot_run(const std::string& run_dir, std::string output_path, bool log_scale) {
  KIPP_ASSIGN_OR_RETURN(const LossSeries series, read_loss_series(join_path(run_dir, kMetricsFileName)));
  if (output_path.empty()) output_path = join_path(run_dir, "loss.svg");
  LossPlotOptions options;
  options.log_scale = log_scale;
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::weakly_canonical(run_dir, error);
  options.title = (error ? std::filesystem::path(run_dir) : absolute).filename().string();
  if (options.title.empty()) options.title = run_dir;
  KIPP_RETURN_IF_ERROR(write_text_file_atomic(output_path, render_loss_svg(series, options)));
  return output_path;
}

}  // namespace kipp::train
