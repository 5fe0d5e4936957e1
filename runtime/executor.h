// Executor: runs one worker's (actor, replica) instruction list of a Program, step after step,
// with a Backend moving the bytes and a Workload doing the compute. All control flow of the
// runtime lives here and is shared by the threads, mpi and cuda backends.
//
// Semantics (graph/program.h): the actor has a compute stream (kCompute, kOptimizer), a send and
// a recv stream per peer and a collective stream (kAllReduce). An instruction is issued when the
// previous instruction of its stream has been issued (streams are FIFO), and every one of its
// `deps` has finished. Then:
//   kSend      the tensor (Workload::take_output of tasks[0]) is handed to the backend at once
//              (Backend::send_message; buffered send, the send ends when it is posted). In
//              emulation the message carries a ready time = now + the transfer's predicted
//              duration.
//   kRecv      is posted as soon as it is issued (recvs of one stream are matched in order, by
//              tag); it finishes when its message has arrived (and its ready time has passed).
//   kCompute   the fused tasks run one after another on the worker's thread; the instruction
//              lasts at least Workload::emulated_s (sleep).
//   kAllReduce Backend::allreduce_tensor of Workload::grad_buffer(stage) across replicas. As in the
//              simulator's default (no overlap of gradient reduction), an all-reduce also waits
//              until every kCompute of the actor has finished. A per-microbatch reduction of
//              gradient sharding (a kAllReduce with a task, schedules/lower.h) reduces what the
//              stage's buffer accumulated since the previous one and moves it out; the final one
//              adds the reduced parts back. It lasts Workload::emulated_s like every instruction.
//   kAllGather Workload::gather_parameters(stage) (parameter sharding): the MLP workload rebuilds
//              the stage's weights from every replica's shard with an all-reduce of the shards
//              (zeros elsewhere). On an actor with all-gathers, computes wait for them, so no
//              collective of that actor waits for its last compute: each runs when its deps are
//              done (the collective stream stays in program order).
//   kOptimizer Workload::optimizer_step(stage).
// Communication is issued eagerly; computes in program order. When nothing can be issued the
// executor blocks on the receive the next compute waits for (or the oldest posted receive).
// A receive (or collective) that does not complete within `timeout_s` of the start of the wait
// fails the run with a RuntimeFailure naming the actor, replica, step and instruction; the
// executor then calls Backend::abort so every other worker stops too.
//
// Tensors stay wherever the workload keeps them (runtime/device.h): the executor only moves
// DeviceArrays between Workload and Backend, so the same control flow drives host memory (threads,
// mpi) and GPU memory (cuda).
// Each training step starts with a barrier of all workers. Message keys are
// step * (max tag + 1) + tag.
// Trace: one TraceEvent per instruction per step (start/end in the backend's clock, seconds);
// memory samples (Workload::bytes_held) after every instruction that changes it.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/program.h"
#include "runtime/backend.h"
#include "runtime/workload.h"
#include "trace/trace.h"

namespace jaxpp {

struct ExecutorOptions {
  int num_steps = 1;      // training steps to run (warm-up included)
  double timeout_s = 30;  // per blocking wait
  // Fault injection (tests): drop every send with this tag (-1 = none) ...
  int64_t drop_tag = -1;
  // ... or make this actor (replica 0) exit the process abruptly when it reaches instruction
  // `kill_at_instruction` of step 0 (-1 = none; used with mpi).
  int kill_actor = -1;
  int kill_at_instruction = 0;
};

struct WorkerRecord {
  int actor = 0;
  int replica = 0;
  std::vector<TraceEvent> events;
  std::vector<MemorySample> memory;
  std::vector<double> step_begin_s;  // after the step's barrier
  std::vector<double> step_end_s;    // end of the worker's last instruction of the step
};

// Runs `options.num_steps` steps of the actor's list. RuntimeFailure on timeout, abort or a
// program that can never proceed.
WorkerRecord run_worker(const Program& program, Backend& backend, Workload& workload,
                        const ExecutorOptions& options);

// Largest tag of the program (keys are step * (max_tag + 1) + tag).
int64_t max_tag(const Program& program);

}  // namespace jaxpp
