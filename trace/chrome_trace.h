// Chrome / Perfetto trace-event JSON for a Trace (open in ui.perfetto.dev or chrome://tracing).
//
// Layout of the output ({"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}):
//   process  pid = actor + 1 (pid 0 is avoided: some viewers treat it as the idle process),
//            named "actor <r>" (metadata "process_name", sorted by actor)
//   thread   one tid per stream of the actor, named by to_string(StreamId): compute (tid 1),
//            collective (tid 2), send->k (tid 3 + 2k), recv<-k (tid 4 + 2k), alltoall (tid 2^20,
//            the MoE all-to-all of simulated traces, named "a2a <tasks>")
//   "X"      one complete event per TraceEvent; ts/dur in microseconds; name = TraceEvent::name();
//            cat = category ("F", "B", "I", "W", "comm", "allreduce", "optimizer"); cname colours
//            it by category; args = {op, tasks, stage, bytes, tag, peer, step, instruction}
//            and, when the event has parts (simulate --breakdown), one "X" per part (cat
//            "breakdown", named by the part) laid end to end inside it, so viewers nest them
//   "s"/"f"  one flow arrow per send that has a matching recv (same tag): id = tag, the start at
//            the send's start, the finish at the recv's end, both bound to the enclosing slice
//            ("bp": "e")
//   "C"      a counter "memory" per actor (args {"GiB": ...}), one sample per MemorySample
// Output order is deterministic (metadata, then X events in trace order, flows, counters).
//
// Usage:
//   nlohmann::json chrome = trace_to_chrome_json(trace);
//   write_text_file_atomic("trace.perfetto.json", chrome.dump());
#pragma once

#include <nlohmann/json.hpp>

#include "trace/trace.h"

namespace jaxpp {

nlohmann::json trace_to_chrome_json(const Trace& trace);

// The tid used for a stream (see above); exposed for tests. The all-to-all stream of MoE layers
// (simulated traces) is kAllToAllTid, shown below an actor's other streams.
inline constexpr int kAllToAllTid = 1 << 20;
int chrome_tid_of(const StreamId& stream);

}  // namespace jaxpp
