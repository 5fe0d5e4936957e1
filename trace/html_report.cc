#include "trace/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "graph/json_util.h"
#include "trace/graphviz_render.h"
#include "trace/timeline_dot.h"

namespace jaxpp {
namespace {

std::string escape_html(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

double end_of(const Trace& t) {
  double end = 0;
  for (const TraceEvent& e : t.events) end = std::max(end, e.end_s);
  return end;
}

// The <svg> element of a rendered timeline (the XML prologue and doctype dropped).
std::string timeline_svg(const Trace& trace, double width_pt, const std::string& title) {
  TimelineOptions o;
  o.width_pt = width_pt;
  o.title = title;
  const std::string svg = render_dot(timeline_to_dot(trace, o), "svg", kTimelineLayoutEngine);
  const size_t begin = svg.find("<svg");
  return begin == std::string::npos ? svg : svg.substr(begin);
}

std::string seconds_text(double s) {
  char buf[32];
  if (s >= 1)
    std::snprintf(buf, sizeof buf, "%.4f s", s);
  else if (s >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.4f ms", s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.3f us", s * 1e6);
  return buf;
}

}  // namespace

Trace trace_step(const Trace& trace, int step) {
  Trace out;
  out.source = trace.source;
  out.num_actors = trace.num_actors;
  out.num_steps = 1;
  double begin = 1e300, end = 0;
  for (const TraceEvent& e : trace.events) {
    if (e.step != step) continue;
    begin = std::min(begin, e.start_s);
    end = std::max(end, e.end_s);
    out.events.push_back(e);
  }
  if (out.events.empty()) return out;
  for (TraceEvent& e : out.events) {
    e.start_s -= begin;
    e.end_s -= begin;
    e.step = 0;
  }
  for (const MemorySample& m : trace.memory)
    if (m.time_s >= begin && m.time_s <= end)
      out.memory.push_back({m.actor, m.time_s - begin, m.bytes});
  return out;
}

Trace scale_trace_times(Trace trace, double factor) {
  for (TraceEvent& e : trace.events) {
    e.start_s *= factor;
    e.end_s *= factor;
  }
  for (MemorySample& m : trace.memory) m.time_s *= factor;
  return trace;
}

std::string comparison_report_html(const ComparisonReport& r) {
  const double predicted_end = end_of(r.predicted), measured_end = end_of(r.measured);
  const double longest = std::max({predicted_end, measured_end, 1e-12});
  auto width = [&](double end) { return std::max(100.0, r.width_pt * end / longest); };

  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>"
       << escape_html(r.title) << "</title>\n<style>\n"
       << "body{font-family:Helvetica,Arial,sans-serif;margin:24px;color:#222}\n"
       << "table{border-collapse:collapse;margin:8px 0 24px}\n"
       << "td,th{border:1px solid #ccc;padding:3px 10px;text-align:right}\n"
       << "th{background:#f2f2f2}td:first-child,th:first-child{text-align:left}\n"
       << ".timeline{overflow-x:auto;margin-bottom:16px}\n"
       << ".pos{color:#a33}.neg{color:#337}\n</style>\n</head>\n<body>\n";
  html << "<h1>" << escape_html(r.title) << "</h1>\n<table>\n";
  for (const auto& [label, value] : r.summary)
    html << "<tr><td>" << escape_html(label) << "</td><td>" << escape_html(value) << "</td></tr>\n";
  html << "</table>\n";

  html << "<h2>Per-kind durations (mean per instruction)</h2>\n<table>\n"
       << "<tr><th>kind</th><th>predicted</th><th>measured</th><th>error</th></tr>\n";
  for (const ReportKindRow& k : r.kinds) {
    html << "<tr><td>" << escape_html(k.kind) << "</td><td>" << seconds_text(k.predicted_s)
         << "</td><td>" << seconds_text(k.measured_s) << "</td>";
    if (k.predicted_s > 0) {
      const double err = (k.measured_s - k.predicted_s) / k.predicted_s;
      char buf[32];
      std::snprintf(buf, sizeof buf, "%+.1f%%", 100 * err);
      html << "<td class=\"" << (err >= 0 ? "pos" : "neg") << "\">" << buf << "</td>";
    } else {
      html << "<td>n/a</td>";  // nothing predicted
    }
    html << "</tr>\n";
  }
  html << "</table>\n";

  html << "<h2>Predicted timeline</h2>\n<div class=\"timeline\">\n"
       << timeline_svg(r.predicted, width(predicted_end),
                       "predicted, step " + seconds_text(predicted_end))
       << "\n</div>\n<h2>Measured timeline</h2>\n<div class=\"timeline\">\n"
       << timeline_svg(r.measured, width(measured_end),
                       "measured, step " + seconds_text(measured_end))
       << "\n</div>\n</body>\n</html>\n";
  return html.str();
}

void write_comparison_report(const ComparisonReport& report, const std::string& path) {
  write_text_file_atomic(path, comparison_report_html(report));
}

}  // namespace jaxpp
