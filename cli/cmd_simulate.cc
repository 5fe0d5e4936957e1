// jaxpp-sim simulate: simulate one pipeline schedule, either from a model + cluster + parallel
// configuration (analytic cost model) or from measured stage times (see docs/simulate.md).
// Output files (--trace, --timeline, --plan) are checked before the simulation, produced in
// memory and written atomically only once all of them are ready, so an error leaves no file.
#include <cstdio>
#include <iostream>
#include <optional>
#include <utility>
#include <vector>

#include <cxxopts.hpp>

#include "cli/cluster_arg.h"
#include "cli/command.h"
#include "cli/explore_report.h"
#include "cli/flags.h"
#include "cli/report_output.h"
#include "costmodel/cluster.h"
#include "costmodel/hetero_cluster.h"
#include "costmodel/stage_times_cost.h"
#include "graph/assignment.h"
#include "graph/error.h"
#include "graph/json_util.h"
#include "graph/limits.h"
#include "graph/plan.h"
#include "graph/release_at_exit.h"
#include "simulator/explorer.h"
#include "simulator/hetero_plan.h"
#include "simulator/plan_builder.h"
#include "simulator/what_if.h"
#include "trace/export.h"
#include "trace/trace.h"

namespace jaxpp::cli {
namespace {

void print_summary(std::ostream& out, const nlohmann::json& m) {
  char line[256];
  auto row = [&](const char* label, const std::string& value) {
    std::snprintf(line, sizeof line, "  %-22s %s\n", label, value.c_str());
    out << line;
  };
  auto num = [](double v, const char* fmt) {
    char b[64];
    std::snprintf(b, sizeof b, fmt, v);
    return std::string(b);
  };
  if (m.contains("model")) {
    row("model", m["model"].get<std::string>() + " on " + m["cluster"].get<std::string>());
    const auto& c = m["config"];
    const std::string tp = m.contains("meshes") ? std::string("per actor (below)")
                                                 : std::to_string(c["tp"].get<int>());
    row("config", "gpus " + std::to_string(c["gpus"].get<int>()) + ", pp " +
                      std::to_string(c["pp"].get<int>()) + ", tp " + tp + ", dp " +
                      std::to_string(c["dp"].get<int>()) + ", v " +
                      std::to_string(c["virtual_stages"].get<int>()) + ", m " +
                      std::to_string(c["num_microbatches"].get<int>()) + ", " +
                      c["schedule"].get<std::string>());
    if (m.contains("assignment")) {
      const auto& a = m["assignment"];
      std::string stages;
      for (const auto& r : a["placement"]["stage_to_actor"])
        stages += (stages.empty() ? "" : " ") + std::to_string(r.get<int>());
      row("assignment", std::to_string(a["num_stages"].get<int>()) + " stages, " +
                            a["placement"]["kind"].get<std::string>() +
                            " placement, actor of each stage: " + stages);
    }
    if (m.contains("meshes")) {
      for (const auto& a : m["meshes"])
        row(("actor " + std::to_string(a["actor"].get<int>())).c_str(),
            a["kind"].get<std::string>() + ", tp " + std::to_string(a["tp"].get<int>()) + ", " +
                std::to_string(a["layers"].get<int>()) + " layers");
    }
  } else {
    row("schedule", m["schedule"].get<std::string>() + " (pp " +
                        std::to_string(m["pp"].get<int>()) + ", stages " +
                        std::to_string(m["num_stages"].get<int>()) + ", m " +
                        std::to_string(m["num_microbatches"].get<int>()) + ")");
  }
  row("step time", num(m["step_time_s"].get<double>() * 1e3, "%.3f ms"));
  row("bubble rate", num(m["bubble_rate"].get<double>() * 100, "%.2f %%") + " (actor " +
                         std::to_string(m["bubble_actor"].get<int>()) + ")");
  row("instructions", std::to_string(m["tasks"].get<int64_t>()));
  if (m.contains("tflops_per_gpu")) {
    row("TFLOP/s per GPU", num(m["tflops_per_gpu"].get<double>(), "%.1f"));
    row("MFU", num(m["mfu"].get<double>() * 100, "%.1f %%"));
    row("tokens/s", num(m["tokens_per_s"].get<double>(), "%.0f"));
    double peak = 0;
    for (const auto& p : m["peak_memory_bytes"]) peak = std::max(peak, p.get<double>());
    row("peak memory", num(peak / kGiB, "%.2f GiB (worst actor)"));
    if (m.contains("host_offload_bytes")) {  // activation offloading
      double host = 0;
      for (const auto& h : m["host_offload_bytes"]) host = std::max(host, h.get<double>());
      row("host offload", num(host / kGiB, "%.2f GiB per GPU (worst actor)"));
    }
  }
  out << "  actor  busy_ms    span_ms    idle_ms    peak_stash\n";
  for (const auto& a : m["actors"]) {
    std::snprintf(line, sizeof line, "  %5d  %-9.3f  %-9.3f  %-9.3f  %d\n", a["actor"].get<int>(),
                  a["busy_s"].get<double>() * 1e3, a["span_s"].get<double>() * 1e3,
                  a["idle_s"].get<double>() * 1e3, a["peak_stashed_microbatches"].get<int>());
    out << line;
  }
  if (m.contains("perturbation")) {
    const auto& p = m["perturbation"];
    out << "  perturbation " << p["spec"].get<std::string>() << ": step "
        << num(p["baseline_step_time_s"].get<double>() * 1e3, "%.3f") << " -> "
        << num(p["step_time_s"].get<double>() * 1e3, "%.3f") << " ms (x"
        << num(p["slowdown"].get<double>(), "%.3f") << "), bubble "
        << num(p["baseline_bubble_rate"].get<double>() * 100, "%.2f") << " -> "
        << num(p["bubble_rate"].get<double>() * 100, "%.2f") << " %\n";
    out << "  actor  idle_ms base -> perturbed    end delay ms\n";
    for (const auto& a : p["actors"]) {
      std::snprintf(line, sizeof line, "  %5d  %-10.3f -> %-10.3f   %+.3f\n", a["actor"].get<int>(),
                    a["baseline_idle_s"].get<double>() * 1e3, a["idle_s"].get<double>() * 1e3,
                    a["end_delay_s"].get<double>() * 1e3);
      out << line;
    }
  }
  if (!m.contains("breakdown")) return;
  out << "  breakdown (ms per step)\n"
         "  actor  gemm       attention  elementw.  tp_comm    cp_comm    ep_comm    other      "
         "optimizer  p2p_exp.   dp_exp.    bubble\n";
  for (const auto& a : m["breakdown"]) {
    std::snprintf(line, sizeof line,
                  "  %5d  %-9.2f  %-9.2f  %-9.2f  %-9.2f  %-9.2f  %-9.2f  %-9.2f  %-9.2f  %-9.2f  "
                  "%-9.2f  %-9.2f\n",
                  a["actor"].get<int>(), a["gemm_s"].get<double>() * 1e3,
                  a["attention_s"].get<double>() * 1e3, a["elementwise_s"].get<double>() * 1e3,
                  a["tp_comm_s"].get<double>() * 1e3, a["cp_comm_s"].get<double>() * 1e3,
                  a["ep_comm_s"].get<double>() * 1e3, a["other_s"].get<double>() * 1e3,
                  a["optimizer_s"].get<double>() * 1e3, a["p2p_exposed_s"].get<double>() * 1e3,
                  a["dp_exposed_s"].get<double>() * 1e3, a["bubble_s"].get<double>() * 1e3);
    out << line;
  }
}

int run_simulate(int argc, char** argv) {
  cxxopts::Options options(
      "jaxpp-sim simulate",
      "Simulate one training iteration of a pipeline schedule.\n"
      "  model mode:    --model M --cluster C --gpus N --pp P --tp T --dp D --global-batch B\n"
      "                 --microbatch-size b --schedule S|--schedule-file F\n"
      "  measured mode: --schedule S --pp P --microbatches M --t-f .. --t-b .. [--t-w ..]\n"
      "                 [--t-comm ..] [--t-a2a-f .. --t-a2a-b .. --moe-overlap O]\n"
      "                 | --stage-times FILE   (milliseconds; T_B = input-gradient backward, a\n"
      "                 full backward B takes T_B + T_W)");
  // clang-format off
  options.add_options()
      ("model", "model preset, model JSON file or Hugging Face config.json", cxxopts::value<std::string>())
      ("cluster", "cluster preset (" + cluster_preset_list() + ") or JSON file; a file with \"kinds\" is a heterogeneous cluster (docs/hardware.md)", cxxopts::value<std::string>()->default_value("a100-80g"))
      ("gpus", "total GPUs", cxxopts::value<int>())
      ("pp", "pipeline actors", cxxopts::value<int>())
      ("tp", "tensor parallelism", cxxopts::value<int>()->default_value("1"))
      ("kind-tp", "heterogeneous cluster: tensor parallelism of each device kind, in the file's order (e.g. 4,2; default: --tp for every kind)", cxxopts::value<std::string>())
      ("actor-kinds", "heterogeneous cluster: the device kind of each actor (e.g. h100-sxm,h100-sxm,a100-80g; default: the kinds in file order, each with gpus/(tp·dp·cp) actors)", cxxopts::value<std::string>())
      ("dp", "data parallelism", cxxopts::value<int>()->default_value("1"))
      ("cp", "context parallelism (ring attention; gpus = pp·tp·dp·cp)", cxxopts::value<int>()->default_value("1"))
      ("virtual", "stages per actor", cxxopts::value<int>()->default_value("1"))
      ("global-batch", "sequences per iteration", cxxopts::value<int>())
      ("microbatch-size", "sequences per microbatch", cxxopts::value<int>()->default_value("1"))
      ("schedule", "schedule name (see jaxpp-sim schedules)", cxxopts::value<std::string>())
      ("schedule-file", "custom schedule file (JSON or PyTorch CSV)", cxxopts::value<std::string>())
      ("fuse-steady-state", "Interleaved1F1B: fuse steady-state F+B pairs")
      ("recompute", "none | selective | full | op", cxxopts::value<std::string>()->default_value("none"))
      ("recompute-layers", "with --recompute full: fully recompute only the first N transformer layers of each stage chunk, the others keep their activations (Megatron-LM --recompute-method block --recompute-num-layers N; default: all)", cxxopts::value<int>())
      ("recompute-modules", "with --recompute selective: Megatron-Core's recompute modules, comma-separated (core_attn, layernorm, mla_up_proj, moe_act; --recompute-granularity selective --recompute-modules ...; default: core_attn)", cxxopts::value<std::string>())
      ("offload-layers", "activation offloading: the first N transformer layers keep their activations in host memory, copied over the cluster's host link (Megatron Core --cpu-offloading-num-layers N; pp 1, recompute none; default: 0)", cxxopts::value<int>())
      ("sequence-parallel", "Megatron sequence parallelism")
      ("zero1", "distributed optimizer: shard optimizer state over dp·cp (ZeRO-1)")
      ("shard-grads", "gradient sharding (ZeRO-2, needs --zero1): keep 1/(dp·cp) of the gradients and reduce-scatter each microbatch's gradients")
      ("shard-params", "parameter sharding (ZeRO-3 / FSDP, needs --zero1, implies --shard-grads): keep 1/(dp·cp) of the weights and all-gather a stage's weights before each microbatch's forward and backward")
      ("overlap-grad-reduce", "overlap the gradient reduction with the remaining backward (and, with --zero1, the parameter all-gather with the next forward)")
      ("tp-comm-overlap", "overlap tensor-parallel communication with GEMMs (needs --sequence-parallel)")
      ("grad-dtype", "gradient buffer and data-parallel reduction dtype: cluster (the cluster's grad_bytes_per_param, fp32 in the presets) | fp32 | bf16 | fp16", cxxopts::value<std::string>()->default_value("cluster"))
      ("optimizer-state", "Adam state per parameter: cluster (the cluster's optimizer_state_bytes_per_param, 12 in the presets) | fp32 (12: fp32 master, m, v) | remainders (10: fp32 m, v and 16-bit master remainders) | bf16 (4: bf16 m, v, no master) | bf16-moments (8: fp32 master, bf16 m, v)", cxxopts::value<std::string>()->default_value("cluster"))
      ("attention", "flash (fused kernels: FlashAttention-3 or cuDNN on Hopper) | flash2 (the FlashAttention-2 library) | unfused (pre-FlashAttention Megatron kernels)", cxxopts::value<std::string>()->default_value("flash"))
      ("partition", "auto (FLOPs balanced) | even (Megatron-LM) | balanced-time (least simulated step time under the memory limit, docs/partition.md) | first layer of each stage (0,13,26)", cxxopts::value<std::string>()->default_value("auto"))
      ("max-memory-gib", "model mode: memory limit per GPU in GiB for --partition balanced-time and the fit check (default: the cluster's HBM)", cxxopts::value<double>())
      ("assign", "name-to-actor assignment JSON file (or a plan.json): layers, ranges or a rule such as \"layer{i}\": \"i mod 4\" -> actors; gives the stages and their placement (docs/schedules.md)", cxxopts::value<std::string>())
      ("ep", "MoE: expert parallelism (routed experts spread over ep devices carved out of a stage's tp·cp·dp devices)", cxxopts::value<int>()->default_value("1"))
      ("etp", "MoE: expert tensor parallelism (default: tp)", cxxopts::value<int>())
      ("moe-imbalance", "MoE: tokens of the busiest expert rank over the balanced share (>= 1)", cxxopts::value<double>()->default_value("1"))
      ("a2a-dtype", "MoE: all-to-all payload type, D or DISPATCH,COMBINE (bf16, fp16, fp32, fp8; default: the model's, deepseek-v3 fp8,bf16)", cxxopts::value<std::string>())
      ("moe-overlap", "auto | dualpipe | 1f1b | none (how the MoE all-to-all overlaps compute, both modes; docs/simulate.md)", cxxopts::value<std::string>()->default_value("auto"))
      ("moe-dispatcher", "MoE: alltoall (a token copy per routed expert, Megatron-LM's alltoall dispatcher) | deepep (a copy per destination rank and per destination node, DeepEP / Megatron-LM flex)", cxxopts::value<std::string>()->default_value("alltoall"))
      ("moe-routing", "MoE: random (balanced random routing) | contiguous (token t to experts t*k..t*k+k-1, a benchmark fake gate)", cxxopts::value<std::string>()->default_value("random"))
      ("moe-node-limit", "MoE: node-limited random routing, a token's experts on at most M nodes of the ep group (DeepSeek-V3: 4; 0 = no limit)", cxxopts::value<int>()->default_value("0"))
      ("moe-device-limit", "MoE: device-limited random routing, a token's experts on at most M ranks of the ep group (DeepSeek-V2: 3; 0 = no limit)", cxxopts::value<int>()->default_value("0"))
      ("microbatches", "measured mode: microbatches", cxxopts::value<int>())
      ("t-f", "measured mode: forward time per stage, ms", cxxopts::value<double>())
      ("t-b", "measured mode: input-gradient backward time, ms", cxxopts::value<double>())
      ("t-w", "measured mode: weight-gradient backward time, ms", cxxopts::value<double>()->default_value("0"))
      ("t-comm", "measured mode: P2P transfer time, ms", cxxopts::value<double>()->default_value("0"))
      ("t-a2a-f", "measured mode: MoE all-to-all (dispatch + combine) of one forward, ms, on the all-to-all stream (not in --t-f)", cxxopts::value<double>()->default_value("0"))
      ("t-a2a-b", "measured mode: MoE all-to-all of one input-gradient backward, ms (not in --t-b)", cxxopts::value<double>()->default_value("0"))
      ("stage-times", "measured mode: per-stage times JSON file", cxxopts::value<std::string>())
      ("breakdown", "model mode: where the step's time goes per actor (GEMM, attention, element-wise, exposed TP/CP/P2P/DP communication, optimizer, bubble); also nested slices in a Perfetto --timeline")
      ("perturb", "what-if: comma-separated slow-actor=R:F, slow-link=A-B:F, jitter=J, seed=S, seq-lens=L0:L1:...|@FILE (per-microbatch sequence lengths; L*N repeats), nominal-seq-len=N (measured mode); reports how the step and each actor's idle time change (docs/simulate.md)", cxxopts::value<std::string>())
      ("no-memory-check", "report plans that do not fit instead of failing")
      ("json", "print metrics as JSON")
      ("trace", "write the simulated trace JSON to FILE", cxxopts::value<std::string>())
      ("timeline", "write the simulated timeline to FILE: .svg, .png, .dot (Graphviz), .json (Perfetto/Chrome trace), .txt (text Gantt)", cxxopts::value<std::string>())
      ("plan", "write plan.json (with predicted metrics) to FILE", cxxopts::value<std::string>())
      ("h,help", "show this help");
  // clang-format on
  const std::optional<cxxopts::ParseResult> parsed =
      parse_flags(options, argc, argv, "simulate");
  if (!parsed) return kExitOk;
  const cxxopts::ParseResult& args = *parsed;
  const bool measured = !args.count("model");
  // Flags the chosen mode would ignore are refused (issue 16, class 5).
  refuse_together(args, "schedule", "schedule-file", "give a schedule name or a schedule file, not both");
  refuse_together(args, "fuse-steady-state", "schedule-file",
                  "a schedule file gives its own instructions (fuse them in the file)");
  refuse_together(args, "stage-times", "t-f", "give per-stage times in a file or uniform times, not both");
  refuse_together(args, "stage-times", "t-b", "give per-stage times in a file or uniform times, not both");
  refuse_together(args, "stage-times", "t-w", "give per-stage times in a file or uniform times, not both");
  refuse_together(args, "stage-times", "t-comm", "give per-stage times in a file or uniform times, not both");
  refuse_together(args, "stage-times", "t-a2a-f", "give per-stage times in a file or uniform times, not both");
  refuse_together(args, "stage-times", "t-a2a-b", "give per-stage times in a file or uniform times, not both");
  if (measured) {
    refuse_flags(
        args,
        {"cluster", "gpus", "tp", "dp", "cp", "global-batch", "microbatch-size", "recompute",
         "recompute-layers", "recompute-modules", "offload-layers", "sequence-parallel", "zero1", "shard-grads", "shard-params", "tp-comm-overlap", "grad-dtype", "optimizer-state", "attention", "partition",
         "breakdown", "ep", "etp", "moe-imbalance", "a2a-dtype", "moe-dispatcher", "moe-routing", "moe-node-limit", "moe-device-limit", "max-memory-gib", "assign",
         "kind-tp", "actor-kinds"},
        "a model-mode flag, but without --model simulate runs in measured mode");
  } else {
    refuse_flags(args, {"microbatches", "t-f", "t-b", "t-w", "t-comm", "t-a2a-f", "t-a2a-b",
                        "stage-times"},
                 "a measured-mode flag, but --model selects model mode (the microbatches are "
                 "--global-batch / (dp x --microbatch-size))");
  }
  refuse_together(args, "assign", "partition", "the assignment gives the partition");
  refuse_together(args, "assign", "virtual", "the assignment gives the stages per actor");
  refuse_together(args, "assign", "schedule-file",
                  "a schedule file places its own stages; give a schedule name");
  refuse_together(args, "perturb", "breakdown",
                  "the breakdown prices the unperturbed cost model; run them separately");
  refuse_together(args, "perturb", "plan", "a plan holds the unperturbed prediction");
  std::optional<Perturbation> perturbation;
  if (args.count("perturb"))
    perturbation = parse_perturbation(args["perturb"].as<std::string>(), "--perturb");
  // Output paths first: a bad one fails before any work.
  const std::string trace_path = args.count("trace") ? args["trace"].as<std::string>() : "";
  const std::string timeline_path =
      args.count("timeline") ? args["timeline"].as<std::string>() : "";
  const std::string plan_path = args.count("plan") ? args["plan"].as<std::string>() : "";
  // Inputs first, so that no output may name one of them (OutputFiles, cli/report_output.h).
  OutputFiles out("simulate");
  for (const char* flag : {"model", "cluster", "stage-times", "schedule-file", "assign"})
    if (args.count(flag)) out.input(args[flag].as<std::string>(), std::string("--") + flag);
  if (perturbation && !perturbation->seq_lens_file.empty())
    out.input(perturbation->seq_lens_file, "--perturb seq-lens=@");
  if (args.count("trace")) out.output(trace_path, "--trace");
  ExportFormat timeline_fmt = ExportFormat::kText;
  if (args.count("timeline")) {
    timeline_fmt = timeline_format_flag(timeline_path);
    out.output(timeline_path, "--timeline", is_binary(timeline_fmt));
  }
  if (args.count("plan")) out.output(plan_path, "--plan");
  out.check_json_flag(args.count("json") > 0);
  PlanSimOptions sim_options;
  sim_options.overlap_grad_reduce = args.count("overlap-grad-reduce") > 0;
  sim_options.check_memory = args.count("no-memory-check") == 0;
  sim_options.record_trace = args.count("trace") > 0 || args.count("timeline") > 0;
  sim_options.breakdown = args.count("breakdown") > 0;
  auto require = [&](const char* flag, const char* what) {
    if (!args.count(flag)) throw_input_error(std::string("--") + flag, what);
  };
  SimulatedPlan sim;
  if (measured) {
    if (args.count("plan")) throw_input_error("--plan", "needs --model (a plan holds a model)");
    MeasuredRequest mreq;
    if (args.count("pp")) mreq.pp = args["pp"].as<int>();
    if (args.count("microbatches")) mreq.microbatches = args["microbatches"].as<int>();
    if (args.count("schedule")) mreq.schedule = args["schedule"].as<std::string>();
    if (args.count("schedule-file")) mreq.schedule_file = args["schedule-file"].as<std::string>();
    mreq.virtual_stages = args["virtual"].as<int>();
    mreq.virtual_given = args.count("virtual") > 0;
    mreq.fuse_steady_state = args.count("fuse-steady-state") > 0;
    if (args.count("stage-times")) mreq.stage_times_file = args["stage-times"].as<std::string>();
    if (args.count("t-f")) mreq.t_f_ms = args["t-f"].as<double>();
    if (args.count("t-b")) mreq.t_b_ms = args["t-b"].as<double>();
    mreq.t_w_ms = args["t-w"].as<double>();
    mreq.t_comm_ms = args["t-comm"].as<double>();
    mreq.t_a2a_f_ms = args["t-a2a-f"].as<double>();
    mreq.t_a2a_b_ms = args["t-a2a-b"].as<double>();
    mreq.moe_overlap = parse_moe_overlap(args["moe-overlap"].as<std::string>(), "--moe-overlap");
    if (perturbation) sim_options.perturbation = &*perturbation;  // reported against a base run
    sim = simulate_measured(mreq, sim_options);
  } else {
    PlanRequest req;
    req.model = load_model(args["model"].as<std::string>());
    if (args.count("a2a-dtype"))
      set_alltoall_dtypes(req.model, args["a2a-dtype"].as<std::string>(), "--a2a-dtype");
    const std::optional<HeteroCluster> hetero =
        load_hetero_cluster_arg(args["cluster"].as<std::string>());
    if (hetero) {
      add_kind_files(out, *hetero);
      refuse_flags(args, {"assign", "perturb", "breakdown"},
                   "is not supported on a heterogeneous --cluster (a file with \"kinds\")");
      refuse_together(args, "kind-tp", "tp", "give one tp for every kind or one per kind, not both");
    } else {
      refuse_flags(args, {"kind-tp", "actor-kinds"},
                   "needs a heterogeneous --cluster (a cluster file with \"kinds\", "
                   "docs/hardware.md)");
      req.cluster = load_cluster_arg(args["cluster"].as<std::string>());
      require("gpus", "required (total GPUs)");
      require("pp", "required (pipeline actors)");
    }
    require("global-batch", "required (sequences per iteration)");
    if (!args.count("schedule") && !args.count("schedule-file")) {
      throw_input_error("--schedule", "required (a schedule name or --schedule-file)");
    }
    ParallelConfig& c = req.config;
    c.gpus = args.count("gpus") ? args["gpus"].as<int>() : 0;
    c.pp = args.count("pp") ? args["pp"].as<int>() : 0;
    for (const char* flag : {"gpus", "pp"})
      if (hetero && args.count(flag) && args[flag].as<int>() < 1)
        throw_input_error(std::string("--") + flag, "must be >= 1");
    c.tp = args["tp"].as<int>();
    c.dp = args["dp"].as<int>();
    c.virtual_stages = args["virtual"].as<int>();
    c.global_batch = args["global-batch"].as<int>();
    c.microbatch_size = args["microbatch-size"].as<int>();
    c.schedule = args.count("schedule") ? args["schedule"].as<std::string>() : "custom";
    c.recompute = parse_recompute(args["recompute"].as<std::string>(), "--recompute");
    if (args.count("recompute-layers")) {
      c.recompute_layers = args["recompute-layers"].as<int>();
      if (c.recompute_layers < 0)
        throw_input_error("--recompute-layers",
                          "expected a number of layers >= 0, got " + std::to_string(c.recompute_layers));
      check_recompute_layers(c, "--recompute-layers");
    }
    if (args.count("recompute-modules")) {
      c.recompute_modules = recompute_modules_flag(args["recompute-modules"].as<std::string>(),
                                                   c.recompute, "--recompute-modules");
      check_recompute_modules(c, "--recompute-modules");
    }
    if (args.count("offload-layers")) c.offload_layers = args["offload-layers"].as<int>();
    c.sequence_parallel = args.count("sequence-parallel") > 0;
    c.zero1 = args.count("zero1") > 0;
    c.shard_parameters = args.count("shard-params") > 0;
    c.shard_gradients = args.count("shard-grads") > 0 || c.shard_parameters;
    check_shard_gradients(c, "configuration", /*flags=*/true);
    c.cp = args["cp"].as<int>();
    c.overlap_grad_reduce = args.count("overlap-grad-reduce") > 0;
    c.tp_comm_overlap = args.count("tp-comm-overlap") > 0;
    c.grad_dtype = parse_grad_dtype(args["grad-dtype"].as<std::string>(), "--grad-dtype");
    c.optimizer_state =
        parse_optimizer_state(args["optimizer-state"].as<std::string>(), "--optimizer-state");
    c.attention = parse_attention_kernel(args["attention"].as<std::string>(), "--attention");
    c.ep = args["ep"].as<int>();
    c.etp = args.count("etp") ? args["etp"].as<int>() : 0;
    if (args.count("etp") && c.etp < 1)
      throw_input_error("--etp", "must be >= 1, got " + std::to_string(c.etp));
    if (args.count("etp")) check_etp_flag(req.model);
    c.moe_imbalance = args["moe-imbalance"].as<double>();
    c.moe_overlap = parse_moe_overlap(args["moe-overlap"].as<std::string>(), "--moe-overlap");
    c.moe_dispatcher =
        parse_moe_dispatcher(args["moe-dispatcher"].as<std::string>(), "--moe-dispatcher");
    c.moe_routing = parse_moe_routing(args["moe-routing"].as<std::string>(), "--moe-routing");
    c.moe_node_limit = args["moe-node-limit"].as<int>();
    c.moe_device_limit = args["moe-device-limit"].as<int>();
    if (args.count("schedule-file")) req.schedule_file = args["schedule-file"].as<std::string>();
    req.fuse_steady_state = args.count("fuse-steady-state") > 0;
    parse_partition_flag(args["partition"].as<std::string>(), req);
    if (args.count("max-memory-gib")) {
      req.max_memory_bytes = max_memory_bytes_from_gib(args["max-memory-gib"].as<double>());
      sim_options.max_memory_bytes = req.max_memory_bytes;
    }
    if (args.count("assign")) req.assignment = read_assignment_file(args["assign"].as<std::string>());
    check_offload_layers(req.model, c, "--offload-layers");
    check_recompute_modules(c, "--recompute-modules", &req.model);
    Plan plan;
    if (hetero) {
      const std::vector<int> kind_tp =
          args.count("kind-tp")
              ? positive_int_list_flag("kind-tp", args["kind-tp"].as<std::string>())
              : std::vector<int>{};
      const std::vector<std::string> actor_kinds =
          args.count("actor-kinds")
              ? name_list_flag("actor-kinds", args["actor-kinds"].as<std::string>())
              : std::vector<std::string>{};
      plan = build_hetero_plan(req, *hetero, resolve_meshes(*hetero, c, kind_tp, actor_kinds));
    } else {
      plan = build_plan(req);
    }
    // A V-placement schedule (zb-v, dualpipev) runs 2 stages per actor whatever --virtual says:
    // an explicit --virtual it cannot run is an error, not silently replaced (run and show refuse
    // it too).
    if (args.count("virtual")) check_virtual_kept(plan, c.virtual_stages);
    if (perturbation) {
      sim = simulate_plan_perturbed(plan, sim_options, *perturbation);
    } else {
      sim = simulate_plan(plan, sim_options);
    }
    if (req.partition == PartitionMode::kBalancedTime)
      sim.metrics["stage_begin"] = plan.partition.stage_begin;
    if (args.count("plan")) {
      plan.predicted = sim.metrics;
      out.set("--plan", plan_to_text(plan, "--plan"));  // as save_plan
    }
  }
  if (args.count("trace")) {
    check_trace_writable(sim.result.trace, "--trace");
    out.set("--trace", trace_to_json(sim.result.trace).dump(1) + "\n");
  }
  if (args.count("timeline")) {
    check_trace_writable(sim.result.trace, "--timeline");
    out.set("--timeline", export_trace(sim.result.trace, timeline_fmt, {}));
  }
  out.write_all();
  if (args.count("json")) {
    std::cout << sim.metrics.dump(2) << "\n";
    release_at_exit(std::move(sim));  // the process ends: no need to free it block by block
    return kExitOk;
  }
  if (sim.metrics.contains("warnings"))
    for (const auto& w : sim.metrics["warnings"])
      std::cerr << "jaxpp-sim simulate: warning: " << w.get<std::string>() << "\n";
  std::ostream& report = out.report_stream();
  print_summary(report, sim.metrics);
  if (sim.metrics.contains("stage_begin")) {
    std::string starts;
    for (const auto& b : sim.metrics["stage_begin"])
      starts += (starts.empty() ? "" : ",") + b.dump();
    report << "  partition (balanced-time): stage starts " << starts << "\n";
  }
  for (const std::string& path : out.written_files()) report << "wrote " << path << "\n";
  release_at_exit(std::move(sim));  // the process ends: no need to free it block by block
  return kExitOk;
}

const CommandRegistration kSimulateCommand{
    "simulate", "Simulate a pipeline schedule (model + cluster, or stage times)", run_simulate};

}  // namespace
}  // namespace jaxpp::cli
