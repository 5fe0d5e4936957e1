#include "trace/export.h"

#include <filesystem>

#include "graph/error.h"
#include "graph/input_file.h"
#include "graph/json_util.h"
#include "graph/range_check.h"
#include "trace/chrome_trace.h"
#include "trace/graphviz_render.h"
#include "trace/text_gantt.h"
#include "trace/timeline_dot.h"

namespace jaxpp {
namespace {

constexpr int kDefaultGanttWidth = 100;
constexpr int kDefaultTimelineWidthPt = 1000;

std::string format_list() {
  std::string list;
  for (ExportFormat f : kAllExportFormats) list += (list.empty() ? "" : ", ") + std::string(to_string(f));
  return list;
}

}  // namespace

std::string_view to_string(ExportFormat f) {
  switch (f) {
    case ExportFormat::kPerfetto: return "perfetto";
    case ExportFormat::kChrome: return "chrome";
    case ExportFormat::kSvg: return "svg";
    case ExportFormat::kPng: return "png";
    case ExportFormat::kDot: return "dot";
    case ExportFormat::kText: return "text";
    case ExportFormat::kJson: return "json";
  }
  return "?";
}

ExportFormat parse_export_format(std::string_view text, const std::string& where) {
  for (ExportFormat f : kAllExportFormats) {
    if (to_string(f) == text) return f;
  }
  throw_input_error(where, "unknown format '" + std::string(text) + "' (expected one of " +
                               format_list() + ")");
}

ExportFormat export_format_from_path(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".svg") return ExportFormat::kSvg;
  if (ext == ".png") return ExportFormat::kPng;
  if (ext == ".dot" || ext == ".gv") return ExportFormat::kDot;
  if (ext == ".txt") return ExportFormat::kText;
  if (ext == ".json") return ExportFormat::kPerfetto;
  throw_input_error(path, "cannot tell the format from the extension '" + ext +
                              "' (give --format: " + format_list() + ")");
}

bool is_binary(ExportFormat f) { return f == ExportFormat::kPng; }

ExportOptions checked_export_options(ExportFormat format, bool taskgraph_view,
                                     std::optional<int> width, bool per_stream,
                                     const std::optional<std::string>& title) {
  const auto refuse = [&](bool width_too, bool per_stream_too, bool title_too,
                          const std::string& why) {
    if (width_too && width) throw_input_error("--width", why);
    if (per_stream_too && per_stream) throw_input_error("--per-stream", why);
    if (title_too && title) throw_input_error("--title", why);
  };
  if (taskgraph_view) {
    refuse(true, true, true, "a timeline option; --view taskgraph draws the plan's task graph");
  } else if (format == ExportFormat::kPerfetto || format == ExportFormat::kChrome ||
             format == ExportFormat::kJson) {
    refuse(true, false, true,
           "a picture option; " + std::string(to_string(format)) +
               " output is an event list (one track per actor and stream)");
    refuse(false, true, false,
           std::string(to_string(format)) + " output already has one track per actor and stream");
  } else if (format == ExportFormat::kText) {
    refuse(false, false, true, "a picture option (svg, png, dot); the text Gantt has no title");
  }
  ExportOptions o;
  if (width) {
    if (*width < 10) throw_input_error("--width", "must be >= 10");
    // A text Gantt holds width characters per row; a PNG width x height pixels.
    const bool text = format == ExportFormat::kText;
    o.width = check_int_in(*width, "--width", 10, text ? 10'000 : 20'000,
                           text ? "a number of columns" : "a width in points");
  }
  o.per_stream = per_stream;
  if (title) {
    o.title = *title;
    check_utf8("--title", o.title);  // written into SVG, PNG and DOT text
  }
  return o;
}

std::string export_trace(const Trace& trace, ExportFormat format, const ExportOptions& options) {
  TimelineOptions timeline;
  timeline.per_stream = options.per_stream;
  timeline.width_pt = options.width > 0 ? options.width : kDefaultTimelineWidthPt;
  timeline.title = options.title;
  switch (format) {
    case ExportFormat::kPerfetto: return trace_to_chrome_json(trace).dump() + "\n";
    case ExportFormat::kChrome: return trace_to_chrome_json(trace).dump(1) + "\n";
    case ExportFormat::kJson: return trace_to_json(trace).dump(1) + "\n";
    case ExportFormat::kDot: return timeline_to_dot(trace, timeline);
    case ExportFormat::kSvg:
      return render_dot(timeline_to_dot(trace, timeline), "svg", kTimelineLayoutEngine);
    case ExportFormat::kPng:
      return render_dot(timeline_to_dot(trace, timeline), "png", kTimelineLayoutEngine);
    case ExportFormat::kText: {
      GanttOptions gantt;
      gantt.width = options.width > 0 ? options.width : kDefaultGanttWidth;
      gantt.per_stream = options.per_stream;
      return text_gantt(trace, gantt);
    }
  }
  throw_input_error("export", "unsupported format");
}

void write_trace_export(const Trace& trace, ExportFormat format, const std::string& path,
                        const ExportOptions& options) {
  write_text_file_atomic(path, export_trace(trace, format, options));
}

}  // namespace jaxpp
