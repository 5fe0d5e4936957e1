#include "trace/export.h"

#include <filesystem>

#include "graph/error.h"
#include "graph/json_util.h"
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
