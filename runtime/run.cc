#include "runtime/run.h"

#include <cblas.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "graph/error.h"
#include "runtime/comm_plan.h"
#include "runtime/cuda_plugin.h"
#include "runtime/moe_workload.h"
#include "runtime/mpi_backend.h"
#include "runtime/reference.h"
#include "runtime/threads_backend.h"
#include "schedules/lower.h"

namespace jaxpp {

Program lower_mlp_program(const Schedule& schedule, const MlpConfig& mlp) {
  LoweringOptions lo;
  const int64_t act = static_cast<int64_t>(mlp.seq) * mlp.hidden * 8;
  lo.activation_bytes.assign(schedule.num_stages, act);
  lo.grad_bytes.assign(schedule.num_stages, mlp.params_per_stage() * 8);
  return lower(schedule, lo);
}

Program mlp_sized_program(Program program, const MlpConfig& mlp) {
  for (auto& list : program.actors)
    for (Instruction& ins : list) {
      if (ins.op == OpKind::kSend || ins.op == OpKind::kRecv) ins.bytes = mlp_transfer_bytes(mlp);
      if (ins.op == OpKind::kAllReduce)
        ins.bytes = mlp.reduced_params_per_stage() * static_cast<int64_t>(sizeof(double));
      if (ins.op == OpKind::kAllGather)  // the stage's weights (parameter sharding)
        ins.bytes = mlp.params_per_stage() * static_cast<int64_t>(sizeof(double));
    }
  return program;
}

std::string_view to_string(BackendKind k) {
  switch (k) {
    case BackendKind::kThreads:
      return "threads";
    case BackendKind::kMpi:
      return "mpi";
    case BackendKind::kCuda:
      return "cuda";
  }
  return "?";
}

BackendKind parse_backend_kind(std::string_view s, const std::string& where) {
  if (s == "threads") return BackendKind::kThreads;
  if (s == "mpi") return BackendKind::kMpi;
  if (s == "cuda") return BackendKind::kCuda;
  throw_input_error(where, "expected threads, mpi or cuda, got '" + std::string(s) + "'");
}

namespace {

std::string format_g(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// What one worker brings back.
struct WorkerOutput {
  WorkerRecord record;
  std::map<int, std::vector<double>> params;    // stage -> weights
  std::map<int, std::map<int, double>> losses;  // step -> microbatch -> loss
  // MoE: the [begin, end) parameter ranges this replica owns (router, its experts), the same for
  // every stage; empty: all of them.
  std::vector<std::pair<size_t, size_t>> held;
  int64_t grad_reduce_bytes = 0;  // MoE: gradient bytes this worker reduced, every step
};

nlohmann::json output_to_json(const WorkerOutput& o, int num_actors) {
  Trace t;
  t.num_actors = num_actors;
  // Every step the worker ran (trace_from_json checks each event's step against it).
  t.num_steps = std::max(1, static_cast<int>(o.record.step_begin_s.size()));
  t.events = o.record.events;
  t.memory = o.record.memory;
  nlohmann::json j;
  j["actor"] = o.record.actor;
  j["replica"] = o.record.replica;
  j["step_begin_s"] = o.record.step_begin_s;
  j["step_end_s"] = o.record.step_end_s;
  j["trace"] = trace_to_json(t);
  nlohmann::json params = nlohmann::json::array();
  for (const auto& [s, p] : o.params) params.push_back({{"stage", s}, {"weights", p}});
  j["params"] = params;
  nlohmann::json losses = nlohmann::json::array();
  for (const auto& [step, per_mb] : o.losses)
    for (const auto& [mb, l] : per_mb) losses.push_back({step, mb, l});
  j["losses"] = losses;
  nlohmann::json held = nlohmann::json::array();
  for (const auto& [b, e] : o.held) held.push_back({b, e});
  j["held"] = held;
  j["grad_reduce_bytes"] = o.grad_reduce_bytes;
  return j;
}

WorkerOutput output_from_json(const nlohmann::json& j) {
  WorkerOutput o;
  o.record.actor = j.at("actor").get<int>();
  o.record.replica = j.at("replica").get<int>();
  o.record.step_begin_s = j.at("step_begin_s").get<std::vector<double>>();
  o.record.step_end_s = j.at("step_end_s").get<std::vector<double>>();
  Trace t = trace_from_json(j.at("trace"), "mpi worker record", /*whole=*/false);
  o.record.events = std::move(t.events);
  o.record.memory = std::move(t.memory);
  for (const auto& p : j.at("params"))
    o.params[p.at("stage").get<int>()] = p.at("weights").get<std::vector<double>>();
  for (const auto& l : j.at("losses"))
    o.losses[l.at(0).get<int>()][l.at(1).get<int>()] = l.at(2).get<double>();
  for (const auto& h : j.at("held"))
    o.held.push_back({h.at(0).get<size_t>(), h.at(1).get<size_t>()});
  o.grad_reduce_bytes = j.at("grad_reduce_bytes").get<int64_t>();
  return o;
}

std::unique_ptr<Workload> make_workload(const Program& program, const CostProvider* cost,
                                        const RunOptions& o, const MlpConfig& mlp, Backend& backend,
                                        Device& device) {
  const int actor = backend.actor(), replica = backend.replica();
  if (o.emulated) return std::make_unique<EmulatedWorkload>(*cost, actor, o.time_scale);
  if (mlp.moe())
    return std::make_unique<MoeWorkload>(mlp, actor, replica, program.stage_to_actor, backend,
                                         o.timeout_s, device);
  return std::make_unique<MlpWorkload>(mlp, actor, replica, program.stage_to_actor, device);
}

WorkerOutput collect(const WorkerRecord& record, const Workload& workload, bool emulated,
                     int num_stages) {
  WorkerOutput out;
  out.record = record;
  if (emulated) return out;
  if (const auto* moe = dynamic_cast<const MoeWorkload*>(&workload)) {
    for (int s = 0; s < num_stages; ++s)
      if (moe->holds_stage(s)) out.params[s] = moe->params(s);
    out.losses = moe->losses();
    out.held = moe->held_ranges();
    out.grad_reduce_bytes = moe->grad_reduce_bytes();
    return out;
  }
  const auto& mlp = dynamic_cast<const MlpWorkload&>(workload);
  for (int s = 0; s < num_stages; ++s)
    if (mlp.holds_stage(s)) out.params[s] = mlp.params(s);
  out.losses = mlp.losses();
  return out;
}

// What one worker does once its backend exists: build the workload on `device`, run the
// executor, collect the results.
WorkerOutput run_one(const Program& program, const CostProvider* cost, const RunOptions& o,
                     const MlpConfig& mlp, const ExecutorOptions& eo, Backend& backend,
                     Device& device) {
  std::unique_ptr<Workload> workload = make_workload(program, cost, o, mlp, backend, device);
  WorkerRecord rec = run_worker(program, backend, *workload, eo);
  return collect(rec, *workload, o.emulated, program.num_stages);
}

// The body of one worker, given its host backend (threads or mpi).
using WorkerBody = std::function<WorkerOutput(Backend& host)>;

// One thread per worker; the first failure aborts the world and is rethrown.
std::vector<WorkerOutput> run_threads(int num_actors, int dp, const WorkerBody& body) {
  ThreadsWorld world(num_actors, dp);
  std::vector<WorkerOutput> outputs(static_cast<size_t>(num_actors) * dp);
  run_on_threads(world, [&](int a, int r) {
    std::unique_ptr<Backend> backend = world.backend(a, r);
    try {
      outputs[static_cast<size_t>(r) * num_actors + a] = body(*backend);
    } catch (const std::exception& e) {
      world.abort("actor " + std::to_string(a) + " (replica " + std::to_string(r) +
                  "): " + e.what());
    }
  });
  std::string why = world.abort_reason();
  if (!why.empty()) throw RuntimeFailure(why);
  return outputs;
}

// This process is one worker; rank 0 gathers every worker's output (*root = true there).
std::vector<WorkerOutput> run_mpi(int num_actors, int dp, const WorkerBody& body, bool* root) {
  MpiBackend backend(num_actors, dp);
  WorkerOutput mine;
  try {
    mine = body(backend);
  } catch (const std::exception& e) {
    mpi_abort(
        "jaxpp-sim run: error: rank " + std::to_string(MpiSession::get().rank()) + ": " + e.what(),
        1);
  }
  std::string text = output_to_json(mine, num_actors).dump();
  std::vector<std::vector<char>> all =
      mpi_gather_bytes(std::vector<char>(text.begin(), text.end()));
  *root = MpiSession::get().rank() == 0;
  std::vector<WorkerOutput> outputs;
  for (const auto& bytes : all)
    outputs.push_back(output_from_json(nlohmann::json::parse(bytes.begin(), bytes.end())));
  return outputs;
}

// Host-local rank and size of this MPI process (the processes sharing its memory).
std::pair<int, int> mpi_local_rank_and_size() {
  MPI_Comm local = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int rank = 0, size = 1;
  MPI_Comm_rank(local, &rank);
  MPI_Comm_size(local, &size);
  MPI_Comm_free(&local);
  return {rank, size};
}

// One GPU per worker: one process per worker under an MPI launcher (NCCL ids made on rank 0 and
// broadcast), otherwise one thread per worker of this process on as many GPUs.
std::vector<WorkerOutput> run_cuda(const Program& program, const CostProvider* cost,
                                   const RunOptions& o, const MlpConfig& mlp,
                                   const ExecutorOptions& eo, bool* root) {
  CudaPlugin& cuda = cuda_plugin();  // RuntimeFailure naming what is missing
  int devices = cuda.prepare_process();
  int P = program.num_actors;
  int workers = P * o.dp;
  CommPlan plan = make_comm_plan(program, o.dp);
  auto body = [&](Backend& host, int device, const std::vector<NcclId>& ids) {
    int worker = plan.worker(host.actor(), host.replica());
    std::unique_ptr<CudaWorker> w =
        cuda.make_worker(host, device, worker, plan, ids, o.timeout_s, o.emulated ? nullptr : &mlp);
    return run_one(program, cost, o, mlp, eo, w->backend(), w->device());
  };
  if (!launched_by_mpi_launcher()) {
    assign_device(0, workers, devices);  // RuntimeFailure when there are too few GPUs
    std::vector<NcclId> ids = cuda.make_nccl_ids(plan.comms.size());
    return run_threads(P, o.dp, [&](Backend& host) {
      int worker = plan.worker(host.actor(), host.replica());
      return body(host, assign_device(worker, workers, devices), ids);
    });
  }
  return run_mpi(
      P, o.dp,
      [&](Backend& host) {
        auto [local_rank, local_size] = mpi_local_rank_and_size();
        int device = device_of_rank(local_rank, local_size, devices);
        std::vector<NcclId> ids(plan.comms.size());
        if (MpiSession::get().rank() == 0) ids = cuda.make_nccl_ids(plan.comms.size());
        MPI_Bcast(ids.data(), static_cast<int>(ids.size() * sizeof(NcclId)), MPI_BYTE, 0,
                  MPI_COMM_WORLD);
        return body(host, device, ids);
      },
      root);
}

std::string format_g17(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// One value of the run against the reference; records the first that exceeds the tolerance.
void compare_value(double run, double ref, double scale, const std::string& what, double& max_abs,
                   double& max_rel, CheckResult& check) {
  const double abs_diff = std::abs(run - ref);
  const double rel_diff = scale > 0 ? abs_diff / scale : abs_diff;
  max_abs = std::max(max_abs, abs_diff);
  max_rel = std::max(max_rel, rel_diff);
  const bool ok = check.rel_tolerance > 0 ? rel_diff <= check.rel_tolerance : run == ref;
  if (ok && !std::isnan(run)) return;
  check.passed = false;
  if (!check.first_difference.empty()) return;
  char diff[120];
  if (check.rel_tolerance > 0)
    std::snprintf(diff, sizeof diff, "relative difference %.3g > %.3g", rel_diff,
                  check.rel_tolerance);
  else
    std::snprintf(diff, sizeof diff, "differs by %.3g, bit-exact expected", abs_diff);
  check.first_difference =
      what + ": run " + format_g17(run) + ", reference " + format_g17(ref) + " (" + diff + ")";
}

// The run's final weights (every stage of every replica) and its losses of every step against
// a reference.
CheckResult compare_with(const std::vector<WorkerOutput>& outputs,
                         const std::vector<double>& losses, const ReferenceResult& ref,
                         const MlpConfig& mlp, double rel_tolerance) {
  CheckResult check;
  check.rel_tolerance = rel_tolerance;
  std::vector<std::pair<std::pair<int, int>, const std::vector<double>*>> weights;
  std::map<std::pair<int, int>, std::vector<std::pair<size_t, size_t>>> held_by;
  for (const WorkerOutput& w : outputs)
    for (const auto& [s, p] : w.params) {
      weights.push_back({{s, w.record.replica}, &p});
      held_by[{s, w.record.replica}] = w.held;
    }
  std::sort(weights.begin(), weights.end());
  for (const auto& [key, p] : weights) {
    const auto [s, r] = key;
    const std::vector<double>& q = ref.stage_params.at(s);
    if (p->size() != q.size()) throw RuntimeFailure("check: stage weights differ in size");
    double scale = 0;
    for (double v : q) scale = std::max(scale, std::abs(v));
    const std::vector<std::pair<size_t, size_t>>& held = held_by.at({s, r});
    auto owned = [&](size_t i) {
      if (held.empty()) return true;
      for (const auto& [b, e] : held)
        if (i >= b && i < e) return true;
      return false;
    };
    for (size_t i = 0; i < q.size(); ++i)
      if (owned(i))
        compare_value((*p)[i], q[i], scale,
                      "stage " + std::to_string(s) + " (replica " + std::to_string(r) + ") " +
                          describe_stage_param(mlp, i),
                      check.max_abs_diff_weights, check.max_rel_diff_weights, check);
  }
  for (size_t s = 0; s < losses.size(); ++s)
    compare_value(losses[s], ref.losses.at(s), std::abs(ref.losses.at(s)),
                  "loss of step " + std::to_string(s), check.max_abs_diff_loss,
                  check.max_rel_diff_loss, check);
  return check;
}

// Per stage, the microbatches of its B and W tasks in program order: the order in which the
// stage's weight gradients are accumulated.
std::vector<std::vector<int>> weight_gradient_order(const Program& program) {
  std::vector<std::vector<int>> order(program.num_stages);
  for (const auto& list : program.actors)
    for (const Instruction& ins : list)
      if (ins.op == OpKind::kCompute)
        for (const TaskRef& t : ins.tasks)
          if (t.kind == TaskKind::kB || t.kind == TaskKind::kW)
            order.at(t.stage).push_back(t.microbatch);
  return order;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

MpiWorld mpi_world() {
  const MpiSession& session = MpiSession::get();
  return {session.rank(), session.size()};
}

void keep_freed_host_memory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest; also stops its dynamic adjustment
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

std::string kind_label(OpKind op, const std::vector<TaskRef>& tasks) {
  if (op != OpKind::kCompute) return std::string(to_string(op));
  if (tasks.size() == 1) return std::string(to_string(tasks[0].kind));
  return "fused";
}

bool check_passed(const RunResult& result) {
  return !result.checked || (result.reference.passed && result.orchestration.passed);
}

std::map<std::pair<int, int64_t>, const TraceEvent*> sends_by_step_and_tag(const Trace& trace,
                                                                           int first_step) {
  std::map<std::pair<int, int64_t>, const TraceEvent*> sends;
  for (const TraceEvent& e : trace.events)
    if (e.op == OpKind::kSend && e.step >= first_step) sends[{e.step, e.tag}] = &e;
  return sends;
}

std::map<std::string, double> mean_durations_by_kind(const Trace& trace, int first_step) {
  const auto sends = sends_by_step_and_tag(trace, first_step);
  std::map<std::string, std::pair<double, int>> acc;
  for (const TraceEvent& e : trace.events) {
    if (e.step < first_step) continue;
    auto& [sum, n] = acc[kind_label(e.op, e.tasks)];
    double start = e.start_s;
    if (e.op == OpKind::kRecv) {
      auto it = sends.find({e.step, e.tag});
      if (it != sends.end()) start = std::clamp(it->second->start_s, e.start_s, e.end_s);
    }
    sum += e.end_s - start;
    ++n;
  }
  std::map<std::string, double> out;
  for (const auto& [k, v] : acc) out[k] = v.first / v.second;
  return out;
}

namespace {

// The fault-injection options must name something the program has, or they would do nothing.
void check_injections(const Program& program, const RunOptions& o) {
  if (o.drop_tag != -1) {
    int64_t lo = -1, hi = -1;
    bool found = false;
    for (const auto& list : program.actors)
      for (const Instruction& ins : list) {
        if (ins.op != OpKind::kSend) continue;
        lo = lo < 0 ? ins.tag : std::min(lo, ins.tag);
        hi = std::max(hi, ins.tag);
        found = found || ins.tag == o.drop_tag;
      }
    const std::string flag = "--inject-drop " + std::to_string(o.drop_tag);
    if (hi < 0) throw InputError(flag + ": the program sends no message (-1 = drop none)");
    if (!found)
      throw InputError(flag + ": no message of the program has tag " + std::to_string(o.drop_tag) +
                       " (tags " + std::to_string(lo) + ".." + std::to_string(hi) +
                       "; -1 = drop none)");
  }
  if (o.kill_actor == -1) return;
  const std::string flag =
      "--inject-kill " + std::to_string(o.kill_actor) + ":" + std::to_string(o.kill_at_instruction);
  if (o.kill_actor < 0 || o.kill_actor >= program.num_actors)
    throw InputError(flag + ": actor " + std::to_string(o.kill_actor) +
                     " is beyond the program's " + std::to_string(program.num_actors) +
                     " actors (0.." + std::to_string(program.num_actors - 1) + ")");
  const int n = static_cast<int>(program.actors.at(o.kill_actor).size());
  if (o.kill_at_instruction < 0 || o.kill_at_instruction >= n)
    throw InputError(flag + ": actor " + std::to_string(o.kill_actor) + " has " +
                     std::to_string(n) + " instructions (0.." + std::to_string(n - 1) + ")");
}

// Emulated compute: a peer waiting for an instruction longer than --timeout-s would time out
// (the receive's "message lost, or the peer dead or still busy") while the instruction is only
// running, so such a run is refused
// before it starts. The durations are the emulated workload's own (EmulatedWorkload::emulated_s).
void check_emulated_timeout(const Program& program, const CostProvider& cost, const RunOptions& o) {
  double longest_s = 0;
  int actor = -1, index = -1;
  for (int a = 0; a < program.num_actors; ++a) {
    const EmulatedWorkload workload(cost, a, o.time_scale);
    const auto& list = program.actors[a];
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      if (list[i].op == OpKind::kSend || list[i].op == OpKind::kRecv) continue;
      const double s = workload.emulated_s(list[i]);
      if (s <= longest_s) continue;
      longest_s = s;
      actor = a;
      index = i;
    }
  }
  if (longest_s <= o.timeout_s) return;
  throw InputError("--timeout-s " + format_g(o.timeout_s) + " is shorter than the emulated '" +
                   to_string(program.actors[actor][index]) + "' of actor " + std::to_string(actor) +
                   " (" + format_g(longest_s) +
                   " s): a worker waiting for it would time out; give a --timeout-s above " +
                   format_g(longest_s) + " s (or a smaller --time-scale)");
}

}  // namespace

RunResult run_program(const Program& given, const CostProvider* emulation_cost,
                      const RunOptions& o) {
  check_program(given);
  if (o.steps < 1) throw InputError("--steps: expected >= 1, got " + std::to_string(o.steps));
  if (o.warmup < 0) throw InputError("--warmup: expected >= 0, got " + std::to_string(o.warmup));
  if (o.dp < 1) throw InputError("--dp: expected >= 1, got " + std::to_string(o.dp));
  if (o.timeout_s <= 0) throw InputError("--timeout-s: expected > 0");
  if (o.emulated && emulation_cost == nullptr)
    throw InputError("--compute emulated needs a cost model (a plan file or stage times)");
  if (o.emulated && o.check)
    throw InputError("--check needs --compute real (emulated compute has no numerics)");
  if (!o.emulated && (o.mlp.hidden < 1 || o.mlp.seq < 1 || o.mlp.layers_per_stage < 1))
    throw InputError("--hidden, --seq and --layers-per-stage must be >= 1");
  if (!o.emulated && o.mlp.ffn < 0)
    throw InputError("--ffn: expected >= 0 (0 = 4 x hidden), got " + std::to_string(o.mlp.ffn));
  // Real compute moves the MLP workload's tensors: the program is sized to them, so the trace
  // records the bytes that moved (a plan's program carries its own model's).
  const Program program = o.emulated ? given : mlp_sized_program(given, o.mlp);
  if (o.emulated && o.mlp.fault != MlpFault::kNone)
    throw InputError("--inject " + std::string(to_string(o.mlp.fault)) +
                     ": needs --compute real (emulated compute has no numerics)");
  if (!o.check && o.mlp.fault != MlpFault::kNone)
    throw InputError("--inject " + std::string(to_string(o.mlp.fault)) +
                     ": plants a numerical fault for --check to catch; give --check");
  check_injections(program, o);
  if (o.emulated) check_emulated_timeout(program, *emulation_cost, o);
  if (o.mlp.fault == MlpFault::kSkipAccumulate && program.num_microbatches < 2)
    throw InputError(
        "--inject skip-accumulate: needs >= 2 microbatches (with one, overwriting "
        "and accumulating the gradient agree)");
  if (o.mlp.fault == MlpFault::kExpertSwap && !o.mlp.moe())
    throw InputError("--inject expert-swap: needs an MoE plan (a model with routed experts)");
  if (o.mlp.moe() && (o.mlp.ep < 1 || o.dp % o.mlp.ep != 0))
    throw InputError("ep " + std::to_string(o.mlp.ep) + " must divide --dp " +
                     std::to_string(o.dp) + ": the runtime carves the expert ranks out of dp");
  if (!std::isfinite(o.mlp.learning_rate) || o.mlp.learning_rate < 0)
    throw InputError("--lr: expected a finite value >= 0 (0 = the optimizer's default)");
  if (!o.emulated && o.backend != BackendKind::kCuda) {
    // Every stage of every replica lives in host memory (threads; mpi ranks share the host when
    // they run on one), and a checked run keeps a sequential reference besides.
    MlpConfig sized = o.mlp;
    sized.num_microbatches = program.num_microbatches;
    const double need = mlp_memory_estimate_bytes(sized, program.num_stages) *
                        (o.backend == BackendKind::kThreads ? o.dp : 1) * (o.check ? 2 : 1);
    const double have = static_cast<double>(host_device().memory_bytes());
    if (have > 0 && need > 0.8 * have) {
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "--hidden %d --ffn %d --seq %d --layers-per-stage %d: the MLP workload needs "
                    "about %.3g GiB of host memory, the host has %.3g GiB",
                    o.mlp.hidden, o.mlp.ffn, o.mlp.seq, o.mlp.layers_per_stage, need / (1 << 30),
                    have / (1 << 30));
      throw InputError(buf);
    }
  }
  openblas_set_num_threads(1);
  keep_freed_host_memory();

  MlpConfig mlp = o.mlp;
  mlp.num_stages = program.num_stages;
  mlp.num_microbatches = program.num_microbatches;
  mlp.num_replicas = o.dp;
  ExecutorOptions eo;
  eo.num_steps = o.warmup + o.steps;
  eo.timeout_s = o.timeout_s;
  eo.drop_tag = o.drop_tag;
  eo.kill_actor = o.kill_actor;
  eo.kill_at_instruction = o.kill_at_instruction;

  RunResult result;
  std::vector<WorkerOutput> outputs;
  switch (o.backend) {
    case BackendKind::kThreads:
      outputs = run_threads(program.num_actors, o.dp, [&](Backend& host) {
        return run_one(program, emulation_cost, o, mlp, eo, host, host_device());
      });
      break;
    case BackendKind::kMpi:
      outputs = run_mpi(
          program.num_actors, o.dp,
          [&](Backend& host) {
            return run_one(program, emulation_cost, o, mlp, eo, host, host_device());
          },
          &result.root);
      break;
    case BackendKind::kCuda:
      outputs = run_cuda(program, emulation_cost, o, mlp, eo, &result.root);
      break;
  }
  if (!result.root) return result;

  // Trace (replica 0) and step times (all workers).
  int total_steps = o.warmup + o.steps;
  result.trace.source = "measured:" + std::string(to_string(o.backend));
  result.trace.num_actors = program.num_actors;
  result.trace.num_steps = total_steps;
  if (!o.emulated) {
    TraceWorkload& w = result.trace.workload.emplace();
    w.hidden = o.mlp.hidden;
    w.ffn = o.mlp.ffn;
    w.seq = o.mlp.seq;
    w.layers_per_stage = o.mlp.layers_per_stage;
    w.optimizer = std::string(to_string(o.mlp.optimizer));
    w.dp = o.dp;
    if (o.mlp.moe()) {
      w.experts = o.mlp.experts;
      w.top_k = o.mlp.top_k;
      w.ep = o.mlp.ep;
      w.router = std::string(to_string(o.mlp.router));
    }
  }
  std::vector<double> begin(total_steps, 1e300), end(total_steps, 0);
  for (const WorkerOutput& w : outputs) {
    for (int s = 0; s < total_steps && s < static_cast<int>(w.record.step_begin_s.size()); ++s) {
      begin[s] = std::min(begin[s], w.record.step_begin_s[s]);
      end[s] = std::max(end[s], w.record.step_end_s[s]);
    }
    if (w.record.replica != 0) continue;
    result.trace.events.insert(result.trace.events.end(), w.record.events.begin(),
                               w.record.events.end());
    result.trace.memory.insert(result.trace.memory.end(), w.record.memory.begin(),
                               w.record.memory.end());
  }
  sort_trace(result.trace);
  for (int s = o.warmup; s < total_steps; ++s) result.step_times_s.push_back(end[s] - begin[s]);
  result.step_time_s = median(result.step_times_s);
  if (o.emulated) return result;

  // Losses: the workers holding the last stage, summed replica-major, microbatch order.
  int last_actor = program.stage_to_actor.at(program.num_stages - 1);
  std::vector<double> all_losses(total_steps, 0.0);
  for (int r = 0; r < o.dp; ++r) {
    for (const WorkerOutput& w : outputs) {
      if (w.record.actor != last_actor || w.record.replica != r) continue;
      for (const auto& [step, per_mb] : w.losses)
        for (const auto& [mb, l] : per_mb) all_losses.at(step) += l;
    }
  }
  for (double& l : all_losses) l /= static_cast<double>(mlp.num_microbatches) * o.dp;
  // A loss that overflowed is a run that diverged: its weights, losses and any check against a
  // reference (NaN against NaN) mean nothing, so the run fails here and says why.
  for (int s = 0; s < total_steps; ++s)
    if (!std::isfinite(all_losses[s]))
      throw RuntimeFailure("the training loss is not finite at iteration " + std::to_string(s + 1) +
                           " of " + std::to_string(total_steps) +
                           ", warmup included (the workload diverged: learning rate " +
                           format_g(mlp.lr()) + " is too large for it; give a smaller --lr)");
  result.losses.assign(all_losses.begin() + o.warmup, all_losses.end());
  if (mlp.moe()) {
    int64_t reduced = 0;
    for (const WorkerOutput& w : outputs) reduced += w.grad_reduce_bytes;
    result.grad_reduce_bytes_per_step = reduced / total_steps;
  }
  if (!o.check) return result;

  std::vector<int> seen(program.num_stages, 0);
  for (const WorkerOutput& w : outputs)
    for (const auto& [s, p] : w.params) ++seen.at(s);
  for (int s = 0; s < program.num_stages; ++s)
    if (seen[s] != o.dp)
      throw RuntimeFailure("check: stage " + std::to_string(s) + " came back from " +
                           std::to_string(seen[s]) + " replicas, expected " + std::to_string(o.dp));
  MlpConfig clean = mlp;  // the references run without the injected fault
  clean.fault = MlpFault::kNone;
  const ReferenceResult independent = run_independent_reference(clean, total_steps);
  result.checked = true;
  result.reference_losses.assign(independent.losses.begin() + o.warmup, independent.losses.end());
  result.reference = compare_with(outputs, all_losses, independent, mlp, kCheckRelTolerance);
  if (mlp.moe()) {
    // No sequential same-code run of the MoE workload exists (its arithmetic is spread over the
    // ep group's all-to-alls): the independent reference is the check.
    result.orchestration.ran = false;
    return result;
  }
  const ReferenceResult same_code =
      run_reference(clean, total_steps, weight_gradient_order(program));
  // Host backends run the reference's own arithmetic: any difference is an orchestration bug.
  // Except with parameter sharding: its all-gathers make the collective stream run as soon as
  // each instruction's deps are done (runtime/executor.h), so what each per-microbatch gradient
  // reduction sums depends on timing; the total is the same up to the order of addition.
  const bool gathers = program.has_op(OpKind::kAllGather);
  const double orchestration_tolerance =
      o.backend == BackendKind::kCuda || gathers ? kCheckRelTolerance : 0;
  result.orchestration = compare_with(outputs, all_losses, same_code, mlp, orchestration_tolerance);
  return result;
}

}  // namespace jaxpp
