// Trace: timed events of one executed (simulated or measured) program.
//
// The simulator and the runtime both produce a Trace in this one format, so every writer
// (Chrome/Perfetto JSON, Graphviz timeline, text Gantt) and the calibration fit work on either.
// Times are in seconds from the start of the run; memory samples are bytes held by an actor
// (parameters, gradients, optimizer state and stashed activations) from `time_s` on.
//
// Usage:
//   Trace t = ...;                       // from simulate() or a runtime run
//   nlohmann::json j = trace_to_json(t); // round-trips with trace_from_json
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/program.h"

namespace jaxpp {

// A named part of a compute event's duration (the cost model's breakdown: "gemm", "attention",
// "elementwise", "tp_comm", "cp_comm", "other"); parts are laid end to end from start_s.
struct TracePart {
  std::string name;
  double duration_s = 0;
  bool operator==(const TracePart&) const = default;
};

struct TraceEvent {
  int actor = 0;
  int instruction = 0;  // index into program.actors[actor]
  int step = 0;         // training step (0 for a simulation of one iteration)
  OpKind op = OpKind::kCompute;
  StreamId stream;
  std::vector<TaskRef> tasks;  // as in the instruction
  int stage = -1;
  int peer = -1;
  int64_t bytes = 0;
  int64_t tag = -1;
  double start_s = 0;
  double end_s = 0;
  std::vector<TracePart> parts;  // optional (simulate --breakdown); written only when non-empty
  double duration_s() const { return end_s - start_s; }
  std::string name() const;  // "F3@s2", "send F3@s2 ->2", ...
};

struct MemorySample {
  int actor = 0;
  double time_s = 0;
  int64_t bytes = 0;
};

// The MLP workload a real-compute run executed (jaxpp-sim run's --hidden, --ffn, --seq,
// --layers-per-stage, --optimizer and its replicas), recorded in its measured trace so that
// `calibrate --from-trace` checks the flags it is given against them and takes them as defaults.
// Absent from simulated traces, from emulated runs (no workload runs) and from older traces.
struct TraceWorkload {
  int hidden = 0;
  int ffn = 0;  // 0 = 4 x hidden
  int seq = 0;
  int layers_per_stage = 0;
  std::string optimizer;  // "sgd" or "adam"
  int dp = 1;
  // A mixture-of-experts run (an MoE plan's workload, runtime/moe_workload.h): its experts, top-k,
  // expert-parallel size and router scoring ("softmax" or "sigmoid"); experts 0 for the dense MLP.
  int experts = 0;
  int top_k = 0;
  int ep = 1;
  std::string router;
  bool moe() const { return experts > 0; }
  bool operator==(const TraceWorkload&) const = default;
};

struct Trace {
  std::string source;  // "simulated" or "measured:<backend>"
  int num_actors = 0;
  int num_steps = 1;
  std::vector<TraceEvent> events;    // sorted by (start_s, actor, instruction)
  std::vector<MemorySample> memory;  // sorted by (time_s, actor)
  std::optional<TraceWorkload> workload;
};

nlohmann::json trace_to_json(const Trace& trace);
// `whole`: the trace of a whole run (a file), whose every actor and step has events; false for
// one worker's part of a run (the MPI backend gathers each worker's events as a trace).
Trace trace_from_json(const nlohmann::json& j, const std::string& where, bool whole = true);

// --- Added by the trace/ module (file format helpers) ---------------------------------------
//
// trace.json = { "format": "jaxpp-sim-trace", "version": 1, "source": "simulated",
//   "num_actors": 4, "num_steps": 1,
//   "events": [ { "actor": 0, "instruction": 3, "step": 0, "op": "send", "stream": "send->1",
//                 "tasks": ["F0@s0"], "stage": 0, "peer": 1, "bytes": 1048576, "tag": 7,
//                 "start_s": 0.0012, "end_s": 0.0015,
//                 "parts": [{"name": "gemm", "duration_s": 0.0002}, ...] (optional) }, ... ],
//   "memory": [ { "actor": 0, "time_s": 0.0, "bytes": 123456 }, ... ],
//   "workload": { "hidden": 32, "ffn": 0, "seq": 8, "layers_per_stage": 2, "optimizer": "sgd",
//                 "dp": 1, "moe": { "experts": 8, "top_k": 2, "ep": 2, "router": "softmax" }
//                 (only for an MoE run) } (optional: measured real-compute runs) }
// trace_from_json checks every field (types, ranges: actor/peer in [0, num_actors), step in
// [0, num_steps), every integer inside int without wrapping, 1e9 >= end_s >= start_s >= 0, a
// stream that matches the op and peer, a send/recv peer other than the actor itself) and that the
// events are physically possible: no (actor, step, instruction) twice, and no two events of one
// actor overlapping in time on its compute stream, collective stream or one send stream (receive
// streams may hold several posted receives at once). InputError names the event and field, e.g.
//   trace.json: events[3]: field 'end_s': expected a number >= start_s (0.5): a negative
//   duration, got 0.25
//   trace.json: events[7]: field 'start_s': overlaps events[5] on stream compute of actor 1 ...
// Events and memory samples are re-sorted into the documented order on load.
// No time in a trace is later than this: a run of more than 31 years is a corrupt file, and
// every writer (text Gantt, Perfetto, Graphviz) scales by the last end time. A simulated step
// longer than this (a cluster of 1 MFLOP/s) is refused when its trace is to be written, so that
// every trace written can be read back.
inline constexpr double kMaxTraceTimeS = 1e9;
// InputError naming `flag` when an event of `trace` ends after kMaxTraceTimeS.
void check_trace_writable(const Trace& trace, const std::string& flag);

inline constexpr int kTraceVersion = 1;
inline constexpr const char* kTraceFormat = "jaxpp-sim-trace";

Trace load_trace(const std::string& path);                     // read_json_file + trace_from_json
void save_trace(const Trace& trace, const std::string& path);  // atomic write, indented JSON

// Sorts events by (start_s, actor, instruction, step) and memory by (time_s, actor).
void sort_trace(Trace& trace);

}  // namespace jaxpp
