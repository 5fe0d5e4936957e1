#include "graph/placement.h"

#include <algorithm>
#include <cctype>

#include "graph/error.h"
#include "graph/json_util.h"

namespace jaxpp {

std::string_view to_string(PlacementKind k) {
  switch (k) {
    case PlacementKind::kLinear:
      return "linear";
    case PlacementKind::kLoop:
      return "loop";
    case PlacementKind::kV:
      return "v";
    case PlacementKind::kExplicit:
      return "explicit";
  }
  return "?";
}

PlacementKind parse_placement_kind(std::string_view s, const std::string& where) {
  std::string l(s);
  std::transform(l.begin(), l.end(), l.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (l == "circular" || l == "interleaved") return PlacementKind::kLoop;
  for (PlacementKind k : kAllPlacementKinds)
    if (l == to_string(k)) return k;
  throw_input_error(
      where, "unknown placement \"" + std::string(s) + "\" (expected linear, loop, v or explicit)");
}

std::vector<int> Placement::stages_of(int actor) const {
  std::vector<int> out;
  for (int s = 0; s < num_stages(); ++s)
    if (stage_to_actor[s] == actor) out.push_back(s);
  return out;
}

Placement make_placement(PlacementKind kind, int num_stages, int num_actors) {
  const std::string where = "placement " + std::string(to_string(kind));
  const std::string shape =
      std::to_string(num_stages) + " stages on " + std::to_string(num_actors) + " actors";
  if (num_actors < 1)
    throw_input_error(where, "expected at least 1 actor, got " + std::to_string(num_actors));
  if (num_stages < 1)
    throw_input_error(where, "expected at least 1 stage, got " + std::to_string(num_stages));
  Placement p;
  p.kind = kind;
  p.num_actors = num_actors;
  p.stage_to_actor.resize(num_stages);
  switch (kind) {
    case PlacementKind::kLinear:
      if (num_stages != num_actors)
        throw_input_error(where, "needs as many stages as actors, got " + shape);
      for (int s = 0; s < num_stages; ++s) p.stage_to_actor[s] = s;
      break;
    case PlacementKind::kLoop:
      if (num_stages % num_actors != 0)
        throw_input_error(where, "needs a multiple of the actor count in stages, got " + shape);
      for (int s = 0; s < num_stages; ++s) p.stage_to_actor[s] = s % num_actors;
      break;
    case PlacementKind::kV:
      if (num_stages != 2 * num_actors)
        throw_input_error(where, "needs exactly 2 stages per actor, got " + shape);
      for (int s = 0; s < num_stages; ++s)
        p.stage_to_actor[s] = s < num_actors ? s : 2 * num_actors - 1 - s;
      break;
    case PlacementKind::kExplicit:
      throw_input_error(where, "an explicit placement needs its stage -> actor list");
  }
  return p;
}

Placement explicit_placement(const std::vector<int>& stage_to_actor, int num_actors) {
  if (num_actors < 1)
    throw_input_error("placement", "expected at least 1 actor, got " + std::to_string(num_actors));
  if (stage_to_actor.empty()) throw_input_error("placement", "expected at least one stage");
  std::vector<bool> used(num_actors, false);
  for (size_t s = 0; s < stage_to_actor.size(); ++s) {
    const int a = stage_to_actor[s];
    if (a < 0 || a >= num_actors)
      throw_input_error(
          "placement entry " + std::to_string(s),
          "actor " + std::to_string(a) + " out of range [0, " + std::to_string(num_actors) + ")");
    used[a] = true;
  }
  for (int a = 0; a < num_actors; ++a)
    if (!used[a]) throw_input_error("placement", "actor " + std::to_string(a) + " owns no stage");
  return Placement{PlacementKind::kExplicit, num_actors, stage_to_actor};
}

nlohmann::json placement_to_json(const Placement& p) {
  return {{"kind", std::string(to_string(p.kind))},
          {"num_actors", p.num_actors},
          {"stage_to_actor", p.stage_to_actor}};
}

Placement placement_from_json(const nlohmann::json& j, const std::string& where) {
  const JsonObject obj(j, where);
  obj.reject_unknown({"kind", "num_actors", "stage_to_actor"});
  const PlacementKind kind = parse_placement_kind(obj.string("kind"), obj.field("kind"));
  const int actors = obj.positive_int("num_actors");
  const nlohmann::json& arr = obj.array("stage_to_actor");
  std::vector<int> map;
  for (size_t i = 0; i < arr.size(); ++i) {
    if (!arr[i].is_number_integer())
      throw_input_error(obj.field("stage_to_actor") + "[" + std::to_string(i) + "]",
                        "expected an integer, got " + arr[i].dump());
    map.push_back(arr[i].get<int>());
  }
  try {
    Placement p = explicit_placement(map, actors);
    if (kind != PlacementKind::kExplicit) {
      Placement expected = make_placement(kind, static_cast<int>(map.size()), actors);
      if (expected.stage_to_actor != map)
        throw_input_error("stage_to_actor",
                          "does not match a " + std::string(to_string(kind)) + " placement");
      return expected;
    }
    return p;
  } catch (const InputError& e) {
    throw InputError(where + ": " + e.what());
  }
}

}  // namespace jaxpp
