// Placement: pipeline stage -> actor (pipeline rank).
//
//   linear  stage s -> actor s                       (S = p)
//   loop    stage s -> actor s mod p                 (circular; interleaved schedules)
//   V       stage s -> s for s < p, 2p-1-s otherwise (S = 2p; DualPipeV, ZB-V)
//   explicit list given by the user
// Every actor must own at least one stage.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace jaxpp {

enum class PlacementKind { kLinear, kLoop, kV, kExplicit };
inline constexpr std::array kAllPlacementKinds = {PlacementKind::kLinear, PlacementKind::kLoop,
                                                  PlacementKind::kV, PlacementKind::kExplicit};
std::string_view to_string(PlacementKind k);
PlacementKind parse_placement_kind(std::string_view s, const std::string& where);

struct Placement {
  PlacementKind kind = PlacementKind::kLinear;
  int num_actors = 0;
  std::vector<int> stage_to_actor;

  int num_stages() const { return static_cast<int>(stage_to_actor.size()); }
  int actor_of(int stage) const { return stage_to_actor[stage]; }
  std::vector<int> stages_of(int actor) const;  // ascending
  bool operator==(const Placement&) const = default;
};

// InputError when the shape is impossible (linear needs S = p, loop S % p == 0, V S = 2p).
Placement make_placement(PlacementKind kind, int num_stages, int num_actors);
// InputError when an entry is out of range or an actor owns no stage.
Placement explicit_placement(const std::vector<int>& stage_to_actor, int num_actors);

nlohmann::json placement_to_json(const Placement& p);
Placement placement_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace jaxpp
