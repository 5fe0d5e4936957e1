#include "graph/task.h"

#include <charconv>

namespace jaxpp {
namespace {

// Parses a non-negative decimal int from the front of `s`, advancing it. False on failure.
bool consume_int(std::string_view& s, int& out) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || out < 0) return false;
  s.remove_prefix(static_cast<size_t>(ptr - s.data()));
  return true;
}

}  // namespace

std::string_view to_string(TaskKind k) {
  switch (k) {
    case TaskKind::kF:
      return "F";
    case TaskKind::kB:
      return "B";
    case TaskKind::kI:
      return "I";
    case TaskKind::kW:
      return "W";
  }
  return "?";
}

std::optional<TaskKind> parse_task_kind(char c) {
  switch (c) {
    case 'F':
      return TaskKind::kF;
    case 'B':
      return TaskKind::kB;
    case 'I':
      return TaskKind::kI;
    case 'W':
      return TaskKind::kW;
    default:
      return std::nullopt;
  }
}

std::string to_string(const TaskRef& t) {
  std::string out(to_string(t.kind));
  out.append(std::to_string(t.microbatch)).append("@s").append(std::to_string(t.stage));
  return out;
}

std::optional<TaskRef> parse_task_ref(std::string_view token) {
  if (token.empty()) return std::nullopt;
  const auto kind = parse_task_kind(token[0]);
  if (!kind) return std::nullopt;
  token.remove_prefix(1);
  TaskRef t;
  t.kind = *kind;
  if (!consume_int(token, t.microbatch)) return std::nullopt;
  if (token.substr(0, 2) != "@s") return std::nullopt;
  token.remove_prefix(2);
  if (!consume_int(token, t.stage)) return std::nullopt;
  if (!token.empty()) return std::nullopt;
  return t;
}

std::string to_string(const std::vector<TaskRef>& fused) {
  std::string out;
  for (const TaskRef& t : fused) {
    if (!out.empty()) out += '+';
    out += to_string(t);
  }
  return out;
}

std::optional<std::vector<TaskRef>> parse_fused_tasks(std::string_view text) {
  std::vector<TaskRef> tasks;
  while (true) {
    const size_t plus = text.find('+');
    const auto t = parse_task_ref(text.substr(0, plus));
    if (!t) return std::nullopt;
    tasks.push_back(*t);
    if (plus == std::string_view::npos) break;
    text.remove_prefix(plus + 1);
  }
  return tasks;
}

}  // namespace jaxpp
