// The Zero Bubble paper's settings (Qi et al., ICLR 2024; tests/data/zero_bubble/paper_tables.json:
// the profiled T_F, T_B, T_W, T_comm of its Table 9 and the bubble rates of its Table 5):
//   - the engine's bubble rate reproduces the paper's figures for 1F1B, ZB-H1 and ZB-H2 (the
//     paper rounds to 4 decimals), so the two definitions and cost models agree;
//   - synthesize with a budget of p stashed microbatches is no worse than ZB-H1 (in our
//     simulation and against the paper's ZB-H1/ZB-1p figure);
//   - synthesize with a budget of 2p is within 0.005 of the paper's automatic ZB-2p schedules
//     (in fact at most 0.0002 above them).
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "schedules/registry.h"
#include "simulator/plan_builder.h"
#include "simulator/synthesize.h"

namespace jaxpp {
namespace {

struct ZbpSetting {
  std::string model;
  int p = 0, m = 0;
  StageTimes times;
  nlohmann::json paper;  // schedule name -> bubble rate
};

std::vector<ZbpSetting> zbp_settings() {
  std::ifstream in(std::string(JAXPP_TEST_DATA_DIR) + "/zero_bubble/paper_tables.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<ZbpSetting> out;
  for (const nlohmann::json& s : j.at("settings")) {
    ZbpSetting z;
    z.model = s.at("model").get<std::string>();
    z.p = s.at("p").get<int>();
    z.m = s.at("m").get<int>();
    z.times = uniform_stage_times(
        z.p, s.at("t_f_ms").get<double>() * 1e-3, s.at("t_b_ms").get<double>() * 1e-3,
        s.at("t_w_ms").get<double>() * 1e-3, s.at("t_comm_ms").get<double>() * 1e-3);
    z.paper = s.at("paper_bubble_rate");
    out.push_back(std::move(z));
  }
  return out;
}

std::string zbp_label(const ZbpSetting& s) {
  return s.model + " p " + std::to_string(s.p) + " m " + std::to_string(s.m);
}

double zbp_engine_bubble(const char* schedule, const ZbpSetting& s) {
  const Schedule sched = generate_schedule(schedule, {.num_actors = s.p, .num_microbatches = s.m});
  PlanSimOptions o;
  o.record_trace = false;
  return simulate_stage_times(sched, s.times, o).result.bubble_rate;
}

SynthesisResult zbp_synthesize(const ZbpSetting& s, int budget) {
  SynthesisOptions o;
  o.max_stashed.assign(s.p, budget);
  o.time_budget_s = 600;     // never the binding bound here
  o.max_evaluations = 3000;  // the same result on every machine
  return synthesize_schedule(s.p, s.m, s.times, o);
}

// Table 5 gives 4 decimals.
constexpr double kZbpRounding = 0.5e-4 + 1e-9;

TEST(ZeroBubblePaper, DataFileHoldsTheTwelveSettingsOfTable5) {
  const std::vector<ZbpSetting> settings = zbp_settings();
  ASSERT_EQ(settings.size(), 12u);
  for (const ZbpSetting& s : settings) {
    EXPECT_TRUE(s.p == 8 || s.p == 16 || s.p == 32) << zbp_label(s);
    EXPECT_GE(s.m, 3 * s.p) << zbp_label(s);
    for (const char* k : {"1F1B", "ZB-H1", "ZB-H2", "ZB-1p", "ZB-2p"})
      EXPECT_TRUE(s.paper.contains(k)) << zbp_label(s) << " " << k;
  }
}

TEST(ZeroBubblePaper, EngineReproducesThePapersBubbleRatesOf1F1BZbH1AndZbH2) {
  for (const ZbpSetting& s : zbp_settings()) {
    EXPECT_NEAR(zbp_engine_bubble("1f1b", s), s.paper.at("1F1B").get<double>(), kZbpRounding)
        << zbp_label(s);
    EXPECT_NEAR(zbp_engine_bubble("zb-h1", s), s.paper.at("ZB-H1").get<double>(), kZbpRounding)
        << zbp_label(s);
    EXPECT_NEAR(zbp_engine_bubble("zb-h2", s), s.paper.at("ZB-H2").get<double>(), kZbpRounding)
        << zbp_label(s);
  }
}

TEST(ZeroBubblePaper, BudgetOfPIsNoWorseThanZbH1) {
  for (const ZbpSetting& s : zbp_settings()) {
    const SynthesisResult r = zbp_synthesize(s, s.p);
    for (int k : r.peak_stashed) EXPECT_LE(k, s.p) << zbp_label(s);
    EXPECT_LE(r.bubble_rate, zbp_engine_bubble("zb-h1", s) + 1e-12) << zbp_label(s);
    EXPECT_LE(r.bubble_rate, s.paper.at("ZB-H1").get<double>() + kZbpRounding) << zbp_label(s);
    EXPECT_LE(r.bubble_rate, s.paper.at("ZB-1p").get<double>() + kZbpRounding) << zbp_label(s);
  }
}

TEST(ZeroBubblePaper, BudgetOf2PIsWithinHalfAPercentOfThePapersZb2p) {
  for (const ZbpSetting& s : zbp_settings()) {
    const SynthesisResult r = zbp_synthesize(s, 2 * s.p);
    for (int k : r.peak_stashed) EXPECT_LE(k, 2 * s.p) << zbp_label(s);
    const double paper = s.paper.at("ZB-2p").get<double>();
    EXPECT_NEAR(r.bubble_rate, paper, 0.005) << zbp_label(s);
    // In fact at most 0.0002 above it on every setting (the greedy's "I first" warm-up; without
    // it p = 32 stayed 0.0014 to 0.0028 above).
    EXPECT_LE(r.bubble_rate, paper + 2e-4) << zbp_label(s);
  }
}

}  // namespace
}  // namespace jaxpp
