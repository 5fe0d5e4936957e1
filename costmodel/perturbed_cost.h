// PerturbedCost: a CostProvider that changes another one's durations for what-if studies
// (`simulate --perturb`, `explore --robust`).
//
//   slow actor   every compute instruction of actor r lasts factor times longer
//   slow link    transfers between actors a and b (both directions) take factor times longer:
//                latency x factor, bandwidth / factor
//   jitter j     every compute instruction's duration is multiplied by 1 + j·(2u − 1), u in
//                [0, 1) drawn from a hash of (seed, actor, the instruction's op and tasks), so the
//                same instruction gets the same factor whatever the order the simulator asks in
//                (deterministic; a different seed gives another draw). 0 <= j < 1.
//   seq lens     microbatch i holds sequences of L_i tokens instead of the nominal length.
//                Measured mode (the base knows stage times, not a model): every task of
//                microbatch i, and T_comm of every transfer it makes, is scaled linearly by
//                L_i / nominal_seq_len (a fused group: each task by its own factor, the group's
//                fixed part, base.compute_s of an instruction without tasks, unscaled).
//                Model mode prices each length with the operator model instead
//                (SequenceLengthCost below, used as the base with seq_lens cleared here).
// All-reduces and optimizer steps are scaled by the slow-actor factor, not jittered, and do not
// depend on the sequence lengths.
//
// Spec text (parse_perturbation), comma-separated items:
//   slow-actor=R:F   slow-link=A-B:F   jitter=J   seed=S
//   seq-lens=L0:L1:...   tokens per sequence of each microbatch, in order; `L*N` repeats L N
//                        times ("2048*7:8192"); or seq-lens=@FILE, a text file of lengths
//                        separated by spaces, newlines, commas or colons (a JSON array works),
//                        each an integer or L*N. Every length in [1, kMaxSeqLen].
//   nominal-seq-len=N    measured mode only: the length the stage times were measured at
//                        (required there with seq-lens; model mode uses the model's seq_len)
//   e.g. "slow-actor=2:1.5,jitter=0.05,seed=7". Factors in [1e-3, 1e3].
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "costmodel/analytic_cost.h"
#include "costmodel/cluster.h"
#include "costmodel/cost_provider.h"
#include "graph/model.h"
#include "graph/partition.h"
#include "graph/placement.h"
#include "graph/plan.h"
#include "graph/program.h"

namespace jaxpp {

struct Perturbation {
  std::vector<std::pair<int, double>> slow_actors;       // actor, factor
  std::vector<std::tuple<int, int, double>> slow_links;  // actor a, actor b, factor
  double jitter = 0;
  uint64_t seed = 0;
  std::vector<int> seq_lens;  // tokens per sequence of each microbatch; empty = nominal
  int nominal_seq_len = 0;    // measured mode: the length of the stage times; 0 = not given
  std::string seq_lens_file;  // seq-lens=@FILE: the file read (an input the outputs must spare)
  bool empty() const {
    return slow_actors.empty() && slow_links.empty() && jitter == 0 && seq_lens.empty();
  }
  std::string to_string() const;  // the spec form (seq-lens written with L*N runs)
};

// InputError naming `where` and the item for a malformed spec (a length out of [1, kMaxSeqLen]
// names the length and its microbatch; seq-lens=@FILE names the file too), for a link from an
// actor to itself and for an actor, a link or a setting given twice.
Perturbation parse_perturbation(const std::string& spec, const std::string& where);
// InputError when an actor is out of [0, num_actors), or seq-lens does not give exactly
// `num_microbatches` lengths.
void check_perturbation(const Perturbation& p, int num_actors, int num_microbatches,
                        const std::string& where);

class PerturbedCost : public CostProvider {
 public:
  // `base` must outlive this object (it is kept by reference); a temporary cannot bind.
  PerturbedCost(const CostProvider& base, Perturbation p);
  PerturbedCost(const CostProvider&& base, Perturbation p) = delete;

  double compute_s(int actor, const Instruction& ins) const override;
  double p2p_latency_s(int from, int to) const override;
  double p2p_bandwidth_bytes_per_s(int from, int to) const override;
  int link_id(int from, int to) const override;
  double transfer_latency_s(int from, int to, const Instruction& ins) const override;
  double allreduce_s(int actor, const Instruction& ins) const override;
  double collective_busy_s(int actor, const Instruction& ins) const override;

  double jitter_factor(int actor, const Instruction& ins) const;
  // L_i / nominal_seq_len for microbatch i (1 without seq-lens or a nominal length).
  double token_factor(int microbatch) const;

 private:
  double actor_factor(int actor) const;
  double token_scaled_compute_s(int actor, const Instruction& ins) const;
  double link_factor(int from, int to) const;
  const CostProvider& base_;
  Perturbation p_;
};

// Model mode of seq-lens: the plan's cost model priced once per distinct length. The model is
// rebuilt from its transformer shape at each length (model_shape_to_json), so GEMMs grow
// linearly with the tokens and the attention core quadratically, as operator_cost.h prices them;
// an AnalyticCost per length on the same partition, placement, configuration and cluster.
//   compute     a group whose tasks all belong to microbatches of one length: that length's
//               AnalyticCost; a group mixing lengths: launch overhead + each task at its own
//               length, with the MoE all-to-all overlap of analytic_cost.h applied to the sums
//   optimizer, all-reduce, links   the nominal cost (they do not depend on the tokens)
//   P2P bytes   scale_program(): each send/recv of microbatch i carries the activation bytes of
//               its length (AnalyticCost::activation_bytes of the boundary it crosses)
// Memory: simulate_plan gives the simulator each microbatch's stash at its length (the memory
// model of model_at(i)); static bytes (weights, optimizer state) stay the nominal model's.
// InputError naming `where` for a model in explicit form (no shape to reprice) or a length the
// configuration cannot run (cp not dividing it).
class SequenceLengthCost : public CostProvider {
 public:
  SequenceLengthCost(const ModelSpec& model, const Partition& partition,
                     const Placement& placement, const ParallelConfig& config,
                     const ClusterSpec& cluster, const std::vector<int>& seq_lens,
                     const std::string& where);

  double compute_s(int actor, const Instruction& ins) const override;
  double p2p_latency_s(int from, int to) const override;
  double p2p_bandwidth_bytes_per_s(int from, int to) const override;
  int link_id(int from, int to) const override;
  double allreduce_s(int actor, const Instruction& ins) const override;
  double collective_busy_s(int actor, const Instruction& ins) const override;
  AllToAll alltoall(int actor, const Instruction& ins) const override;

  // `program` with the bytes of every send and recv of microbatch i at length L_i.
  Program scale_program(const Program& program) const;
  // The cost model of microbatch i's length.
  const AnalyticCost& at(int microbatch) const;
  const AnalyticCost& nominal() const { return *nominal_; }
  // The model at microbatch i's length (the nominal model out of range).
  const ModelSpec& model_at(int microbatch) const;
  // Per iteration of one replica with microbatch size 1, summed over the microbatches: tokens,
  // model FLOPs and hardware FLOPs (recompute policy of the configuration) of the lengths.
  double tokens_per_replica_sequence() const { return tokens_; }
  double model_flops_per_replica_sequence() const { return model_flops_; }
  double hardware_flops_per_replica_sequence() const { return hardware_flops_; }

 private:
  struct Group {
    double total_s = 0, busy_s = 0, exposed_s = 0;
  };
  // The index into costs_ shared by every task of `ins`, or -1 when they mix lengths.
  int common_length(const Instruction& ins) const;
  Group mixed_group(const Instruction& ins) const;
  ParallelConfig config_;
  double launch_overhead_s_ = 0;
  std::vector<std::unique_ptr<AnalyticCost>> costs_;  // one per distinct length
  std::vector<ModelSpec> models_;                     // the model at each of those lengths
  ModelSpec nominal_model_;
  std::vector<int> index_;                            // microbatch -> costs_
  std::unique_ptr<AnalyticCost> nominal_;
  double tokens_ = 0, model_flops_ = 0, hardware_flops_ = 0;
};

}  // namespace jaxpp
