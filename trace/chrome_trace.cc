#include "trace/chrome_trace.h"

#include <map>
#include <set>
#include <utility>

#include "trace/event_style.h"

namespace jaxpp {
namespace {

constexpr double kMicrosecondsPerSecond = 1e6;
constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

int chrome_pid_of(int actor) { return actor + 1; }

nlohmann::json metadata(const char* name, int pid, int tid, nlohmann::json args) {
  nlohmann::json m = {{"ph", "M"}, {"name", name}, {"pid", pid}, {"args", std::move(args)}};
  if (tid >= 0) m["tid"] = tid;
  return m;
}

}  // namespace

int chrome_tid_of(const StreamId& stream) {
  switch (stream.kind) {
    case StreamKind::kCompute: return 1;
    case StreamKind::kCollective: return 2;
    case StreamKind::kSend: return 3 + 2 * stream.peer;
    case StreamKind::kRecv: return 4 + 2 * stream.peer;
    case StreamKind::kAllToAll:
      return kAllToAllTid;
  }
  return 0;
}

nlohmann::json trace_to_chrome_json(const Trace& trace) {
  nlohmann::json out = nlohmann::json::array();

  // Metadata: every actor gets a process, every stream that carries events a thread.
  std::set<std::pair<int, StreamId>> streams;
  for (const TraceEvent& e : trace.events) streams.insert({e.actor, e.stream});
  for (int r = 0; r < trace.num_actors; ++r) {
    out.push_back(metadata("process_name", chrome_pid_of(r), -1, {{"name", "actor " + std::to_string(r)}}));
    out.push_back(metadata("process_sort_index", chrome_pid_of(r), -1, {{"sort_index", r}}));
    streams.insert({r, StreamId{StreamKind::kCompute, -1}});
  }
  for (const auto& [actor, stream] : streams) {
    const int tid = chrome_tid_of(stream);
    out.push_back(metadata("thread_name", chrome_pid_of(actor), tid, {{"name", to_string(stream)}}));
    out.push_back(metadata("thread_sort_index", chrome_pid_of(actor), tid, {{"sort_index", tid}}));
  }

  // Complete events.
  std::map<int64_t, const TraceEvent*> recv_by_tag;
  for (const TraceEvent& e : trace.events) {
    if (e.op == OpKind::kRecv && e.tag >= 0) recv_by_tag.emplace(e.tag, &e);
    const EventCategory cat = category_of(e);
    out.push_back({{"ph", "X"},
                   {"name", e.name()},
                   {"cat", std::string(to_string(cat))},
                   {"cname", std::string(category_chrome_cname(cat))},
                   {"pid", chrome_pid_of(e.actor)},
                   {"tid", chrome_tid_of(e.stream)},
                   {"ts", e.start_s * kMicrosecondsPerSecond},
                   {"dur", e.duration_s() * kMicrosecondsPerSecond},
                   {"args",
                    {{"op", std::string(to_string(e.op))},
                     {"tasks", to_string(e.tasks)},
                     {"stage", e.stage},
                     {"bytes", e.bytes},
                     {"tag", e.tag},
                     {"peer", e.peer},
                     {"step", e.step},
                     {"instruction", e.instruction}}}});
    // The cost model's parts, nested inside the event (end to end from its start).
    double at = e.start_s;
    for (const TracePart& p : e.parts) {
      out.push_back({{"ph", "X"},
                     {"name", p.name},
                     {"cat", "breakdown"},
                     {"pid", chrome_pid_of(e.actor)},
                     {"tid", chrome_tid_of(e.stream)},
                     {"ts", at * kMicrosecondsPerSecond},
                     {"dur", p.duration_s * kMicrosecondsPerSecond}});
      at += p.duration_s;
    }
  }

  // Flow arrows: send -> matching recv.
  for (const TraceEvent& e : trace.events) {
    if (e.op != OpKind::kSend || e.tag < 0) continue;
    const auto it = recv_by_tag.find(e.tag);
    if (it == recv_by_tag.end()) continue;
    const TraceEvent& recv = *it->second;
    const std::string name = "p2p " + to_string(e.tasks);
    out.push_back({{"ph", "s"}, {"name", name}, {"cat", "p2p"}, {"id", e.tag},
                   {"pid", chrome_pid_of(e.actor)}, {"tid", chrome_tid_of(e.stream)},
                   {"ts", e.start_s * kMicrosecondsPerSecond}, {"bp", "e"}});
    out.push_back({{"ph", "f"}, {"name", name}, {"cat", "p2p"}, {"id", e.tag},
                   {"pid", chrome_pid_of(recv.actor)}, {"tid", chrome_tid_of(recv.stream)},
                   {"ts", recv.end_s * kMicrosecondsPerSecond}, {"bp", "e"}});
  }

  // Memory counters.
  for (const MemorySample& m : trace.memory) {
    out.push_back({{"ph", "C"}, {"name", "memory"}, {"pid", chrome_pid_of(m.actor)},
                   {"ts", m.time_s * kMicrosecondsPerSecond},
                   {"args", {{"GiB", static_cast<double>(m.bytes) / kBytesPerGiB}}}});
  }

  return {{"traceEvents", std::move(out)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"generator", "jaxpp-sim"},
            {"source", trace.source},
            {"num_actors", trace.num_actors},
            {"num_steps", trace.num_steps}}}};
}

}  // namespace jaxpp
