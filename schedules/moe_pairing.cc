#include "schedules/moe_pairing.h"

#include "schedules/validate.h"

namespace jaxpp {
namespace {

bool only_backward(const ScheduleItem& item) {
  for (const TaskRef& t : item)
    if (t.kind == TaskKind::kF) return false;
  for (const TaskRef& t : item)
    if (t.kind == TaskKind::kB || t.kind == TaskKind::kI) return true;
  return false;  // W alone carries no all-to-all
}

bool only_forward(const ScheduleItem& item) {
  for (const TaskRef& t : item)
    if (t.kind != TaskKind::kF) return false;
  return !item.empty();
}

bool share_microbatch(const ScheduleItem& a, const ScheduleItem& b) {
  for (const TaskRef& x : a)
    for (const TaskRef& y : b)
      if (x.stage == y.stage && x.microbatch == y.microbatch) return true;
  return false;
}

bool pairs(const ScheduleItem& backward, const ScheduleItem& forward) {
  return only_backward(backward) && only_forward(forward) && !share_microbatch(backward, forward);
}

}  // namespace

int count_backward_forward_pairs(const Schedule& schedule) {
  int count = 0;
  for (const auto& items : schedule.actors)
    for (size_t i = 0; i + 1 < items.size(); ++i)
      if (pairs(items[i], items[i + 1])) {
        ++count;
        ++i;
      }
  return count;
}

Schedule pair_backward_forward(const Schedule& schedule, const std::string& where) {
  Schedule out = schedule;
  for (auto& items : out.actors) {
    std::vector<ScheduleItem> paired;
    paired.reserve(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      if (i + 1 < items.size() && pairs(items[i], items[i + 1])) {
        ScheduleItem group = items[i];
        group.insert(group.end(), items[i + 1].begin(), items[i + 1].end());
        paired.push_back(std::move(group));
        ++i;
        continue;
      }
      paired.push_back(items[i]);
    }
    items = std::move(paired);
  }
  validate_or_throw(out, where);
  return out;
}

}  // namespace jaxpp
