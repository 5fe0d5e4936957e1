// Compute tasks of a pipeline: F, B, I, W of one (stage, microbatch).
//
//   F  forward (the loss lives in the last stage's F)
//   B  full backward (= I + W)
//   I  backward for inputs (activation gradient)
//   W  backward for weights
// Text form: "<kind><microbatch>@s<stage>", e.g. "F3@s2"; fused groups join tokens with '+'.
#pragma once

#include <array>
#include <compare>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jaxpp {

enum class TaskKind { kF = 0, kB = 1, kI = 2, kW = 3 };
inline constexpr std::array kAllTaskKinds = {TaskKind::kF, TaskKind::kB, TaskKind::kI,
                                             TaskKind::kW};
std::string_view to_string(TaskKind k);  // "F", "B", "I", "W"
std::optional<TaskKind> parse_task_kind(char c);

struct TaskRef {
  TaskKind kind = TaskKind::kF;
  int stage = 0;
  int microbatch = 0;
  auto operator<=>(const TaskRef&) const = default;
};

std::string to_string(const TaskRef& t);  // "F3@s2"
std::optional<TaskRef> parse_task_ref(std::string_view token);
std::string to_string(const std::vector<TaskRef>& fused);  // "F0@s3+B0@s3"
// Inverse of the above: one or more task tokens joined by '+'; nullopt if any token is malformed.
std::optional<std::vector<TaskRef>> parse_fused_tasks(std::string_view text);

}  // namespace jaxpp
