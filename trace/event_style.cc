#include "trace/event_style.h"

namespace jaxpp {

std::string_view to_string(EventCategory c) {
  switch (c) {
    case EventCategory::kForward: return "F";
    case EventCategory::kBackward: return "B";
    case EventCategory::kBackwardInput: return "I";
    case EventCategory::kBackwardWeight: return "W";
    case EventCategory::kComm: return "comm";
    case EventCategory::kAllReduce: return "allreduce";
    case EventCategory::kOptimizer: return "optimizer";
  }
  return "?";
}

EventCategory category_of(const TraceEvent& e) {
  switch (e.op) {
    case OpKind::kSend:
    case OpKind::kRecv: return EventCategory::kComm;
    case OpKind::kAllReduce:
    case OpKind::kAllGather: return EventCategory::kAllReduce;
    case OpKind::kOptimizer: return EventCategory::kOptimizer;
    case OpKind::kCompute: break;
  }
  if (e.stream.kind == StreamKind::kAllToAll) return EventCategory::kComm;
  if (e.tasks.empty()) return EventCategory::kForward;
  switch (e.tasks.front().kind) {
    case TaskKind::kF: return EventCategory::kForward;
    case TaskKind::kB: return EventCategory::kBackward;
    case TaskKind::kI: return EventCategory::kBackwardInput;
    case TaskKind::kW: return EventCategory::kBackwardWeight;
  }
  return EventCategory::kForward;
}

std::string_view category_color(EventCategory c) {
  switch (c) {
    case EventCategory::kForward: return "#4e79a7";
    case EventCategory::kBackward: return "#59a14f";
    case EventCategory::kBackwardInput: return "#76b7b2";
    case EventCategory::kBackwardWeight: return "#edc948";
    case EventCategory::kComm: return "#bab0ac";
    case EventCategory::kAllReduce: return "#f28e2b";
    case EventCategory::kOptimizer: return "#e15759";
  }
  return "#000000";
}

std::string_view category_chrome_cname(EventCategory c) {
  switch (c) {
    case EventCategory::kForward: return "thread_state_runnable";
    case EventCategory::kBackward: return "thread_state_running";
    case EventCategory::kBackwardInput: return "good";
    case EventCategory::kBackwardWeight: return "yellow";
    case EventCategory::kComm: return "grey";
    case EventCategory::kAllReduce: return "thread_state_iowait";
    case EventCategory::kOptimizer: return "terrible";
  }
  return "generic_work";
}

char category_char(EventCategory c) {
  switch (c) {
    case EventCategory::kForward: return 'F';
    case EventCategory::kBackward: return 'B';
    case EventCategory::kBackwardInput: return 'I';
    case EventCategory::kBackwardWeight: return 'W';
    case EventCategory::kComm: return '-';
    case EventCategory::kAllReduce: return 'A';
    case EventCategory::kOptimizer: return 'O';
  }
  return '?';
}

}  // namespace jaxpp
