// Running a Program: the driver behind `jaxpp-sim run`. It creates one worker per (actor,
// replica) on the chosen backend, runs the executor (runtime/executor.h) for warm-up + measured
// steps, gathers the measured Trace, the losses and the final weights, and with `check` compares
// them twice:
//   reference      against the independent reference (runtime/reference.h: naive loops sharing
//                  no arithmetic with the workload), within kCheckRelTolerance relative;
//   orchestration  against run_reference (runtime/workload.h: the workload's own StageMath run
//                  sequentially), bit for bit on the host backends: what pipelining, messaging
//                  and all-reduce must not change. On cuda (cuBLAS vs OpenBLAS rounding) it is
//                  held to kCheckRelTolerance too. Not run for MoE (CheckResult::ran false).
// MoE (options.mlp.experts > 0): runtime/moe_workload.h on threads, mpi or cuda; the reference is
// run_independent_moe_reference and the weights compared per replica are the ones it owns.
//
//   threads  workers are threads of this process (runtime/threads_backend.h)
//   mpi      this process is one worker; the program needs num_actors * dp processes under
//            mpirun; rank 0 gathers everything and returns a RunResult with root = true, the
//            other ranks return root = false (and print nothing)
//   cuda     one GPU per worker (the CUDA plugin, runtime/cuda_plugin.h, docs/runtime.md): under
//            an MPI launcher one process per worker as for mpi, otherwise one thread per worker
//            of this process on as many GPUs; tensors stay on the GPUs and move with NCCL.
//            RuntimeFailure "--backend cuda: no CUDA device visible" on a machine without a GPU,
//            "... built without the CUDA plugin" from a binary configured without it, and one
//            line naming the missing piece when the plugin or a CUDA library cannot be loaded
//
// Step time of step s = (latest end of any worker's last instruction of s) - (earliest start of
// s after its barrier); step_time_s is the median over the measured (non-warm-up) steps.
// The trace holds replica 0's events of every step (warm-up included; TraceEvent::step) and its
// memory samples; its time axis starts at the run's origin.
// Errors: InputError for bad options, RuntimeFailure when the run fails (timeout, dead peer).
//
// Usage:
//   RunOptions o; o.steps = 2; o.dp = 2; o.check = true;
//   RunResult r = run_program(program, /*emulation_cost=*/nullptr, o);
//   r.reference.max_rel_diff_weights  // ~1e-16
//   check_passed(r)                   // both checks passed
#pragma once

#include <map>
#include <string>
#include <vector>

#include "costmodel/cost_provider.h"
#include "graph/program.h"
#include "runtime/backend.h"
#include "runtime/executor.h"
#include "runtime/workload.h"
#include "schedules/schedule.h"
#include "trace/trace.h"

namespace jaxpp {

struct RunOptions {
  BackendKind backend = BackendKind::kThreads;
  bool emulated = false;  // sleep for cost-model durations instead of real compute
  double time_scale = 1;  // emulation: durations are multiplied by this
  int steps = 3;          // measured steps
  int warmup = 1;         // steps run before the measured ones (they train too)
  int dp = 1;             // data-parallel replicas of the whole pipeline
  double timeout_s = 30;  // per blocking wait
  bool check = false;     // compare with the sequential reference (real compute only)
  MlpConfig mlp;          // sizes, optimizer, fault; stages/microbatches/replicas filled in
  int64_t drop_tag = -1;  // fault injection, see ExecutorOptions; the tag of a message, or -1
  int kill_actor = -1;    // -1, or an actor of the program ...
  int kill_at_instruction = 0;  // ... and an index into its instruction list
};

// fp64 numerics: the pipelined run and the independent reference differ only by summation order
// and by how GeLU' is written, about 1e-15 relative at the sizes tests use; a defect (a lost
// microbatch, a stale weight, a wrong scale) moves weights by 1e-8 relative or more.
inline constexpr double kCheckRelTolerance = 1e-9;

// Why `run` refuses a flag the chosen compute cannot use (the CLI's and the Python module's
// message): the MLP workload's flags (--hidden, --ffn, --seq, --layers-per-stage, --optimizer,
// --lr, --seed) with emulated compute, --time-scale with real compute.
inline constexpr const char* kMlpFlagNeedsRealCompute =
    "sets the MLP workload, which only --compute real runs (emulated compute sleeps each "
    "instruction's predicted time)";
inline constexpr const char* kTimeScaleNeedsEmulatedCompute =
    "scales the emulated durations: it needs --compute emulated";

// One comparison of a run with a reference: the loss of every step (warm-up included) and the
// final weights of every stage on every replica.
struct CheckResult {
  double max_abs_diff_loss = 0;
  double max_abs_diff_weights = 0;
  double max_rel_diff_loss = 0;     // max over steps of |run - ref| / |ref| of the step's loss
  double max_rel_diff_weights = 0;  // |run - ref| / (largest |ref weight| of the stage)
  double rel_tolerance = 0;         // what a difference may reach; 0: bit-exact
  bool passed = true;
  bool ran = true;  // false: not applicable (the orchestration check of an MoE run)
  // The first value beyond the tolerance: weights in (stage, replica, index) order, then losses
  // by step, e.g. "stage 1 (replica 0) layer 0 W1[0,0]: run 0.1, reference 0.2 (...)"; "" when
  // passed.
  std::string first_difference;
};

struct RunResult {
  bool root = true;                  // false on mpi ranks other than 0
  std::vector<double> losses;        // per measured step (real compute), mean over microbatches
  std::vector<double> step_times_s;  // per measured step
  double step_time_s = 0;            // median of step_times_s
  Trace trace;
  bool checked = false;
  std::vector<double> reference_losses;  // per measured step, of the independent reference
  CheckResult reference;                 // against the independent reference
  CheckResult orchestration;             // against the same-code sequential run_reference
  // MoE, real compute: gradient bytes reduced per step, summed over every worker (routers over
  // dp, held experts over their expert data-parallel groups; runtime/moe_workload.h).
  int64_t grad_reduce_bytes_per_step = 0;
};

// The program of a schedule run on the MLP workload (run --schedule / --schedule-file, the Python
// module's run): lowered with the workload's activation bytes (seq x hidden fp64 values) and
// gradient bytes (params_per_stage fp64 values) on every stage.
Program lower_mlp_program(const Schedule& schedule, const MlpConfig& mlp);

// The program as the MLP workload runs it: transfers carry seq x hidden doubles (runtime/
// microbench.h mlp_transfer_bytes), all-reduces a stage's gradients (MoE: the routers and the
// held experts, reduced_params_per_stage), all-gathers a stage's weights. A plan's program
// carries its own model's bytes; run_program runs a real-compute program sized so, so that its
// trace records the bytes that moved (and `run --cluster` prices the same program).
Program mlp_sized_program(Program program, const MlpConfig& mlp);

// Real compute runs mlp_sized_program(program, options.mlp), and its trace carries the workload
// (Trace::workload); emulated compute runs `program` as given (its transfers are the emulation
// cost's). InputError for options that cannot take effect: a --inject-drop tag no message of the
// program has (or a negative one other than -1), an --inject-kill actor or instruction beyond the
// program, an --inject fault without --check, and (emulated) a --timeout-s shorter than an
// instruction's emulated duration.
RunResult run_program(const Program& program, const CostProvider* emulation_cost,
                      const RunOptions& options);

// Whether a checked run passed both checks. True for a run without a check.
bool check_passed(const RunResult& result);

// The send events of a trace's steps >= first_step by (step, tag): where a recv finds its send
// (the sender's events may be missing from a trace, then there is none).
std::map<std::pair<int, int64_t>, const TraceEvent*> sends_by_step_and_tag(const Trace& trace,
                                                                           int first_step);

// Mean duration per task-kind label of the steps >= first_step of a trace: "F", "B", "I",
// "W" (single-task computes), "fused", "send", "recv", "allreduce", "optimizer". A recv counts
// from when both of its ends were posted (the later of its start and its matching send's start,
// matched by step and tag) to its end: the transfer, not the time its actor waited for the
// sender, which is how the simulator's rendezvous recvs last (docs/simulate.md), so measured and
// predicted recvs compare. A recv whose send is not in the trace counts whole.
std::map<std::string, double> mean_durations_by_kind(const Trace& trace, int first_step);
// Label of an instruction for the above ("F", ..., "fused", "send", ...).
std::string kind_label(OpKind op, const std::vector<TaskRef>& tasks);

// Keeps freed host memory in the process (glibc: no trimming, no mmap below 32 MiB), so a task's
// fresh tensors reuse memory instead of faulting new pages in (microseconds per 4 KiB page, a
// cost of no kernel). run_program and the calibration microbenchmarks call it, so both measure
// the same steady state. Idempotent.
void keep_freed_host_memory();
// Rank and size of the MPI job this process belongs to (MPI is initialised on first use; {0, 1}
// when not started by mpirun). For `run PLAN.json --backend mpi`, whose world size must match
// the plan's replicas.
struct MpiWorld {
  int rank = 0;
  int size = 1;
};
MpiWorld mpi_world();

}  // namespace jaxpp
