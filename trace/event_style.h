// EventCategory: how every trace writer groups and colours events.
//
// One small table shared by the Chrome/Perfetto writer, the Graphviz timeline and the text Gantt,
// so a forward pass is the same blue (and the same letter 'F') everywhere:
//   F forward · B full backward · I backward for inputs · W backward for weights ·
//   comm (send/recv) · allreduce (data-parallel gradient reduction) · optimizer
// A fused compute group takes the category of its first task.
//
// Usage:
//   EventCategory c = category_of(event);
//   std::string fill = std::string(category_color(c));   // "#4e79a7"
#pragma once

#include <array>
#include <string_view>

#include "trace/trace.h"

namespace jaxpp {

enum class EventCategory { kForward, kBackward, kBackwardInput, kBackwardWeight, kComm,
                           kAllReduce, kOptimizer };
inline constexpr std::array kAllEventCategories = {
    EventCategory::kForward,    EventCategory::kBackward,  EventCategory::kBackwardInput,
    EventCategory::kBackwardWeight, EventCategory::kComm, EventCategory::kAllReduce,
    EventCategory::kOptimizer};

// "F", "B", "I", "W", "comm", "allreduce", "optimizer"
std::string_view to_string(EventCategory c);
EventCategory category_of(const TraceEvent& e);
// Fill colour for Graphviz/SVG ("#rrggbb"), colour-blind friendly (Tableau 10).
std::string_view category_color(EventCategory c);
// One of the reserved Chrome trace-viewer colour names ("cname").
std::string_view category_chrome_cname(EventCategory c);
// The character of the text Gantt: 'F', 'B', 'I', 'W', '-', 'A', 'O'.
char category_char(EventCategory c);

}  // namespace jaxpp
