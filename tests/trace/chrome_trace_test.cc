// Chrome/Perfetto export: the JSON parses and holds the expected events.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tests/trace/trace_fixture.h"
#include "trace/chrome_trace.h"

namespace jaxpp {
namespace {

using testing::small_trace;

std::vector<nlohmann::json> events_with_ph(const nlohmann::json& chrome, const std::string& ph) {
  std::vector<nlohmann::json> out;
  for (const auto& e : chrome.at("traceEvents")) {
    if (e.at("ph") == ph) out.push_back(e);
  }
  return out;
}

nlohmann::json exported() {
  // Through text, as a viewer would read it.
  return nlohmann::json::parse(trace_to_chrome_json(small_trace()).dump());
}

TEST(ChromeTrace, HasOneCompleteEventPerTraceEvent) {
  const Trace t = small_trace();
  const auto xs = events_with_ph(exported(), "X");
  ASSERT_EQ(xs.size(), t.events.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_EQ(xs[i].at("name"), t.events[i].name());
    EXPECT_EQ(xs[i].at("pid"), t.events[i].actor + 1);
    EXPECT_DOUBLE_EQ(xs[i].at("ts").get<double>(), t.events[i].start_s * 1e6);
    EXPECT_DOUBLE_EQ(xs[i].at("dur").get<double>(), t.events[i].duration_s() * 1e6);
    EXPECT_EQ(xs[i].at("args").at("bytes"), t.events[i].bytes);
    EXPECT_EQ(xs[i].at("args").at("tag"), t.events[i].tag);
    EXPECT_EQ(xs[i].at("args").at("stage"), t.events[i].stage);
    EXPECT_TRUE(xs[i].contains("cname"));
  }
}

TEST(ChromeTrace, ColoursByTaskKind) {
  std::map<std::string, std::set<std::string>> cnames_by_cat;
  for (const auto& x : events_with_ph(exported(), "X")) {
    cnames_by_cat[x.at("cat")].insert(x.at("cname").get<std::string>());
  }
  EXPECT_EQ(cnames_by_cat.size(), 5u);  // F, B, comm, allreduce, optimizer in the fixture
  std::set<std::string> all;
  for (const auto& [cat, names] : cnames_by_cat) {
    EXPECT_EQ(names.size(), 1u) << cat;
    all.insert(names.begin(), names.end());
  }
  EXPECT_EQ(all.size(), cnames_by_cat.size());
}

TEST(ChromeTrace, DrawsOneFlowArrowPerSendToItsRecv) {
  const Trace t = small_trace();
  const nlohmann::json chrome = exported();
  const auto starts = events_with_ph(chrome, "s");
  const auto finishes = events_with_ph(chrome, "f");
  int sends = 0;
  for (const TraceEvent& e : t.events) sends += e.op == OpKind::kSend;
  ASSERT_EQ(static_cast<int>(starts.size()), sends);
  ASSERT_EQ(finishes.size(), starts.size());
  for (size_t i = 0; i < starts.size(); ++i) {
    EXPECT_EQ(starts[i].at("id"), finishes[i].at("id"));
    EXPECT_EQ(finishes[i].at("bp"), "e");
    EXPECT_NE(starts[i].at("pid"), finishes[i].at("pid"));
    const int64_t tag = starts[i].at("id");
    for (const TraceEvent& e : t.events) {
      if (e.tag != tag) continue;
      const int pid = e.actor + 1;
      if (e.op == OpKind::kSend) {
        EXPECT_EQ(starts[i].at("pid"), pid);
      }
      if (e.op == OpKind::kRecv) {
        EXPECT_EQ(finishes[i].at("pid"), pid);
        EXPECT_EQ(finishes[i].at("tid"), chrome_tid_of(e.stream));
      }
    }
  }
}

TEST(ChromeTrace, NamesAProcessPerActorAndAThreadPerStream) {
  std::map<int, std::string> processes;
  std::set<std::pair<int, std::string>> threads;
  for (const auto& m : events_with_ph(exported(), "M")) {
    const int pid = m.at("pid").get<int>();
    const std::string name = m.at("args").contains("name") ? m.at("args").at("name").get<std::string>() : "";
    if (m.at("name") == "process_name") processes[pid] = name;
    if (m.at("name") == "thread_name") threads.insert({pid, name});
  }
  EXPECT_EQ(processes, (std::map<int, std::string>{{1, "actor 0"}, {2, "actor 1"}}));
  const std::set<std::pair<int, std::string>> expected = {
      {1, "compute"}, {1, "send->1"}, {1, "recv<-1"}, {1, "collective"},
      {2, "compute"}, {2, "send->0"}, {2, "recv<-0"}, {2, "collective"}};
  EXPECT_EQ(threads, expected);
}

TEST(ChromeTrace, GivesEveryStreamOfAnActorItsOwnThread) {
  std::set<int> tids = {chrome_tid_of({StreamKind::kCompute, -1}),
                        chrome_tid_of({StreamKind::kCollective, -1})};
  for (int peer = 0; peer < 8; ++peer) {
    tids.insert(chrome_tid_of({StreamKind::kSend, peer}));
    tids.insert(chrome_tid_of({StreamKind::kRecv, peer}));
  }
  EXPECT_EQ(tids.size(), 18u);
}

TEST(ChromeTrace, HasAMemoryCounterSamplePerMemorySample) {
  const Trace t = small_trace();
  const auto counters = events_with_ph(exported(), "C");
  ASSERT_EQ(counters.size(), t.memory.size());
  for (size_t i = 0; i < counters.size(); ++i) {
    EXPECT_EQ(counters[i].at("name"), "memory");
    EXPECT_EQ(counters[i].at("pid"), t.memory[i].actor + 1);
    EXPECT_DOUBLE_EQ(counters[i].at("args").at("GiB").get<double>(),
                     static_cast<double>(t.memory[i].bytes) / (1 << 30));
  }
}

TEST(ChromeTrace, AnEmptyTraceStillNamesItsActors) {
  Trace t;
  t.num_actors = 3;
  const nlohmann::json chrome = trace_to_chrome_json(t);
  EXPECT_EQ(events_with_ph(chrome, "X").size(), 0u);
  int names = 0;
  for (const auto& m : events_with_ph(chrome, "M")) names += m.at("name") == "process_name";
  EXPECT_EQ(names, 3);
}

}  // namespace
}  // namespace jaxpp
