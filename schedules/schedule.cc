#include "schedules/schedule.h"

#include <algorithm>
#include <map>

#include "graph/error.h"
#include "graph/json_util.h"
#include "graph/limits.h"

namespace jaxpp {
namespace {

std::string short_token(const TaskRef& t) {
  return std::string(to_string(t.kind)) + std::to_string(t.microbatch);
}

}  // namespace

Placement infer_placement(int num_stages, int num_actors,
                          const std::vector<std::vector<ScheduleItem>>& actors,
                          const std::string& where) {
  std::vector<int> stage_to_actor(num_stages, -1);
  std::vector<std::string> first_seen(num_stages);
  for (int r = 0; r < num_actors; ++r) {
    for (size_t i = 0; i < actors[r].size(); ++i) {
      for (const TaskRef& t : actors[r][i]) {
        if (t.stage < 0 || t.stage >= num_stages) continue;  // reported by the validator
        const std::string here = "actor " + std::to_string(r) + " position " + std::to_string(i);
        if (stage_to_actor[t.stage] == -1) {
          stage_to_actor[t.stage] = r;
          first_seen[t.stage] = here;
        } else if (stage_to_actor[t.stage] != r) {
          throw_input_error(where, "stage " + std::to_string(t.stage) + " appears on two actors (" +
                                       first_seen[t.stage] + " and " + here + ", task " +
                                       to_string(t) + "); a stage must live on one actor");
        }
      }
    }
  }
  for (int s = 0; s < num_stages; ++s) {
    if (stage_to_actor[s] == -1) {
      throw_input_error(where, "stage " + std::to_string(s) + " has no task on any actor");
    }
  }
  std::vector<bool> busy(num_actors, false);
  for (int a : stage_to_actor) busy[a] = true;
  for (int r = 0; r < num_actors; ++r)
    if (!busy[r])
      throw_input_error(where, "actor " + std::to_string(r) +
                                   " runs no task of any stage (an empty actor list or CSV "
                                   "line; every actor holds at least one stage)");
  for (PlacementKind kind : {PlacementKind::kLinear, PlacementKind::kLoop, PlacementKind::kV}) {
    try {
      Placement p = make_placement(kind, num_stages, num_actors);
      if (p.stage_to_actor == stage_to_actor) return p;
    } catch (const InputError&) {
      // shape does not fit this kind; try the next one
    }
  }
  return explicit_placement(stage_to_actor, num_actors);
}

int64_t Schedule::num_tasks() const {
  int64_t n = 0;
  for (const auto& items : actors) {
    for (const ScheduleItem& item : items) n += static_cast<int64_t>(item.size());
  }
  return n;
}

std::string item_to_string(const ScheduleItem& item) { return to_string(item); }

std::string item_to_text(const ScheduleItem& item, bool short_form) {
  std::string out;
  for (const TaskRef& t : item) {
    if (!out.empty()) out += '+';
    out += short_form ? short_token(t) : to_string(t);
  }
  return item.size() > 1 ? "[" + out + "]" : out;
}

bool uses_short_form(const Schedule& schedule) {
  if (schedule.placement.num_actors != schedule.num_actors()) return false;
  for (int r = 0; r < schedule.num_actors(); ++r) {
    if (schedule.placement.stages_of(r).size() != 1) return false;
  }
  return true;
}

std::string actor_to_text(const Schedule& schedule, int actor) {
  const bool short_form = uses_short_form(schedule);
  std::string line;
  for (const ScheduleItem& item : schedule.actors[actor]) {
    if (!line.empty()) line += ' ';
    line += item_to_text(item, short_form);
  }
  return line;
}

std::string to_text(const Schedule& schedule) {
  std::string out;
  for (int r = 0; r < schedule.num_actors(); ++r) {
    out += "actor" + std::to_string(r) + ": " + actor_to_text(schedule, r) + "\n";
  }
  return out;
}

nlohmann::json schedule_to_json(const Schedule& schedule) {
  nlohmann::json actors = nlohmann::json::array();
  for (const auto& items : schedule.actors) {
    nlohmann::json list = nlohmann::json::array();
    for (const ScheduleItem& item : items) list.push_back(item_to_string(item));
    actors.push_back(std::move(list));
  }
  return {{"schedule", schedule.name},
          {"num_stages", schedule.num_stages},
          {"num_microbatches", schedule.num_microbatches},
          {"placement", placement_to_json(schedule.placement)},
          {"actors", std::move(actors)}};
}

ScheduleItem parse_item(const std::string& text, const std::string& where) {
  ScheduleItem item;
  size_t begin = 0;
  while (true) {
    const size_t plus = text.find('+', begin);
    const std::string token =
        text.substr(begin, plus == std::string::npos ? std::string::npos : plus - begin);
    const auto t = parse_task_ref(token);
    if (!t) {
      throw_input_error(where, "bad task token '" + token +
                                   "' (expected <F|B|I|W><microbatch>@s<stage>, e.g. F3@s2; "
                                   "fused groups joined by '+')");
    }
    item.push_back(*t);
    if (plus == std::string::npos) break;
    begin = plus + 1;
  }
  return item;
}

std::vector<bool> infer_split_backward(int num_stages,
                                       const std::vector<std::vector<ScheduleItem>>& actors) {
  std::vector<bool> split(num_stages, false);
  for (const auto& items : actors) {
    for (const ScheduleItem& item : items) {
      for (const TaskRef& t : item) {
        if ((t.kind == TaskKind::kI || t.kind == TaskKind::kW) && t.stage >= 0 &&
            t.stage < num_stages) {
          split[t.stage] = true;
        }
      }
    }
  }
  return split;
}

Schedule schedule_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw_input_error(where, "expected a JSON object with an 'actors' list");
  JsonObject obj(j, where);
  obj.reject_unknown({"schedule", "num_stages", "num_microbatches", "placement", "actors",
                      "num_actors", "format"});
  Schedule s;
  s.name = obj.single_line_string_or("schedule", "custom", "it is printed in reports and plans");
  const nlohmann::json& actors = obj.array("actors");
  if (actors.empty()) throw_input_error(obj.field("actors"), "expected at least one actor");
  int max_stage = -1;
  int max_microbatch = -1;
  for (size_t r = 0; r < actors.size(); ++r) {
    const std::string actor_where = obj.field("actors") + ": actor " + std::to_string(r);
    if (!actors[r].is_array()) throw_input_error(actor_where, "expected a list of task strings");
    std::vector<ScheduleItem> items;
    for (size_t i = 0; i < actors[r].size(); ++i) {
      const std::string pos_where = actor_where + ", position " + std::to_string(i);
      if (!actors[r][i].is_string()) {
        throw_input_error(pos_where,
                          "expected a task string such as \"F3@s2\", got " + actors[r][i].dump());
      }
      ScheduleItem item = parse_item(actors[r][i].get<std::string>(), pos_where);
      for (const TaskRef& t : item) {
        max_stage = std::max(max_stage, t.stage);
        max_microbatch = std::max(max_microbatch, t.microbatch);
      }
      items.push_back(std::move(item));
    }
    s.actors.push_back(std::move(items));
  }
  const int num_actors = static_cast<int>(s.actors.size());
  if (obj.has("num_actors") && obj.positive_int("num_actors") != num_actors) {
    throw_input_error(obj.field("num_actors"),
                      "says " + std::to_string(obj.positive_int("num_actors")) +
                          " but 'actors' has " + std::to_string(num_actors) + " lists");
  }
  check_pipeline_size(int64_t{max_stage} + 1, int64_t{max_microbatch} + 1, where);
  s.num_stages = obj.positive_int_or("num_stages", max_stage + 1);
  s.num_microbatches = obj.positive_int_or("num_microbatches", max_microbatch + 1);
  if (s.num_stages <= 0) throw_input_error(where, "the schedule has no task");
  check_pipeline_size(s.num_stages, s.num_microbatches, where);
  if (obj.has("placement")) {
    s.placement = placement_from_json(obj.at("placement"), obj.field("placement"));
    if (s.placement.num_actors != num_actors) {
      throw_input_error(obj.field("placement"), "has " + std::to_string(s.placement.num_actors) +
                                                    " actors but 'actors' has " +
                                                    std::to_string(num_actors) + " lists");
    }
    if (s.placement.num_stages() != s.num_stages) {
      throw_input_error(obj.field("placement"), "has " + std::to_string(s.placement.num_stages()) +
                                                    " stages but the schedule has " +
                                                    std::to_string(s.num_stages));
    }
  } else {
    s.placement = infer_placement(s.num_stages, num_actors, s.actors, where);
  }
  s.split_backward = infer_split_backward(s.num_stages, s.actors);
  return s;
}

}  // namespace jaxpp
