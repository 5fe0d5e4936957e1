// One entry point for every trace output format, shared by `jaxpp-sim export` and any command
// that writes a timeline (`simulate`, `run`, `demo`).
//
//   perfetto, chrome   Chrome trace-event JSON (trace_to_chrome_json; the same content — Perfetto
//                      reads the Chrome format; "perfetto" is compact, "chrome" indented)
//   svg, png           the Graphviz timeline rendered in-process through libgvc
//   dot                the Graphviz timeline as DOT text (pinned positions; `neato -n` or
//                      `dot -Knop` renders it as is)
//   text               the text Gantt chart
//   json               the trace itself (trace_to_json)
// The output is produced completely in memory first; write_trace_export then writes it
// atomically, so an error never leaves a partial file.
//
// Usage:
//   ExportFormat f = parse_export_format("svg", "--format");
//   write_trace_export(trace, f, "timeline.svg", {});
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "trace/trace.h"

namespace jaxpp {

enum class ExportFormat { kPerfetto, kChrome, kSvg, kPng, kDot, kText, kJson };
inline constexpr std::array kAllExportFormats = {ExportFormat::kPerfetto, ExportFormat::kChrome,
                                                 ExportFormat::kSvg,      ExportFormat::kPng,
                                                 ExportFormat::kDot,      ExportFormat::kText,
                                                 ExportFormat::kJson};
std::string_view to_string(ExportFormat f);  // "perfetto", "chrome", "svg", "png", "dot", ...
// InputError "<where>: unknown format 'x' (expected one of perfetto, chrome, ...)".
ExportFormat parse_export_format(std::string_view text, const std::string& where);
// The format implied by a file name's extension (.svg, .png, .dot, .txt, .json -> perfetto), or
// InputError naming the path when the extension says nothing.
ExportFormat export_format_from_path(const std::string& path);
bool is_binary(ExportFormat f);  // png

struct ExportOptions {
  int width = 0;             // text: columns (default 100); svg/png/dot: points (default 1000)
  bool per_stream = false;   // one row per (actor, stream)
  std::string title;         // svg/png/dot: picture title (default from the trace)
};

// The options of `jaxpp-sim export` checked against the format and the view, with the CLI's
// messages: an option the output would ignore is refused (--width and --title on an event list,
// --title on the text Gantt, any of them with the task-graph view), --width within 10 to 10,000
// columns (text) or 20,000 points, --title UTF-8. `width` and `title` are nullopt when not given.
// Shared by the CLI and the Python module.
ExportOptions checked_export_options(ExportFormat format, bool taskgraph_view,
                                     std::optional<int> width, bool per_stream,
                                     const std::optional<std::string>& title);

// The bytes of the export (text for every format but png).
std::string export_trace(const Trace& trace, ExportFormat format, const ExportOptions& options);
// export_trace + write_text_file_atomic. InputError when the path cannot be written.
void write_trace_export(const Trace& trace, ExportFormat format, const std::string& path,
                        const ExportOptions& options);

}  // namespace jaxpp
