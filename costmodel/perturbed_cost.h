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
// All-reduces and optimizer steps are scaled by the slow-actor factor, not jittered.
//
// Spec text (parse_perturbation), comma-separated items:
//   slow-actor=R:F   slow-link=A-B:F   jitter=J   seed=S
//   e.g. "slow-actor=2:1.5,jitter=0.05,seed=7". Factors in [1e-3, 1e3].
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "costmodel/cost_provider.h"

namespace jaxpp {

struct Perturbation {
  std::vector<std::pair<int, double>> slow_actors;       // actor, factor
  std::vector<std::tuple<int, int, double>> slow_links;  // actor a, actor b, factor
  double jitter = 0;
  uint64_t seed = 0;
  bool empty() const { return slow_actors.empty() && slow_links.empty() && jitter == 0; }
  std::string to_string() const;  // the spec form
};

// InputError naming `where` and the item for a malformed spec.
Perturbation parse_perturbation(const std::string& spec, const std::string& where);
// InputError when an actor is out of [0, num_actors).
void check_perturbation(const Perturbation& p, int num_actors, const std::string& where);

class PerturbedCost : public CostProvider {
 public:
  PerturbedCost(const CostProvider& base, Perturbation p);

  double compute_s(int actor, const Instruction& ins) const override;
  double p2p_latency_s(int from, int to) const override;
  double p2p_bandwidth_bytes_per_s(int from, int to) const override;
  int link_id(int from, int to) const override;
  double transfer_latency_s(int from, int to, const Instruction& ins) const override;
  double allreduce_s(int actor, const Instruction& ins) const override;

  double jitter_factor(int actor, const Instruction& ins) const;

 private:
  double actor_factor(int actor) const;
  double link_factor(int from, int to) const;
  const CostProvider& base_;
  Perturbation p_;
};

}  // namespace jaxpp
