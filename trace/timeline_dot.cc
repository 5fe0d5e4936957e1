#include "trace/timeline_dot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "trace/event_style.h"

namespace jaxpp {
namespace {

constexpr double kPointsPerInch = 72.0;
constexpr double kLabelColumnPt = 100.0;
constexpr double kMinBoxWidthPt = 0.5;
constexpr double kComputeBoxHeightPt = 18.0;
constexpr double kCommStripHeightPt = 6.0;
constexpr double kStreamBoxHeightPt = 14.0;
constexpr double kRowGapPt = 6.0;
constexpr double kCharWidthPt = 4.2;  // Helvetica at 7 pt, roughly

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}
std::string pt(double v) { return fmt("%.2f", v); }
std::string inches(double v_pt) { return fmt("%.4f", v_pt / kPointsPerInch); }

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

struct Lane {
  int actor = 0;
  std::string label;                        // empty: no row label
  std::set<StreamId> streams;               // events on these streams go into this lane
  bool all_but_compute = false;             // default mode's comm strip
  double height_pt = kComputeBoxHeightPt;
  double center_down_pt = 0;                // distance from the top of the picture
};

struct TimeUnit {
  double scale;
  const char* name;
};
TimeUnit unit_for(double span_s) {
  if (span_s >= 1.0) return {1.0, "s"};
  if (span_s >= 1e-3) return {1e3, "ms"};
  return {1e6, "us"};
}

double nice_step(double span) {
  const double raw = span / 8.0;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw * (1 - 1e-9)) return m * mag;
  }
  return 10 * mag;
}

std::string format_time(double t_s, const TimeUnit& u) {
  std::string s = fmt("%.6g", t_s * u.scale);
  return s + " " + u.name;
}

}  // namespace

std::string timeline_to_dot(const Trace& trace, const TimelineOptions& options) {
  double end_s = 0;
  for (const TraceEvent& e : trace.events) end_s = std::max(end_s, e.end_s);
  const double span_s = end_s > 0 ? end_s : 1.0;
  const TimeUnit unit = unit_for(span_s);
  const double width_pt = std::max(options.width_pt, 100.0);
  auto x_of = [&](double t_s) { return kLabelColumnPt + t_s / span_s * width_pt; };

  // Lanes, top to bottom.
  std::map<int, std::set<StreamId>> streams_of_actor;
  for (int r = 0; r < trace.num_actors; ++r) streams_of_actor[r].insert(StreamId{});
  for (const TraceEvent& e : trace.events) streams_of_actor[e.actor].insert(e.stream);
  std::vector<Lane> lanes;
  double down = 60.0;  // below title and legend
  for (const auto& [actor, streams] : streams_of_actor) {
    if (options.per_stream) {
      for (const StreamId& s : streams) {
        Lane lane{actor, "actor " + std::to_string(actor) + " " + to_string(s), {s}, false,
                  kStreamBoxHeightPt, 0};
        lane.center_down_pt = down + lane.height_pt / 2;
        down += lane.height_pt + kRowGapPt / 2;
        lanes.push_back(lane);
      }
      down += kRowGapPt / 2;
      continue;
    }
    Lane compute{actor, "actor " + std::to_string(actor), {StreamId{}}, false,
                 kComputeBoxHeightPt, 0};
    compute.center_down_pt = down + compute.height_pt / 2;
    down += compute.height_pt + 1.0;
    lanes.push_back(compute);
    if (streams.size() > 1) {
      Lane comm{actor, "", {}, true, kCommStripHeightPt, 0};
      comm.center_down_pt = down + comm.height_pt / 2;
      down += comm.height_pt;
      lanes.push_back(comm);
    }
    down += kRowGapPt;
  }
  const double axis_down = down + 4.0;
  const double total_down = axis_down + 24.0;
  auto y_of = [&](double d) { return total_down - d; };  // Graphviz y grows upwards

  std::ostringstream out;
  out << "digraph timeline {\n"
      << "  graph [bgcolor=\"white\", fontname=\"Helvetica\", outputorder=\"nodesfirst\"];\n"
      << "  node [shape=box, style=filled, fixedsize=true, fontname=\"Helvetica\", fontsize=7, "
         "penwidth=0.4, margin=0, label=\"\"];\n";

  // Title.
  std::string title = options.title;
  if (title.empty()) {
    title = (trace.source.empty() ? std::string("trace") : trace.source + " trace") + ", " +
            std::to_string(trace.num_actors) + " actors, " + format_time(end_s, unit);
  }
  out << "  title [shape=plaintext, style=\"\", fixedsize=false, fontsize=12, label="
      << quote(title) << ", pos=\"" << pt(kLabelColumnPt + width_pt / 2) << "," << pt(y_of(14))
      << "!\"];\n";

  // Legend.
  double lx = kLabelColumnPt;
  int li = 0;
  for (EventCategory c : kAllEventCategories) {
    const std::string name(to_string(c));
    out << "  legend" << li << " [width=" << inches(10) << ", height=" << inches(10)
        << ", fillcolor=" << quote(std::string(category_color(c))) << ", pos=\"" << pt(lx + 5)
        << "," << pt(y_of(38)) << "!\"];\n";
    const double label_w = kCharWidthPt * 1.3 * static_cast<double>(name.size()) + 4;
    out << "  legend" << li << "_label [shape=plaintext, style=\"\", fontsize=9, width="
        << inches(label_w) << ", height=" << inches(10) << ", label=" << quote(name)
        << ", pos=\"" << pt(lx + 12 + label_w / 2) << "," << pt(y_of(38)) << "!\"];\n";
    lx += 16 + label_w + 8;
    ++li;
  }

  // Row labels.
  for (size_t i = 0; i < lanes.size(); ++i) {
    if (lanes[i].label.empty()) continue;
    out << "  row" << i << " [shape=plaintext, style=\"\", fontsize=9, width="
        << inches(kLabelColumnPt - 8) << ", height=" << inches(lanes[i].height_pt)
        << ", label=" << quote(lanes[i].label) << ", pos=\"" << pt((kLabelColumnPt - 8) / 2)
        << "," << pt(y_of(lanes[i].center_down_pt)) << "!\"];\n";
  }

  // Event boxes, in trace order.
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    const Lane* lane = nullptr;
    for (const Lane& l : lanes) {
      if (l.actor != e.actor) continue;
      const bool is_compute = e.stream.kind == StreamKind::kCompute;
      if ((l.all_but_compute && !is_compute) || l.streams.count(e.stream)) {
        lane = &l;
        break;
      }
    }
    if (lane == nullptr) continue;
    const double x0 = x_of(e.start_s);
    const double w = std::max(x_of(e.end_s) - x0, kMinBoxWidthPt);
    const std::string name = e.name();
    const bool fits = lane->height_pt >= kStreamBoxHeightPt &&
                      w >= kCharWidthPt * static_cast<double>(name.size()) + 4;
    const std::string tooltip = "actor " + std::to_string(e.actor) + " " + to_string(e.stream) +
                                ": " + name + " [" + format_time(e.start_s, unit) + ", " +
                                format_time(e.end_s, unit) + "]";
    out << "  e" << i << " [width=" << inches(w) << ", height=" << inches(lane->height_pt)
        << ", fillcolor=" << quote(std::string(category_color(category_of(e))))
        << (fits ? ", label=" + quote(name) : std::string()) << ", tooltip=" << quote(tooltip)
        << ", pos=\"" << pt(x0 + w / 2) << "," << pt(y_of(lane->center_down_pt)) << "!\"];\n";
  }

  // Time axis: a thin bar, ticks and their labels.
  out << "  axis [width=" << inches(width_pt) << ", height=" << inches(0.8)
      << ", fillcolor=\"black\", penwidth=0, pos=\"" << pt(kLabelColumnPt + width_pt / 2) << ","
      << pt(y_of(axis_down)) << "!\"];\n";
  const double step = nice_step(span_s);
  for (int k = 0;; ++k) {
    const double t = k * step;
    if (t > span_s * (1 + 1e-9)) break;
    out << "  tick" << k << " [width=" << inches(0.8) << ", height=" << inches(5)
        << ", fillcolor=\"black\", penwidth=0, pos=\"" << pt(x_of(t)) << ","
        << pt(y_of(axis_down + 2.5)) << "!\"];\n";
    out << "  tick" << k << "_label [shape=plaintext, style=\"\", fontsize=8, width="
        << inches(40) << ", height=" << inches(10) << ", label=" << quote(format_time(t, unit))
        << ", pos=\"" << pt(x_of(t)) << "," << pt(y_of(axis_down + 13)) << "!\"];\n";
  }
  out << "}\n";
  return out.str();
}

}  // namespace jaxpp
