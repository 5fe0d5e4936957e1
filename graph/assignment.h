// Assignment: a placement given by name, as a map from layers (names, ranges or a rule over a
// layer index) to actors (meshes), the way Shardy:MPMD assigns named computations to meshes.
//
// Layer names are the model's own (ModelSpec::layers[i].name; `jaxpp-sim graph` lists them):
// "embedding", "layer0" ... "layer<L-1>", "mtp0" ..., "logits" for the built-in and transformer
// forms, whatever the file says for an explicit "layers_list". The file (or the "assignment"
// field of a plan.json, which has the same shape):
//
//   {"assignment": {
//      "embedding": 0,               // one layer -> actor 0
//      "layer0-layer3": 0,           // a range: every layer from layer0 to layer3 in model
//                                    //   order, both ends included
//      "layer{i}": "i mod 4",        // a rule: every layer named layer<N>, i = N, actor given by
//                                    //   an integer expression in i: + - * / (floor) mod % ( )
//      "logits": 3}}
//
// A value may also be {"actor": A, "new_stage": true} (A an index, or a rule for a {i} key): a
// stage then starts at the key's first layer (at every layer a rule key matches) even when the
// layer before is on the same actor, the only way to give one actor two adjacent stages (the
// V placement: {"embedding-layer3": 0, "layer4-layer7": 1,
// "layer8-layer11": {"actor": 1, "new_stage": true}, "layer12-logits": 0}).
//
// Every layer must be matched by exactly one key; actors are 0 ... num_actors-1 and each must get
// at least one layer. The result is a partition into stages (maximal runs of consecutive layers
// on one actor, cut where "new_stage" says) and a placement of those stages: linear, loop or V
// when the stage -> actor map is one of those (graph/placement.h), explicit otherwise. Shardy's
// colab circular assignment block_i -> mesh (i mod n) on L = v·n layers gives v·n stages in loop
// placement.
//
// Errors are InputError, one line naming the file, the key and the reason:
//   a.json: field 'assignment.layer9': no layer named 'layer9' in gpt-tiny (layers: embedding,
//     layer0 ... layer7, logits)
//   a.json: field 'assignment.layer3': layer3 is also assigned by 'layer0-layer7'
//   a.json: field 'assignment.layer{i}': 'i mod 5' gives actor 4 for layer4, out of range 0..3
//   a.json: field 'assignment': layer 'logits' is not assigned
//   a.json: field 'assignment': actor 2 gets no layer (4 actors)
//
// Usage:
//   AssignmentSpec spec = read_assignment_file("colab.json");
//   Assignment a = resolve_assignment(spec, model, /*num_actors=*/4);
//   a.partition; a.placement;   // as build_plan uses them
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/partition.h"
#include "graph/placement.h"

namespace jaxpp {

struct ModelSpec;

// The assignment as written (the "assignment" object) and the file it came from (an assignment
// file or a plan.json; both hold it under "assignment"), for messages.
struct AssignmentSpec {
  nlohmann::json entries = nlohmann::json::object();
  std::string source;
  std::string key_where(const std::string& key) const;  // "<source>: field 'assignment.<key>'"
  std::string where() const;                            // "<source>: field 'assignment'"
};

// Reads an assignment file: a JSON object with "assignment" (and no other field), or a plan.json
// (format "jaxpp-sim-plan") whose "assignment" field is used. InputError naming the file.
AssignmentSpec read_assignment_file(const std::string& path);
// The "assignment" object of an already parsed document; `source` names it ("plan.json").
// InputError unless `entries` is a non-empty object.
AssignmentSpec assignment_spec_from_json(const nlohmann::json& entries, const std::string& source);

struct Assignment {
  AssignmentSpec spec;
  int num_actors = 0;
  std::vector<int> layer_actor;  // actor of each model layer
  Partition partition;
  Placement placement;
};

// Resolves every key against the model's layer names and checks the actors (see the errors
// above). num_actors >= 1.
Assignment resolve_assignment(const AssignmentSpec& spec, const ModelSpec& model, int num_actors);

// The largest number of stages one actor holds (ParallelConfig::virtual_stages of a plan with an
// assignment; S / p for the named placements).
int max_stages_per_actor(const Placement& placement);

// The placement of a stage -> actor list: the named kind (linear, loop, V) whose map it is,
// explicit otherwise. InputError as explicit_placement.
Placement classify_placement(const std::vector<int>& stage_to_actor, int num_actors);

// Evaluates an actor rule such as "i mod 4" or "(i / 2) % 4" at `i`. InputError naming `where`
// for a syntax error or a division by zero.
int64_t evaluate_actor_rule(const std::string& expression, int64_t i, const std::string& where);

}  // namespace jaxpp
