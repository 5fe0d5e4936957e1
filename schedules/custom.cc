#include "schedules/custom.h"

#include <algorithm>
#include <cctype>

#include "graph/error.h"
#include "graph/input_file.h"
#include "graph/json_util.h"
#include "graph/limits.h"
#include "schedules/rule_schedule.h"

namespace jaxpp {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string trim(std::string_view s) {
  size_t b = 0;
  size_t e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// Parses "<stage><kind><microbatch>", e.g. "0F3". False on any deviation.
bool parse_csv_action(std::string_view cell, TaskRef* out) {
  size_t i = 0;
  auto number = [&](int* value) {
    const size_t begin = i;
    long long v = 0;
    while (i < cell.size() && std::isdigit(static_cast<unsigned char>(cell[i]))) {
      v = v * 10 + (cell[i] - '0');
      if (v > 1'000'000'000) return false;
      ++i;
    }
    *value = static_cast<int>(v);
    return i > begin;
  };
  if (!number(&out->stage)) return false;
  if (i >= cell.size()) return false;
  const auto kind = parse_task_kind(cell[i]);
  if (!kind) return false;
  out->kind = *kind;
  ++i;
  if (!number(&out->microbatch)) return false;
  return i == cell.size();
}

std::string csv_action(const TaskRef& t) {
  return std::to_string(t.stage) + std::string(to_string(t.kind)) + std::to_string(t.microbatch);
}

}  // namespace

std::string_view to_string(ScheduleFileFormat f) {
  switch (f) {
    case ScheduleFileFormat::kJson:
      return "json";
    case ScheduleFileFormat::kCsv:
      return "csv";
  }
  return "?";
}

ScheduleFileFormat detect_schedule_format(const std::string& path, std::string_view content) {
  const std::string p = lower(path);
  if (ends_with(p, ".json")) return ScheduleFileFormat::kJson;
  if (ends_with(p, ".csv")) return ScheduleFileFormat::kCsv;
  const std::string t = trim(content);
  return !t.empty() && t[0] == '{' ? ScheduleFileFormat::kJson : ScheduleFileFormat::kCsv;
}

Schedule parse_schedule_csv(std::string_view text, const std::string& where) {
  std::vector<std::vector<ScheduleItem>> actors;
  int max_stage = -1;
  int max_microbatch = -1;
  size_t line_begin = 0;
  int line_no = 0;
  while (line_begin < text.size()) {
    size_t line_end = text.find('\n', line_begin);
    if (line_end == std::string_view::npos) line_end = text.size();
    std::string_view line = text.substr(line_begin, line_end - line_begin);
    line_begin = line_end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const int actor = static_cast<int>(actors.size());
    const std::string line_where =
        where + ": line " + std::to_string(line_no) + " (actor " + std::to_string(actor) + ")";
    std::vector<ScheduleItem> items;
    size_t cell_begin = 0;
    int cell_no = 0;
    while (true) {
      size_t comma = line.find(',', cell_begin);
      const std::string cell =
          trim(line.substr(cell_begin, comma == std::string_view::npos ? std::string_view::npos
                                                                       : comma - cell_begin));
      if (!cell.empty()) {
        ScheduleItem item;
        size_t part_begin = 0;
        while (true) {
          const size_t plus = cell.find('+', part_begin);
          const std::string part = cell.substr(
              part_begin, plus == std::string::npos ? std::string::npos : plus - part_begin);
          TaskRef t;
          if (!parse_csv_action(part, &t)) {
            throw_input_error(line_where + ", cell " + std::to_string(cell_no),
                              "bad action '" + part +
                                  "' (expected <stage><F|I|W|B><microbatch>, e.g. 0F3; only the "
                                  "compute_only dialect is supported)");
          }
          max_stage = std::max(max_stage, t.stage);
          max_microbatch = std::max(max_microbatch, t.microbatch);
          item.push_back(t);
          if (plus == std::string::npos) break;
          part_begin = plus + 1;
        }
        items.push_back(std::move(item));
      }
      if (comma == std::string_view::npos) break;
      cell_begin = comma + 1;
      ++cell_no;
    }
    actors.push_back(std::move(items));
  }
  // A trailing newline ends the last row; it does not start an empty one. Drop trailing empty
  // rows only (an empty row in the middle is an idle actor, reported by the placement check).
  while (!actors.empty() && actors.back().empty()) actors.pop_back();
  if (actors.empty()) throw_input_error(where, "no actions: expected one CSV row per actor");
  Schedule s;
  s.name = "custom";
  s.num_stages = max_stage + 1;
  s.num_microbatches = max_microbatch + 1;
  check_pipeline_size(s.num_stages, s.num_microbatches, where);
  s.placement = infer_placement(s.num_stages, static_cast<int>(actors.size()), actors, where);
  s.actors = std::move(actors);
  s.split_backward = infer_split_backward(s.num_stages, s.actors);
  return s;
}

std::string schedule_to_csv(const Schedule& schedule) {
  std::string out;
  for (const auto& items : schedule.actors) {
    std::string row;
    for (const ScheduleItem& item : items) {
      for (const TaskRef& t : item) {
        if (!row.empty()) row += ',';
        row += csv_action(t);
      }
    }
    out += row + "\n";
  }
  return out;
}

Schedule parse_schedule_json(std::string_view text, const std::string& where) {
  return custom_schedule_from_json(parse_json_text(std::string(text), where), where);
}

Schedule custom_schedule_from_json(const nlohmann::json& j, const std::string& where) {
  // A plan file (simulator/plan_check.h is_plan_document's test) where a schedule goes: say so,
  // rather than refuse its first plan field as unknown.
  if (j.is_object() && (j.contains("config") || j.contains("program") ||
                        (j.contains("format") && j["format"] == "jaxpp-sim-plan")))
    throw_input_error(where, "is a jaxpp-sim plan, not a schedule file: give it where a plan goes "
                             "(run PLAN, validate PLAN, export --plan PLAN, synthesize --plan "
                             "PLAN)");
  if (j.is_object() && j.contains("rules")) {
    if (j.contains("actors")) {
      throw_input_error(where, "give either 'actors' (explicit orders) or 'rules', not both");
    }
    return expand_rule_schedule(rule_schedule_from_json(j, where), where);
  }
  return schedule_from_json(j, where);
}

std::string schedule_to_json_text(const Schedule& schedule) {
  const nlohmann::json j = schedule_to_json(schedule);
  // One actor per line keeps files readable and diffable.
  std::string out = "{\n";
  out += "  \"schedule\": " + j["schedule"].dump() + ",\n";
  out += "  \"num_stages\": " + j["num_stages"].dump() + ",\n";
  out += "  \"num_microbatches\": " + j["num_microbatches"].dump() + ",\n";
  out += "  \"placement\": " + j["placement"].dump() + ",\n";
  out += "  \"actors\": [\n";
  for (size_t r = 0; r < j["actors"].size(); ++r) {
    out += "    " + j["actors"][r].dump() + (r + 1 < j["actors"].size() ? ",\n" : "\n");
  }
  out += "  ]\n}\n";
  return out;
}

Schedule load_schedule_file(const std::string& path) {
  // Read once: the format is told from the text, and the path is not opened a second time.
  const std::string text = read_input_text(path);
  if (detect_schedule_format(path, text) == ScheduleFileFormat::kCsv) {
    return parse_schedule_csv(text, path);
  }
  return parse_schedule_json(text, path);
}

void save_schedule_file(const Schedule& schedule, const std::string& path) {
  const bool csv = ends_with(lower(path), ".csv");
  write_text_file_atomic(path, csv ? schedule_to_csv(schedule) : schedule_to_json_text(schedule));
}

}  // namespace jaxpp
