// Regression tests for input-parser findings of the fuzzers and the bad-input catalogue
// (docs/hardening.md): each input used to crash, overflow, exhaust memory or escape as a
// non-InputError exception, and must now be a one-line InputError.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "graph/error.h"
#include "graph/json_util.h"
#include "graph/limits.h"
#include "graph/model.h"
#include "graph/partition.h"
#include "graph/placement.h"
#include "graph/plan.h"
#include "graph/task_graph.h"
#include "tests/testing/input_error.h"

namespace jaxpp {
namespace {

using nlohmann::json;

std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("jaxpp-regression-" + std::to_string(::getpid()) + "-" + name);
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

json tiny_model() {
  return json::parse(
      R"({"name": "m", "layers": 4, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 100})");
}

TEST(GraphParserRegression, LargestIntLayerCountIsAnInputErrorNotAnOverflow) {
  // Was: `layers + 2` overflowed int, then vector::reserve threw std::length_error.
  json j = tiny_model();
  j["layers"] = 2147483647;
  EXPECT_NE(error_of([&] {
              model_from_json(j, "m.json");
            }).find("m.json: field 'layers': too large: 2147483647 (the limit is 100000)"),
            std::string::npos);
}

TEST(GraphParserRegression, HiddenWhoseDefaultFfnOverflowsIntIsAnInputError) {
  // Was: ffn_hidden = 4 * hidden overflowed int and the model was accepted with ffn -4.
  json j = tiny_model();
  j["hidden"] = 2147483647;
  j["heads"] = 1;
  EXPECT_NE(error_of([&] { model_from_json(j, "m.json"); }).find("field 'hidden': too large"),
            std::string::npos);
}

TEST(GraphParserRegression, ShapeAtTheLimitsKeepsTheWorkFormulasInRange) {
  json j = tiny_model();
  j["layers"] = 1;
  j["hidden"] = kMaxHidden;
  j["heads"] = kMaxHeads;
  j["ffn_hidden"] = kMaxFfnHidden;
  j["seq_len"] = kMaxSeqLen;
  j["vocab"] = kMaxVocab;
  j["dtype"] = "fp32";
  const ModelSpec m = model_from_json(j, "m.json");
  EXPECT_GT(m.total_params(), 0);
  for (const LayerWork& l : m.layers) {
    for (int64_t b : l.stash_bytes) EXPECT_GE(b, 0) << l.name;
    EXPECT_GE(l.output_bytes, 0) << l.name;
  }
}

TEST(GraphParserRegression, ExplicitLayerQuantitiesNearInt64MaxAreAnInputError) {
  // Was: total_params() summed two layers of 9e18 params into a signed overflow.
  json layer = {{"name", "a"},           {"fwd_flops", 1}, {"bwd_input_flops", 1},
                {"bwd_weight_flops", 1}, {"params", 10},   {"output_bytes", 4},
                {"stash_bytes", 4}};
  for (const char* key : {"params", "output_bytes", "stash_bytes", "tp_allreduce_bytes"}) {
    json l = layer;
    l[key] = int64_t{9'000'000'000'000'000'000};
    const json j = {{"name", "x"}, {"layers_list", {l, l}}};
    EXPECT_NE(error_of([&] { model_from_json(j, "m.json"); }).find("too large"), std::string::npos)
        << key;
  }
}

TEST(GraphParserRegression, NumberTooLargeForADoubleIsAnInputErrorNamingTheFile) {
  // Was: nlohmann's out_of_range.406 escaped read_json_file (exit 1, no file name).
  const std::string path = write_temp("overflow.json", R"({"layers": 1e999})");
  const std::string e = error_of([&] { read_json_file(path); });
  EXPECT_NE(e.find(path + ": malformed JSON"), std::string::npos) << e;
  EXPECT_NE(e.find("number overflow"), std::string::npos) << e;
  std::filesystem::remove(path);
}

TEST(GraphParserRegression, TaskGraphRefusesAHugeMicrobatchCount) {
  // Was: `jaxpp-sim graph --microbatches 2000000000` ran until killed.
  const ModelSpec model = model_from_json(tiny_model(), "m.json");
  const Partition partition = partition_from_starts({0, 3}, model.num_layers());
  const Placement placement = make_placement(PlacementKind::kLinear, 2, 2);
  TaskGraphOptions o;
  o.num_microbatches = 2'000'000'000;
  EXPECT_NE(error_of([&] {
              TaskGraph::build(model, partition, placement, o);
            }).find("2000000000 microbatches is more than the limit of 1048576"),
            std::string::npos);
}

TEST(GraphParserRegression, PipelineSizeLimitsAreInclusive) {
  EXPECT_NO_THROW(check_pipeline_size(kMaxStages, 1, "x"));
  EXPECT_NO_THROW(check_pipeline_size(1, kMaxMicrobatches, "x"));
  EXPECT_NO_THROW(check_pipeline_size(4, kMaxStageMicrobatches / 4, "x"));
  EXPECT_THROW(check_pipeline_size(kMaxStages + 1, 1, "x"), InputError);
  EXPECT_THROW(check_pipeline_size(1, kMaxMicrobatches + 1, "x"), InputError);
  EXPECT_THROW(check_pipeline_size(4, kMaxStageMicrobatches / 4 + 1, "x"), InputError);
}

json seed_plan() {
  std::ifstream in(std::string(JAXPP_TEST_DATA_DIR) + "/../fuzz/corpus/plan_json/tiny_gpipe.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

TEST(GraphParserRegression, PlanWhoseProgramDisagreesWithItsConfigIsAnInputError) {
  // Was: a program claiming 2e9 microbatches passed `validate` and `run` averaged the loss over
  // 2e9 microbatches.
  EXPECT_NO_THROW(plan_from_json(seed_plan(), "plan.json"));
  json p = seed_plan();
  p["program"]["num_microbatches"] = 2'000'000'000;
  EXPECT_NE(error_of([&] { plan_from_json(p, "plan.json"); })
                .find("plan.json: field 'program': has 2000000000 microbatches but "
                      "config.num_microbatches is 2"),
            std::string::npos);
  p = seed_plan();
  p["config"]["pp"] = 4;
  EXPECT_NE(error_of([&] { plan_from_json(p, "plan.json"); }).find("actors but config.pp is 4"),
            std::string::npos);
}

// --- Checked 64-bit size arithmetic (issue 16, class 3). -----------------------------------------

TEST(CheckedArithmetic, ProductsAndSumsThatLeaveInt64AreNullopt) {
  EXPECT_EQ(checked_mul(int64_t{1} << 31, int64_t{1} << 31), int64_t{1} << 62);
  EXPECT_EQ(checked_mul(int64_t{1} << 32, int64_t{1} << 31), std::nullopt);
  EXPECT_EQ(checked_add(INT64_MAX - 1, 1), INT64_MAX);
  EXPECT_EQ(checked_add(INT64_MAX, 1), std::nullopt);
}

TEST(CheckedArithmetic, IntProductAboveItsLimitNamesTheFactors) {
  EXPECT_EQ(checked_int_product(4, 8, kMaxStages, "--pp x --virtual"), 32);
  EXPECT_NE(error_of([] {
              checked_int_product(65536, 65536, kMaxStages, "--pp x --virtual");
            }).find("--pp x --virtual: 65536 x 65536 = 4294967296 is more than the limit of 16384"),
            std::string::npos);
  EXPECT_NE(
      error_of([] { checked_int_product(INT64_MAX, 3, kMaxStages, "w"); }).find("more than 2^63"),
      std::string::npos);
}

TEST(ModelParserRegression, ExplicitLayerFlopsBeyondTheLimitAreRefused) {
  // Was: two layers of 1e308 FLOPs summed to inf, and every plan of the model took inf seconds.
  const nlohmann::json layer = {
      {"name", "a"},  {"fwd_flops", 1e308}, {"bwd_input_flops", 1}, {"bwd_weight_flops", 1},
      {"params", 10}, {"output_bytes", 4},  {"stash_bytes", 4}};
  const nlohmann::json model = {{"name", "x"}, {"layers_list", {layer, layer}}};
  EXPECT_NE(
      error_of([&] {
        model_from_json(model, "m.json");
      }).find("field 'fwd_flops': too large: 1e+308 (the limit is 1e21 FLOPs per layer pass)"),
      std::string::npos);
}

}  // namespace
}  // namespace jaxpp
