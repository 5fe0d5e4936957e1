// Comparison report: one self-contained HTML page that puts a predicted and a measured timeline of
// the same program one above the other, on one time scale, with a summary and a per-kind error
// table (what `jaxpp-sim run --compare --report FILE.html` writes).
//
// The timelines are the Graphviz timelines of trace/timeline_dot.h rendered to SVG in-process and
// inlined (no external file, script or stylesheet). Both pictures use the same points per second,
// so equal durations have equal widths. Errors in the table are (measured − predicted) / predicted.
//
// Usage:
//   ComparisonReport r;
//   r.title = "gpipe, 2 actors";
//   r.predicted = sim.trace;  r.measured = trace_step(run.trace, /*step=*/1);
//   r.kinds.push_back({"F", 1.2e-3, 1.25e-3});
//   write_comparison_report(r, "report.html");
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "trace/trace.h"

namespace jaxpp {

struct ReportKindRow {
  std::string kind;  // "F", "B", "send", ...
  double predicted_s = 0;
  double measured_s = 0;
};

struct ComparisonReport {
  std::string title;
  std::vector<std::pair<std::string, std::string>> summary;  // (label, value), in order
  Trace predicted;
  Trace measured;
  std::vector<ReportKindRow> kinds;
  double width_pt = 1000;  // width of the longer timeline's time axis
};

// The events (and memory samples) of step `step` of a trace, shifted so the step starts at 0.
Trace trace_step(const Trace& trace, int step);
// Every time of the trace multiplied by `factor` (e.g. an emulation's time scale).
Trace scale_trace_times(Trace trace, double factor);

// The page. InputError if a timeline cannot be rendered.
std::string comparison_report_html(const ComparisonReport& report);
// comparison_report_html + atomic write; InputError naming the path when it cannot be written.
void write_comparison_report(const ComparisonReport& report, const std::string& path);

}  // namespace jaxpp
