// The request-level library functions the CLI and the Python module share: run_synthesis
// (simulator/synthesis_request.h), explore_warnings / explore_summary_json
// (simulator/explore_summary.h), simulate_plan_perturbed (simulator/what_if.h) and the corpus
// selection of validate-model (simulator/model_validation.h).
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "costmodel/cluster.h"
#include "costmodel/corpus.h"
#include "graph/error.h"
#include "graph/model.h"
#include "simulator/explore_summary.h"
#include "simulator/model_validation.h"
#include "simulator/plan_builder.h"
#include "simulator/synthesis_request.h"
#include "simulator/what_if.h"

namespace jaxpp {
namespace {

std::string input_error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// GPT-3 13B on 32 H100 (pp 4, tp 8), 1F1B: a small plan request of the model-mode tests.
PlanRequest gpt3_13b_on_32_h100() {
  PlanRequest pr;
  pr.model = load_model("gpt3-13b");
  pr.cluster = cluster_preset("h100-sxm");
  pr.config.gpus = 32;
  pr.config.pp = 4;
  pr.config.tp = 8;
  pr.config.global_batch = 16;
  pr.config.schedule = "1f1b";
  return pr;
}

SynthesisOptions bounded_search() {
  SynthesisOptions o;
  o.max_evaluations = 200;
  o.time_budget_s = 60;
  return o;
}

TEST(RunSynthesis, MeasuredModeIsSynthesizeScheduleUnderTheDefaultBudgetOfPp) {
  SynthesisRequest req;
  req.pp = 4;
  req.microbatches = 8;
  req.t_f_ms = 1;
  req.t_b_ms = 1;
  req.t_w_ms = 1;
  const SynthesisRun run = run_synthesis(req, bounded_search());
  SynthesisOptions direct = bounded_search();
  direct.max_stashed = std::vector<int>(4, 4);
  const SynthesisResult expected =
      synthesize_schedule(4, 8, uniform_stage_times(4, 1e-3, 1e-3, 1e-3, 0), direct);
  EXPECT_EQ(run.max_stashed, std::vector<int>(4, 4));
  EXPECT_EQ(run.result.step_time_s, expected.step_time_s);
  EXPECT_EQ(run.result.schedule, expected.schedule);
  EXPECT_EQ(run.report["step_time_s"].get<double>(), expected.step_time_s);
  EXPECT_EQ(run.report["memory_limit_microbatches"],
            nlohmann::ordered_json(std::vector<int>(4, 4)));
  EXPECT_FALSE(run.plan.has_value());
}

TEST(RunSynthesis, ChecksTheInputsInTheClisOrderWithItsFlagNames) {
  SynthesisRequest req;
  EXPECT_EQ(input_error_of([&] { run_synthesis(req, {}); }),
            "--pp: required (pipeline actors, one stage each)");
  req.pp = 2;
  EXPECT_EQ(input_error_of([&] { run_synthesis(req, {}); }),
            "--microbatches: required (or give --plan)");
  req.microbatches = 4;
  EXPECT_EQ(input_error_of([&] { run_synthesis(req, {}); }),
            "--t-f: required in measured mode (or --stage-times FILE)");
  req.t_f_ms = 1;
  req.t_b_ms = 1;
  req.memory_limit_microbatches = 0;
  EXPECT_EQ(input_error_of([&] { run_synthesis(req, {}); }),
            "--memory-limit-microbatches: 0 is below the minimum of 1 stashed microbatch per "
            "stage (one stage per actor)");
  EXPECT_EQ(input_error_of([] { check_synthesis_budgets(1, -1); }),
            "--max-evaluations: must be >= 0, got -1");
}

TEST(RunSynthesis, PlanModeReturnsThePlanWithTheSynthesizedSchedule) {
  SynthesisRequest req;
  req.plan = build_plan(gpt3_13b_on_32_h100());
  req.memory_limit_microbatches = 4;
  const SynthesisRun run = run_synthesis(req, bounded_search());
  ASSERT_TRUE(run.plan.has_value());
  EXPECT_EQ(run.plan->config.schedule, run.result.schedule.name);
  EXPECT_TRUE(run.report.contains("peak_memory_bytes"));
  EXPECT_EQ(run.max_stashed, std::vector<int>(4, 4));
}

TEST(ExploreSummary, WarnsWhenTheBestConfigurationIdlesNinetyPercent) {
  ExploreResult res;
  ConfigRecord idle;
  idle.status = ConfigStatus::kSimulated;
  idle.bubble_rate = 0.93;
  res.records.push_back(idle);
  res.ranking = {0};
  const std::vector<std::string> warnings = explore_warnings(res);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("idles 93% of its step"), std::string::npos) << warnings[0];
  res.records[0].bubble_rate = 0.5;
  EXPECT_TRUE(explore_warnings(res).empty());
  res.ranking.clear();
  EXPECT_TRUE(explore_warnings(res).empty());
}

TEST(SimulatePlanPerturbed, ReportsTheSlowdownAgainstTheUnperturbedPlan) {
  const Plan plan = build_plan(gpt3_13b_on_32_h100());
  PlanSimOptions options;
  const SimulatedPlan base = simulate_plan(plan, options);
  const Perturbation slow = parse_perturbation("slow-actor=1:2", "--perturb");
  const SimulatedPlan sim = simulate_plan_perturbed(plan, options, slow);
  ASSERT_TRUE(sim.metrics.contains("perturbation"));
  EXPECT_EQ(sim.metrics["perturbation"]["baseline_step_time_s"].get<double>(),
            base.metrics["step_time_s"].get<double>());
  EXPECT_GT(sim.metrics["step_time_s"].get<double>(), base.metrics["step_time_s"].get<double>());
  const Perturbation outside = parse_perturbation("slow-actor=9:2", "--perturb");
  EXPECT_NE(
      input_error_of([&] { simulate_plan_perturbed(plan, options, outside); }).find("--perturb"),
      std::string::npos);
}

TEST(SelectCorpusRows, KeepsTheRowsOfOneGpuAndSplitAndRefusesAnEmptySelection) {
  Corpus corpus;
  corpus.path = "rows.json";
  for (const auto& [id, cluster, split] : {std::tuple{"a", "h100-sxm", CorpusSplit::kFit},
                                           std::tuple{"b", "h100-sxm", CorpusSplit::kTest},
                                           std::tuple{"c", "a100-80g", CorpusSplit::kTest}}) {
    CorpusRow row;
    row.id = id;
    row.cluster = cluster;
    row.split = split;
    corpus.rows.push_back(row);
  }
  const Corpus test_h100 = select_corpus_rows(corpus, "h100-sxm", "test");
  ASSERT_EQ(test_h100.rows.size(), 1u);
  EXPECT_EQ(test_h100.rows[0].id, "b");
  EXPECT_EQ(select_corpus_rows(corpus, "", "all").rows.size(), 3u);
  EXPECT_EQ(input_error_of([&] { select_corpus_rows(corpus, "b200", "all"); }),
            "rows.json: no row selected (--rows-on b200, --split all)");
  EXPECT_EQ(input_error_of([] { check_validation_split("train"); }),
            "--split: expected fit, test or all, got 'train'");
  EXPECT_EQ(input_error_of([] { check_validation_band(0); }),
            "--band: expected a fraction > 0, got 0");
  EXPECT_EQ(input_error_of([] { builtin_corpus_from_text(false, ""); }),
            "--corpus: this binary was built without tests/validation/corpus.json; give --corpus "
            "FILE");
}

}  // namespace
}  // namespace jaxpp
