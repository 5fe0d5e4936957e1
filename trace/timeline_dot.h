// Graphviz timeline of a Trace: DOT text with pinned node positions, for the "nop" engine
// (the library equivalent of `neato -n`), rendered to SVG/PNG by render_dot().
//
// Picture (time runs left to right, x in points = label column + time / end time * width_pt):
//   title
//   legend: one coloured box per category (F, B, I, W, comm, allreduce, optimizer)
//   one row per actor: its compute stream as boxes of height 18 pt, and a thin strip below it for
//     the actor's communication streams (send, recv, collective); with per_stream, one row per
//     (actor, stream) instead
//   a time axis under the rows with "nice" ticks (1, 2, 5 x 10^k) labelled in s, ms or us
// Every box is width = duration (at least 0.5 pt), filled with category_color(), labelled with
// TraceEvent::name() when the name fits, and carries the name and times as a tooltip (SVG).
// The text is deterministic (fixed decimals, trace order), so golden tests can pin it.
//
// Usage:
//   std::string dot = timeline_to_dot(trace, {.width_pt = 1200});
//   std::string svg = render_dot(dot, "svg", "nop");
#pragma once

#include <string>

#include "trace/trace.h"

namespace jaxpp {

struct TimelineOptions {
  bool per_stream = false;   // one row per (actor, stream) instead of per actor
  double width_pt = 1000;    // width of the time axis, in points (1/72 inch)
  std::string title;         // empty: "<source> trace, <n> actors, <end time>"
};

std::string timeline_to_dot(const Trace& trace, const TimelineOptions& options);

// Layout engine to pass to render_dot() for timeline_to_dot() output.
inline constexpr const char* kTimelineLayoutEngine = "nop";

}  // namespace jaxpp
