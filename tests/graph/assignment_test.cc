// graph/assignment.h: layer names, ranges and rules to actors; stages as maximal runs.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "graph/assignment.h"
#include "graph/limits.h"
#include "graph/model.h"
#include "tests/testing/input_error.h"

namespace jaxpp {
namespace {

// embedding, layer0 ... layer7, logits: 10 layers.
ModelSpec eight_block_model() {
  return model_from_json(nlohmann::json{{"name", "tiny8"},
                                        {"layers", 8},
                                        {"hidden", 64},
                                        {"heads", 4},
                                        {"ffn_hidden", 256},
                                        {"seq_len", 32},
                                        {"vocab", 100}},
                         "tiny8");
}

AssignmentSpec spec_of(const char* text) {
  return assignment_spec_from_json(nlohmann::json::parse(text), "a.json");
}

TEST(Assignment, ModelLayersAreNamedEmbeddingLayerIAndLogits) {
  const ModelSpec m = eight_block_model();
  ASSERT_EQ(m.num_layers(), 10);
  EXPECT_EQ(m.layers.front().name, "embedding");
  EXPECT_EQ(m.layers[1].name, "layer0");
  EXPECT_EQ(m.layers[8].name, "layer7");
  EXPECT_EQ(m.layers.back().name, "logits");
}

TEST(Assignment, CircularRuleGivesTheLoopPlacement) {
  const Assignment a = resolve_assignment(
      spec_of(R"({"embedding": 0, "layer{i}": "i mod 4", "logits": 3})"), eight_block_model(), 4);
  EXPECT_EQ(a.layer_actor, (std::vector<int>{0, 0, 1, 2, 3, 0, 1, 2, 3, 3}));
  EXPECT_EQ(a.partition.stage_begin, (std::vector<int>{0, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(a.placement, make_placement(PlacementKind::kLoop, 8, 4));
  EXPECT_EQ(max_stages_per_actor(a.placement), 2);
}

TEST(Assignment, ContiguousRuleGivesTheLinearPlacement) {
  const Assignment a = resolve_assignment(
      spec_of(R"({"embedding": 0, "layer{i}": "i / 2", "logits": 3})"), eight_block_model(), 4);
  EXPECT_EQ(a.partition.stage_begin, (std::vector<int>{0, 3, 5, 7}));
  EXPECT_EQ(a.placement, make_placement(PlacementKind::kLinear, 4, 4));
}

TEST(Assignment, RangesIncludeBothEndsAndMayBeNonContiguous) {
  const Assignment a = resolve_assignment(
      spec_of(R"({"embedding-layer2": 0, "layer3-layer5": 1, "layer6-logits": 0})"),
      eight_block_model(), 2);
  EXPECT_EQ(a.layer_actor, (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(a.partition.stage_begin, (std::vector<int>{0, 4, 7}));
  EXPECT_EQ(a.placement.kind, PlacementKind::kExplicit);
  EXPECT_EQ(a.placement.stage_to_actor, (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(max_stages_per_actor(a.placement), 2);
}

TEST(Assignment, AdjacentRunsOnOneActorAreOneStage) {
  const Assignment a =
      resolve_assignment(spec_of(R"({"embedding-layer1": 0, "layer2-layer3": 1, "layer4-layer5": 1,
                  "layer6-logits": 0})"),
                         eight_block_model(), 2);
  EXPECT_EQ(a.partition.stage_begin, (std::vector<int>{0, 3, 7}));
  EXPECT_EQ(a.placement.stage_to_actor, (std::vector<int>{0, 1, 0}));
  // So a V shape (actor p-1 holding stages p-1 and p) is one stage there: 5 stages on 3 actors.
  const Assignment v =
      resolve_assignment(spec_of(R"({"embedding-layer0": 0, "layer1-layer2": 1, "layer3-layer4": 2,
                  "layer5-layer6": 1, "layer7-logits": 0})"),
                         eight_block_model(), 3);
  EXPECT_EQ(v.placement.stage_to_actor, (std::vector<int>{0, 1, 2, 1, 0}));
  EXPECT_EQ(v.placement.kind, PlacementKind::kExplicit);
}

TEST(Assignment, NewStageCutsARunOnOneActorSoVIsPossible) {
  const Assignment v = resolve_assignment(spec_of(R"({"embedding-layer1": 0, "layer2-layer3": 1,
                  "layer4-layer5": {"actor": 1, "new_stage": true}, "layer6-logits": 0})"),
                                          eight_block_model(), 2);
  EXPECT_EQ(v.partition.stage_begin, (std::vector<int>{0, 3, 5, 7}));
  EXPECT_EQ(v.placement, make_placement(PlacementKind::kV, 4, 2));
  // On a rule key every matched layer starts a stage: one stage per block.
  const Assignment each = resolve_assignment(
      spec_of(R"({"embedding": 0, "layer{i}": {"actor": "i / 4", "new_stage": true},
                  "logits": 1})"),
      eight_block_model(), 2);
  EXPECT_EQ(each.partition.stage_begin, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(each.placement.stage_to_actor, (std::vector<int>{0, 0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(
      error_of([] {
        resolve_assignment(spec_of(R"({"embedding-layer3": {"actor": 0, "stage": 1},
                                              "layer4-logits": 1})"),
                           eight_block_model(), 2);
      }).rfind("a.json: field 'assignment.embedding-layer3': field 'stage': unknown field", 0),
      0u);
}

TEST(Assignment, RuleExpressionsUseFloorDivisionModuloAndParentheses) {
  EXPECT_EQ(evaluate_actor_rule("i mod 4", 9, "w"), 1);
  EXPECT_EQ(evaluate_actor_rule("i % 4", 9, "w"), 1);
  EXPECT_EQ(evaluate_actor_rule("i / 8", 15, "w"), 1);
  EXPECT_EQ(evaluate_actor_rule("(i / 2) mod 3 + 1", 7, "w"), 1);
  EXPECT_EQ(evaluate_actor_rule("3 - i", 5, "w"), -2);
  EXPECT_EQ(evaluate_actor_rule("-1 mod 4", 0, "w"), 3);
  EXPECT_EQ(evaluate_actor_rule("2*i+1", 3, "w"), 7);
}

TEST(Assignment, BadRuleExpressionsNameTheKeyAndTheProblem) {
  EXPECT_EQ(error_of([] { evaluate_actor_rule("i mod 0", 1, "a.json: field 'x'"); }),
            "a.json: field 'x': rule 'i mod 0': modulo by zero (expected an integer expression "
            "in i with + - * / mod % and parentheses, e.g. \"i mod 4\")");
  EXPECT_NE(error_of([] { evaluate_actor_rule("j mod 4", 1, "w"); }).find("unexpected 'j mod 4'"),
            std::string::npos);
  EXPECT_NE(error_of([] { evaluate_actor_rule("(i mod 4", 1, "w"); }).find("missing ')'"),
            std::string::npos);
  EXPECT_NE(error_of([] { evaluate_actor_rule("i mod", 1, "w"); }).find("ends too early"),
            std::string::npos);
  EXPECT_NE(error_of([] { evaluate_actor_rule("i / 0", 1, "w"); }).find("division by zero"),
            std::string::npos);
  EXPECT_NE(error_of([] { evaluate_actor_rule("99999 * 99999", 1, "w"); }).find("overflows"),
            std::string::npos);
}

TEST(Assignment, DeeplyNestedRulesAreRefusedNotARecursionCrash) {
  // 64 levels of parentheses (or unary minus) evaluate; deeper is one line that quotes the rule
  // shortened, where 20,000 levels used to overflow the stack of the recursive parser.
  const std::string ok = std::string(64, '(') + "i" + std::string(64, ')');
  EXPECT_EQ(evaluate_actor_rule(ok, 5, "w"), 5);
  EXPECT_EQ(evaluate_actor_rule(std::string(63, '-') + "i", 5, "w"), -5);
  const std::string deep = std::string(20000, '(') + "i" + std::string(20000, ')');
  const std::string message = error_of([&] { evaluate_actor_rule(deep, 5, "a.json: field 'x'"); });
  EXPECT_NE(message.find("nests deeper than 64 levels"), std::string::npos) << message;
  EXPECT_LT(message.size(), 300u) << message;
  EXPECT_NE(error_of([] { evaluate_actor_rule(std::string(20000, '-') + "i", 1, "w"); })
                .find("nests deeper than 64 levels"),
            std::string::npos);
}

TEST(Assignment, AMissingLayerIsNamed) {
  const std::string e = error_of([] {
    resolve_assignment(spec_of(R"({"embedding-layer7": 0, "layer9": 1, "logits": 1})"),
                       eight_block_model(), 2);
  });
  EXPECT_EQ(e.rfind("a.json: field 'assignment.layer9': no layer named 'layer9' in tiny8", 0), 0u)
      << e;
  EXPECT_NE(e.find("embedding, layer0, layer1, ..., layer6, layer7, logits"), std::string::npos)
      << e;
}

TEST(Assignment, ARuleMatchingNoLayerIsAnError) {
  const std::string e = error_of([] {
    resolve_assignment(spec_of(R"({"block_{i}": "i mod 2", "embedding-logits": 0})"),
                       eight_block_model(), 2);
  });
  EXPECT_EQ(
      e.rfind("a.json: field 'assignment.block_{i}': no layer of tiny8 is named block_<i>", 0), 0u)
      << e;
}

TEST(Assignment, ALayerAssignedTwiceNamesBothKeys) {
  const std::string e = error_of([] {
    resolve_assignment(spec_of(R"({"embedding-layer3": 0, "layer3-logits": 1})"),
                       eight_block_model(), 2);
  });
  EXPECT_EQ(e,
            "a.json: field 'assignment.layer3-logits': layer3 is also assigned by "
            "'embedding-layer3'");
}

TEST(Assignment, ALayerNotAssignedIsNamed) {
  const std::string e = error_of([] {
    resolve_assignment(spec_of(R"({"embedding-layer3": 0, "layer4-layer7": 1})"),
                       eight_block_model(), 2);
  });
  EXPECT_EQ(e, "a.json: field 'assignment': layer 'logits' is not assigned");
}

TEST(Assignment, AnActorOutOfRangeIsNamed) {
  EXPECT_EQ(error_of([] {
              resolve_assignment(spec_of(R"({"embedding-layer3": 0, "layer4-logits": 2})"),
                                 eight_block_model(), 2);
            }),
            "a.json: field 'assignment.layer4-logits': actor 2 is out of range 0..1 (2 actors)");
  EXPECT_EQ(error_of([] {
              resolve_assignment(spec_of(R"({"embedding": 0, "layer{i}": "i mod 3", "logits": 1})"),
                                 eight_block_model(), 2);
            }),
            "a.json: field 'assignment.layer{i}': 'i mod 3' gives actor 2 for layer2, out of "
            "range 0..1 (2 actors)");
  EXPECT_EQ(error_of([] {
              resolve_assignment(spec_of(R"({"embedding-logits": -1})"), eight_block_model(), 2);
            }),
            "a.json: field 'assignment.embedding-logits': actor -1 is out of range 0..1 (2 "
            "actors)");
}

TEST(Assignment, AnActorWithNothingIsNamed) {
  EXPECT_EQ(error_of([] {
              resolve_assignment(spec_of(R"({"embedding-layer3": 0, "layer4-logits": 2})"),
                                 eight_block_model(), 3);
            }),
            "a.json: field 'assignment': actor 1 gets no layer (3 actors)");
}

TEST(Assignment, ABackwardRangeAndANonIntegerActorAreErrors) {
  EXPECT_EQ(error_of([] {
              resolve_assignment(spec_of(R"({"layer3-embedding": 0, "layer4-logits": 1})"),
                                 eight_block_model(), 2);
            }),
            "a.json: field 'assignment.layer3-embedding': the range runs backwards: embedding "
            "comes before layer3 in the model");
  EXPECT_NE(error_of([] {
              resolve_assignment(spec_of(R"({"embedding-layer3": "0", "layer4-logits": 1})"),
                                 eight_block_model(), 2);
            }).find("expected an actor index (an integer); a rule such as"),
            std::string::npos);
  EXPECT_EQ(error_of([] { spec_of("{}"); }),
            "a.json: field 'assignment': is empty: assign every layer to an actor");
  EXPECT_NE(error_of([] { spec_of("[0, 1]"); }).find("expected an object"), std::string::npos);
}

TEST(Assignment, RuleKeysAndValuesAreChecked) {
  EXPECT_EQ(error_of([] {
              resolve_assignment(spec_of(R"({"layer{i}{i}": 0, "embedding-logits": 0})"),
                                 eight_block_model(), 1);
            }),
            "a.json: field 'assignment.layer{i}{i}': a rule key holds {i} once");
  EXPECT_EQ(error_of([] {
              resolve_assignment(spec_of(R"({"layer{i}": [0], "embedding": 0, "logits": 0})"),
                                 eight_block_model(), 1);
            }),
            "a.json: field 'assignment.layer{i}': expected a rule such as \"i mod 4\" or an actor "
            "index, got [0]");
  // A constant on a rule key is one actor for every matched layer.
  const Assignment a = resolve_assignment(
      spec_of(R"({"layer{i}": 1, "embedding": 0, "logits": 0})"), eight_block_model(), 2);
  EXPECT_EQ(a.placement.stage_to_actor, (std::vector<int>{0, 1, 0}));
}

TEST(Assignment, MoreStagesThanTheLimitIsAnError) {
  ModelSpec m = eight_block_model();
  m.layers.resize(kMaxStages + 1, m.layers[1]);
  for (int l = 0; l < m.num_layers(); ++l) m.layers[l].name = "b" + std::to_string(l);
  EXPECT_EQ(error_of([&] { resolve_assignment(spec_of(R"({"b{i}": "i mod 2"})"), m, 2); }),
            "a.json: field 'assignment': gives 16385 stages, more than the limit of 16384");
}

TEST(Assignment, ALayerNameSharedByTwoLayersIsAmbiguous) {
  const ModelSpec m = model_from_json(nlohmann::json::parse(R"({"name": "twins", "layers_list": [
        {"name": "a", "fwd_flops": 1, "bwd_input_flops": 1, "bwd_weight_flops": 1,
         "params": 1, "output_bytes": 1, "stash_bytes": 1},
        {"name": "a", "fwd_flops": 1, "bwd_input_flops": 1, "bwd_weight_flops": 1,
         "params": 1, "output_bytes": 1, "stash_bytes": 1}]})"),
                                      "twins");
  EXPECT_EQ(error_of([&] { resolve_assignment(spec_of(R"({"a": 0})"), m, 1); }),
            "a.json: field 'assignment.a': 2 layers of twins are named 'a'; name a layer that is "
            "unique");
}

}  // namespace
}  // namespace jaxpp
