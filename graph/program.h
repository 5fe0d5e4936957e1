// Program: the lowered plan, one instruction stream per actor. It is the contract between
// planning and execution: the simulator and the runtime are two executors of the same value.
//
// Each actor has a compute stream, one send stream and one recv stream per peer, and a
// collective stream. Instructions on one stream run in program order; different streams overlap.
// An instruction starts when
//   (1) its stream has finished the previous instruction of that stream,
//   (2) every instruction in `deps` (indices of EARLIER instructions on the same actor) finished,
//   (3) for kSend/kRecv: the matching instruction (same `tag`) on the peer is posted too
//       (rendezvous); both end together when the bytes have arrived.
//   kCompute    a fused group of tasks (one or more), issued as one executable
//   kSend/kRecv the output of `tasks[0]` (F: activation, B/I: input gradient) to/from `peer`
//   kAllReduce  gradient reduction of `stage` across data-parallel replicas (collective stream);
//               with `tasks` = {a B or W task}: the reduce-scatter of that microbatch's gradient
//               (gradient sharding, schedules/lower.h), otherwise the stage's final reduction
//   kOptimizer  the optimizer step of `stage` (compute stream)
//   kAllGather  parameter all-gather of `stage` across the data-parallel replicas before the one
//               task in `tasks` (an F, or a B or I) runs (parameter sharding, schedules/lower.h;
//               collective stream; bytes: the stage's per-device weight bytes)
// A well-formed program (check_program) has, for every send, exactly one recv with the same tag on
// the peer, with matching bytes and task, and the same relative order of tags on both sides of
// every (sender, receiver) pair.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/small_vector.h"
#include "graph/task.h"

namespace jaxpp {

enum class OpKind { kCompute, kSend, kRecv, kAllReduce, kOptimizer, kAllGather };
inline constexpr std::array kAllOpKinds = {OpKind::kCompute,   OpKind::kSend,
                                           OpKind::kRecv,      OpKind::kAllReduce,
                                           OpKind::kOptimizer, OpKind::kAllGather};
// "compute", "send", "recv", "allreduce", "optimizer", "allgather"
std::string_view to_string(OpKind k);

// kAllToAll: the expert-parallel all-to-all of MoE layers. No instruction runs on it; the
// simulator records the all-to-all inside compute instructions as trace events on it.
enum class StreamKind { kCompute, kSend, kRecv, kCollective, kAllToAll };
std::string_view to_string(StreamKind k);  // "compute", "send", "recv", "collective", "alltoall"

struct StreamId {
  StreamKind kind = StreamKind::kCompute;
  int peer = -1;  // kSend/kRecv only
  auto operator<=>(const StreamId&) const = default;
};
std::string to_string(const StreamId& s);  // "compute", "send->3", "recv<-1", "collective"

// Almost every instruction has one or two tasks and dependencies: both are stored inline.
using TaskList = SmallVector<TaskRef, 2>;
using DepList = SmallVector<int, 2>;

struct Instruction {
  OpKind op = OpKind::kCompute;
  TaskList tasks;     // kCompute: the fused group; kSend/kRecv: the producing task
  int stage = -1;     // stage of tasks[0], or the stage of kAllReduce/kOptimizer
  int peer = -1;      // kSend: destination actor; kRecv: source actor
  int64_t bytes = 0;  // kSend/kRecv: payload; kAllReduce: gradient bytes
  int64_t tag = -1;   // kSend/kRecv: pairs a send with its recv, unique in the program
  DepList deps;       // earlier instructions of the same actor that must finish first
  bool operator==(const Instruction&) const = default;
};
std::string to_string(const TaskList& tasks);  // "F0@s3+B0@s3", as for a std::vector<TaskRef>
StreamId stream_of(const Instruction& ins);
// "F3@s2", "send F3@s2 ->2", "allreduce s1", "reduce-scatter B3@s1", ...
std::string to_string(const Instruction& ins);

struct Program {
  int num_actors = 0;
  int num_stages = 0;
  int num_microbatches = 0;
  std::vector<int> stage_to_actor;
  std::vector<std::vector<Instruction>> actors;  // actors[r] = instruction list of actor r

  int64_t num_instructions() const;
  // Whether any actor's list holds an instruction of kind `op` (e.g. kAllGather: the program
  // shards parameters).
  bool has_op(OpKind op) const;
  bool operator==(const Program&) const = default;
};

// Structural check: deps point backwards, peers and stages in range, every send has exactly one
// matching recv (tag, bytes, task) on the peer in the same relative order. InputError naming
// actor, instruction index and reason otherwise.
void check_program(const Program& program);

nlohmann::json program_to_json(const Program& program);
Program program_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace jaxpp
