#include "trace/trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <tuple>

#include "graph/error.h"
#include "graph/json_util.h"
#include "graph/limits.h"

namespace jaxpp {
namespace {

std::string describe(const nlohmann::json& v) {
  std::string s = v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

std::optional<int> parse_int(std::string_view s) {
  int value = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr != s.data() + s.size() || s.empty()) return std::nullopt;
  return value;
}

// Inverse of to_string(StreamId): "compute", "collective", "send->3", "recv<-1".
std::optional<StreamId> parse_stream(std::string_view s) {
  if (s == "compute") return StreamId{StreamKind::kCompute, -1};
  if (s == "collective") return StreamId{StreamKind::kCollective, -1};
  if (s == "alltoall") return StreamId{StreamKind::kAllToAll, -1};
  for (const auto& [prefix, kind] :
       {std::pair<std::string_view, StreamKind>{"send->", StreamKind::kSend},
        {"recv<-", StreamKind::kRecv}}) {
    if (s.substr(0, prefix.size()) != prefix) continue;
    const auto peer = parse_int(s.substr(prefix.size()));
    if (!peer || *peer < 0) return std::nullopt;
    return StreamId{kind, *peer};
  }
  return std::nullopt;
}

std::optional<OpKind> parse_op(std::string_view s) {
  for (OpKind k : kAllOpKinds) {
    if (to_string(k) == s) return k;
  }
  return std::nullopt;
}

int int_in_range(const JsonObject& obj, const std::string& key, int lo, int hi) {
  const int64_t v = obj.integer(key);
  if (v < lo || v > hi) {
    throw_input_error(obj.field(key), "expected an integer in [" + std::to_string(lo) + ", " +
                                          std::to_string(hi) + "], got " + std::to_string(v));
  }
  return static_cast<int>(v);
}

double time_in_range(const JsonObject& obj, const std::string& key) {
  const double t = obj.non_negative_number(key);
  if (t > kMaxTraceTimeS) {
    throw_input_error(obj.field(key),
                      "expected a time in seconds <= 1e9, got " + describe(obj.at(key)));
  }
  return t;
}

TraceEvent event_from_json(const nlohmann::json& j, const std::string& where, int num_actors,
                           int num_steps) {
  constexpr int kIntMax = std::numeric_limits<int>::max();
  JsonObject obj(j, where);
  TraceEvent e;
  e.actor = int_in_range(obj, "actor", 0, num_actors - 1);
  e.instruction = int_in_range(obj, "instruction", 0, kIntMax);
  e.step = obj.has("step") ? int_in_range(obj, "step", 0, num_steps - 1) : 0;
  const std::string op = obj.string("op");
  const auto parsed_op = parse_op(op);
  if (!parsed_op) {
    throw_input_error(
        obj.field("op"),
        "expected one of compute, send, recv, allreduce, optimizer, got \"" + op + "\"");
  }
  e.op = *parsed_op;
  if (obj.has("tasks")) {
    const nlohmann::json& tasks = obj.array("tasks");
    for (size_t i = 0; i < tasks.size(); ++i) {
      const std::string field = obj.field("tasks") + "[" + std::to_string(i) + "]";
      if (!tasks[i].is_string())
        throw_input_error(field, "expected a task such as \"F3@s2\", got " + describe(tasks[i]));
      const auto t = parse_task_ref(tasks[i].get<std::string>());
      if (!t)
        throw_input_error(field, "expected a task such as \"F3@s2\", got " + describe(tasks[i]));
      e.tasks.push_back(*t);
    }
  }
  e.stage = obj.has("stage") ? int_in_range(obj, "stage", -1, kMaxStages - 1) : -1;
  e.peer = obj.has("peer") ? int_in_range(obj, "peer", -1, num_actors - 1) : -1;
  const bool p2p = e.op == OpKind::kSend || e.op == OpKind::kRecv;
  if (p2p && (e.peer < 0 || e.peer == e.actor)) {
    throw_input_error(obj.field("peer"), "a " + op + " needs a peer actor other than its own (" +
                                             std::to_string(e.actor) + "), got " +
                                             std::to_string(e.peer));
  }
  e.bytes = obj.has("bytes") ? obj.non_negative_integer("bytes") : 0;
  e.tag = obj.has("tag") ? obj.integer("tag") : -1;
  if (e.tag < -1)
    throw_input_error(obj.field("tag"), "expected -1 or a tag >= 0, got " + std::to_string(e.tag));
  e.start_s = time_in_range(obj, "start_s");
  e.end_s = obj.number("end_s");
  if (!(e.end_s >= e.start_s)) {
    throw_input_error(obj.field("end_s"),
                      "expected a number >= start_s (" + describe(obj.at("start_s")) +
                          "): a negative duration, got " + describe(obj.at("end_s")));
  }
  e.end_s = time_in_range(obj, "end_s");
  if (obj.has("parts")) {
    const nlohmann::json& parts = obj.array("parts");
    double total = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      const JsonObject p(parts[i], obj.field("parts") + "[" + std::to_string(i) + "]");
      p.reject_unknown({"name", "duration_s"});
      e.parts.push_back({p.string("name"), p.non_negative_number("duration_s")});
      total += e.parts.back().duration_s;
    }
    if (total > (e.end_s - e.start_s) * (1 + 1e-9) + 1e-12)
      throw_input_error(obj.field("parts"), "the parts last longer than the event");
  }
  Instruction ins;
  ins.op = e.op;
  ins.peer = e.peer;
  e.stream = stream_of(ins);
  if (obj.has("stream")) {
    const std::string stream = obj.string("stream");
    const auto parsed = parse_stream(stream);
    if (!parsed || (parsed->peer >= num_actors)) {
      throw_input_error(
          obj.field("stream"),
          "expected compute, collective, alltoall, send-><actor> or recv<-<actor>, got \"" +
              stream + "\"");
    }
    // A compute event may also be the all-to-all of an MoE instruction (simulated traces).
    const bool alltoall = e.op == OpKind::kCompute && parsed->kind == StreamKind::kAllToAll;
    if (alltoall) e.stream = *parsed;
    if (*parsed != e.stream) {
      throw_input_error(obj.field("stream"), "a " + op + " with peer " + std::to_string(e.peer) +
                                                 " runs on stream \"" + to_string(e.stream) +
                                                 "\", got \"" + stream + "\"");
    }
  }
  obj.reject_unknown({"actor", "instruction", "step", "op", "stream", "tasks", "stage", "peer",
                      "bytes", "tag", "start_s", "end_s", "parts"});
  return e;
}

// Physically impossible event sets: one instruction of one step recorded twice, or two events
// overlapping in time on a stream that runs one instruction at a time (compute, collective, and
// each send stream). Receive streams are exempt: a runtime posts several receives of one stream
// at once and each event lasts from its post to the message's arrival. `events` is in file order.
void check_event_set(const std::vector<TraceEvent>& events, const std::string& where) {
  const auto name = [&](size_t i) { return where + ": events[" + std::to_string(i) + "]"; };
  // (actor, step, instruction, all-to-all event) -> index
  std::map<std::tuple<int, int, int, bool>, size_t> seen;
  std::vector<size_t> order;
  order.reserve(events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    const TraceEvent& e = events[i];
    const auto [it, inserted] = seen.emplace(
        std::tuple(e.actor, e.step, e.instruction, e.stream.kind == StreamKind::kAllToAll), i);
    if (!inserted) {
      throw_input_error(name(i) + ": field 'instruction'",
                        "actor " + std::to_string(e.actor) + ", step " + std::to_string(e.step) +
                            ", instruction " + std::to_string(e.instruction) +
                            " is recorded twice (also events[" + std::to_string(it->second) + "])");
    }
    if (e.stream.kind != StreamKind::kRecv) order.push_back(i);
  }
  const auto key = [&](size_t i) {
    const TraceEvent& e = events[i];
    return std::tuple(e.actor, e.stream, e.start_s, e.end_s, i);
  };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  for (size_t k = 1; k < order.size(); ++k) {
    const TraceEvent& prev = events[order[k - 1]];
    const TraceEvent& e = events[order[k]];
    if (prev.actor != e.actor || prev.stream != e.stream) continue;
    // Times written with fewer digits by other tools may touch within rounding: 1 ns slack.
    if (e.start_s < prev.end_s - 1e-9) {
      throw_input_error(name(order[k]) + ": field 'start_s'",
                        "overlaps events[" + std::to_string(order[k - 1]) + "] on stream " +
                            to_string(e.stream) + " of actor " + std::to_string(e.actor) +
                            " (starts at " + describe(e.start_s) +
                            " s, before that event ends at " + describe(prev.end_s) +
                            " s); a stream runs one instruction at a time");
    }
  }
}

}  // namespace

std::string TraceEvent::name() const {
  Instruction ins;
  ins.op = op;
  ins.tasks = tasks;
  ins.stage = stage;
  ins.peer = peer;
  ins.bytes = bytes;
  ins.tag = tag;
  if (stream.kind == StreamKind::kAllToAll) return "a2a " + to_string(ins);
  return to_string(ins);
}

void sort_trace(Trace& trace) {
  std::stable_sort(trace.events.begin(), trace.events.end(),
                   [](const TraceEvent& a, const TraceEvent& b) {
                     return std::tie(a.start_s, a.actor, a.instruction, a.step) <
                            std::tie(b.start_s, b.actor, b.instruction, b.step);
                   });
  std::stable_sort(trace.memory.begin(), trace.memory.end(),
                   [](const MemorySample& a, const MemorySample& b) {
                     return std::tie(a.time_s, a.actor) < std::tie(b.time_s, b.actor);
                   });
}

nlohmann::json trace_to_json(const Trace& trace) {
  nlohmann::json events = nlohmann::json::array();
  for (const TraceEvent& e : trace.events) {
    nlohmann::json tasks = nlohmann::json::array();
    for (const TaskRef& t : e.tasks) tasks.push_back(to_string(t));
    events.push_back({{"actor", e.actor},
                      {"instruction", e.instruction},
                      {"step", e.step},
                      {"op", std::string(to_string(e.op))},
                      {"stream", to_string(e.stream)},
                      {"tasks", std::move(tasks)},
                      {"stage", e.stage},
                      {"peer", e.peer},
                      {"bytes", e.bytes},
                      {"tag", e.tag},
                      {"start_s", e.start_s},
                      {"end_s", e.end_s}});
    if (!e.parts.empty()) {
      nlohmann::json parts = nlohmann::json::array();
      for (const TracePart& p : e.parts)
        parts.push_back({{"name", p.name}, {"duration_s", p.duration_s}});
      events.back()["parts"] = std::move(parts);
    }
  }
  nlohmann::json memory = nlohmann::json::array();
  for (const MemorySample& m : trace.memory) {
    memory.push_back({{"actor", m.actor}, {"time_s", m.time_s}, {"bytes", m.bytes}});
  }
  nlohmann::json j = {{"format", kTraceFormat},       {"version", kTraceVersion},
                      {"source", trace.source},       {"num_actors", trace.num_actors},
                      {"num_steps", trace.num_steps}, {"events", std::move(events)},
                      {"memory", std::move(memory)}};
  if (const auto& w = trace.workload) {
    j["workload"] = {{"hidden", w->hidden},
                     {"ffn", w->ffn},
                     {"seq", w->seq},
                     {"layers_per_stage", w->layers_per_stage},
                     {"optimizer", w->optimizer},
                     {"dp", w->dp}};
    if (w->moe())
      j["workload"]["moe"] = {
          {"experts", w->experts}, {"top_k", w->top_k}, {"ep", w->ep}, {"router", w->router}};
  }
  return j;
}

void check_trace_writable(const Trace& trace, const std::string& flag) {
  double last = 0;
  for (const TraceEvent& e : trace.events) last = std::max(last, e.end_s);
  if (last <= kMaxTraceTimeS) return;
  char text[200];
  std::snprintf(text, sizeof text,
                "the simulated step lasts %.4g s, past the %.0e s a trace holds (its cluster is "
                "far too slow for the model): no trace or timeline is written of it",
                last, kMaxTraceTimeS);
  throw_input_error(flag, text);
}

Trace trace_from_json(const nlohmann::json& j, const std::string& where, bool whole) {
  if (!j.is_object())
    throw_input_error(where, "expected a JSON object (a jaxpp-sim trace), got " + describe(j));
  JsonObject obj(j, where);
  const std::string format = obj.string("format");
  if (format != kTraceFormat) {
    throw_input_error(obj.field("format"),
                      std::string("expected \"") + kTraceFormat + "\", got \"" + format + "\"");
  }
  const int64_t version = obj.integer("version");
  if (version != kTraceVersion) {
    throw_input_error(obj.field("version"), "unsupported trace version " + std::to_string(version) +
                                                " (this build reads " +
                                                std::to_string(kTraceVersion) + ")");
  }
  Trace t;
  t.source = obj.string_or("source", "");
  t.num_actors = obj.positive_int("num_actors");
  if (t.num_actors > kMaxStages) {
    throw_input_error(obj.field("num_actors"), "too large: " + std::to_string(t.num_actors) +
                                                   " (the limit is " + std::to_string(kMaxStages) +
                                                   ")");
  }
  t.num_steps = obj.positive_int_or("num_steps", 1);
  const nlohmann::json& events = obj.array("events");
  t.events.reserve(events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    t.events.push_back(event_from_json(events[i], where + ": events[" + std::to_string(i) + "]",
                                       t.num_actors, t.num_steps));
  }
  check_event_set(t.events, where);
  // The header agrees with the events: a known source, and every actor and step it counts has
  // events (num_actors 5 on a 2-actor trace drew three empty rows; calibrate took num_steps 1000
  // of a 3-step trace).
  if (!t.source.empty() && t.source != "simulated" && t.source != "measured:threads" &&
      t.source != "measured:mpi" && t.source != "measured:cuda")
    throw_input_error(obj.field("source"),
                      "expected \"simulated\" or \"measured:BACKEND\" (threads, mpi or cuda), "
                      "got \"" + t.source + "\"");
  if (whole && !t.events.empty()) {
    if (static_cast<size_t>(t.num_steps) > t.events.size())  // before a vector of num_steps
      throw_input_error(obj.field("num_steps"), std::to_string(t.num_steps) +
                                                    " steps, but the trace has " +
                                                    std::to_string(t.events.size()) + " events");
    std::vector<char> actor_seen(static_cast<size_t>(t.num_actors), 0);
    std::vector<char> step_seen(static_cast<size_t>(t.num_steps), 0);
    for (const TraceEvent& e : t.events) {
      actor_seen[static_cast<size_t>(e.actor)] = 1;
      step_seen[static_cast<size_t>(e.step)] = 1;
    }
    for (int a = 0; a < t.num_actors; ++a)
      if (!actor_seen[static_cast<size_t>(a)])
        throw_input_error(obj.field("num_actors"),
                          std::to_string(t.num_actors) + " actors, but actor " +
                              std::to_string(a) + " has no event");
    for (int st = 0; st < t.num_steps; ++st)
      if (!step_seen[static_cast<size_t>(st)])
        throw_input_error(obj.field("num_steps"), std::to_string(t.num_steps) +
                                                      " steps, but step " + std::to_string(st) +
                                                      " has no event");
  }
  if (obj.has("memory")) {
    const nlohmann::json& memory = obj.array("memory");
    for (size_t i = 0; i < memory.size(); ++i) {
      JsonObject m(memory[i], where + ": memory[" + std::to_string(i) + "]");
      MemorySample s;
      s.actor = int_in_range(m, "actor", 0, t.num_actors - 1);
      s.time_s = time_in_range(m, "time_s");
      s.bytes = m.non_negative_integer("bytes");
      m.reject_unknown({"actor", "time_s", "bytes"});
      t.memory.push_back(s);
    }
  }
  if (obj.has("workload")) {
    const JsonObject w = obj.object("workload");
    TraceWorkload& wl = t.workload.emplace();
    wl.hidden = int_in_range(w, "hidden", 1, kMaxHidden);
    wl.ffn = int_in_range(w, "ffn", 0, kMaxFfnHidden);
    wl.seq = int_in_range(w, "seq", 1, kMaxSeqLen);
    wl.layers_per_stage = int_in_range(w, "layers_per_stage", 1, kMaxLayers);
    wl.optimizer = w.string("optimizer");
    if (wl.optimizer != "sgd" && wl.optimizer != "adam")
      throw_input_error(w.field("optimizer"),
                        "expected \"sgd\" or \"adam\", got \"" + wl.optimizer + "\"");
    wl.dp = int_in_range(w, "dp", 1, kMaxStages);
    if (w.has("moe")) {
      const JsonObject m = w.object("moe");
      wl.experts = int_in_range(m, "experts", 1, kMaxExperts);
      wl.top_k = int_in_range(m, "top_k", 1, wl.experts);
      wl.ep = int_in_range(m, "ep", 1, wl.dp);
      wl.router = m.string("router");
      if (wl.router != "softmax" && wl.router != "sigmoid")
        throw_input_error(m.field("router"),
                          "expected \"softmax\" or \"sigmoid\", got \"" + wl.router + "\"");
      m.reject_unknown({"experts", "top_k", "ep", "router"});
    }
    w.reject_unknown({"hidden", "ffn", "seq", "layers_per_stage", "optimizer", "dp", "moe"});
  }
  obj.reject_unknown(
      {"format", "version", "source", "num_actors", "num_steps", "events", "memory", "workload"});
  sort_trace(t);
  return t;
}

Trace load_trace(const std::string& path) { return trace_from_json(read_json_file(path), path); }

void save_trace(const Trace& trace, const std::string& path) {
  write_text_file_atomic(path, trace_to_json(trace).dump(1) + "\n");
}

}  // namespace jaxpp
