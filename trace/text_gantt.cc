#include "trace/text_gantt.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "trace/event_style.h"

namespace jaxpp {
namespace {

constexpr int kNumCategories = static_cast<int>(kAllEventCategories.size());
constexpr double kZeroDurationWeight = 1e-12;  // instantaneous events still mark their cell
constexpr double kColumnEpsilon = 1e-9;        // in columns: boundaries are not split by rounding

using Overlap = std::vector<std::array<double, kNumCategories>>;  // [column][category]

struct Row {
  std::string label;
  Overlap primary;    // compute stream (or the row's stream with per_stream)
  Overlap secondary;  // other streams (default mode only)
};

std::string format_time(double t_s, double span_s) {
  double scale = 1.0;
  const char* name = "s";
  if (span_s < 1e-3) {
    scale = 1e6;
    name = "us";
  } else if (span_s < 1.0) {
    scale = 1e3;
    name = "ms";
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.4g %s", t_s * scale, name);
  return buf;
}

void add(Overlap& overlap, const TraceEvent& e, double col_s) {
  const int width = static_cast<int>(overlap.size());
  const int cat = static_cast<int>(category_of(e));
  const int first = std::clamp(static_cast<int>(std::floor(e.start_s / col_s + kColumnEpsilon)), 0, width - 1);
  if (e.end_s <= e.start_s) {
    overlap[first][cat] += kZeroDurationWeight;
    return;
  }
  const int last = std::clamp(static_cast<int>(std::ceil(e.end_s / col_s - kColumnEpsilon)) - 1, first, width - 1);
  for (int c = first; c <= last; ++c) {
    const double lo = std::max(e.start_s, c * col_s);
    const double hi = std::min(e.end_s, (c + 1) * col_s);
    if (hi > lo) overlap[c][cat] += hi - lo;
  }
}

char cell(const std::array<double, kNumCategories>& o) {
  int best = -1;
  for (int k = 0; k < kNumCategories; ++k) {
    if (o[k] > 0 && (best < 0 || o[k] > o[best])) best = k;
  }
  return best < 0 ? '\0' : category_char(kAllEventCategories[best]);
}

}  // namespace

std::string text_gantt(const Trace& trace, const GanttOptions& options) {
  const int width = std::max(options.width, 10);
  double end_s = 0;
  for (const TraceEvent& e : trace.events) end_s = std::max(end_s, e.end_s);
  const double span_s = end_s > 0 ? end_s : 1.0;
  const double col_s = span_s / width;

  // Rows in (actor, stream) order.
  std::map<std::pair<int, StreamId>, Row> rows;
  auto row_for = [&](int actor, const StreamId& s) -> Row& {
    auto [it, inserted] = rows.try_emplace({actor, s});
    if (inserted) {
      std::string label = "actor ";
      label += std::to_string(actor);
      if (options.per_stream) label.append(" ").append(to_string(s));
      it->second.label = std::move(label);
      it->second.primary.assign(width, {});
      it->second.secondary.assign(width, {});
    }
    return it->second;
  };
  for (int r = 0; r < trace.num_actors; ++r) row_for(r, StreamId{});
  for (const TraceEvent& e : trace.events) {
    if (options.per_stream) {
      add(row_for(e.actor, e.stream).primary, e, col_s);
    } else if (e.stream.kind == StreamKind::kCompute) {
      add(row_for(e.actor, StreamId{}).primary, e, col_s);
    } else {
      add(row_for(e.actor, StreamId{}).secondary, e, col_s);
    }
  }

  size_t label_width = 0;
  for (const auto& [key, row] : rows) label_width = std::max(label_width, row.label.size());

  std::ostringstream out;
  out << "0 .. " << format_time(end_s, span_s) << ", " << width << " columns of "
      << format_time(col_s, span_s) << "\n";
  for (const auto& [key, row] : rows) {
    out << row.label << std::string(label_width - row.label.size(), ' ') << " |";
    for (int c = 0; c < width; ++c) {
      char ch = cell(row.primary[c]);
      if (ch == '\0') ch = cell(row.secondary[c]);
      out << (ch == '\0' ? '.' : ch);
    }
    out << "|\n";
  }

  // Axis: '+' every 10 columns, labels under the ticks when they fit.
  const std::string pad(label_width + 1, ' ');
  std::string ticks(width + 1, '-');
  std::string labels;
  for (int c = 0; c <= width; c += 10) {
    ticks[c] = '+';
    const std::string text = format_time(c * col_s, span_s);
    if (static_cast<int>(labels.size()) <= c) {
      labels += std::string(c - labels.size(), ' ') + text + " ";
    }
  }
  out << pad << ticks << "\n" << pad << labels.substr(0, labels.find_last_not_of(' ') + 1) << "\n";
  out << "F forward  B backward  I backward-input  W backward-weight  - send/recv  A allreduce  "
         "O optimizer  . idle\n";
  return out.str();
}

}  // namespace jaxpp
