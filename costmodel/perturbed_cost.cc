#include "costmodel/perturbed_cost.h"

#include <cmath>
#include <sstream>

#include "graph/error.h"

namespace jaxpp {
namespace {

double parse_factor(const std::string& text, const std::string& where, const std::string& item) {
  try {
    size_t pos = 0;
    const double f = std::stod(text, &pos);
    if (pos == text.size() && std::isfinite(f) && f >= 1e-3 && f <= 1e3) return f;
  } catch (const std::exception&) {
  }
  throw_input_error(where,
                    "'" + item + "': expected a factor in [0.001, 1000], got '" + text + "'");
}

int parse_index(const std::string& text, const std::string& where, const std::string& item) {
  try {
    size_t pos = 0;
    const int v = std::stoi(text, &pos);
    if (pos == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw_input_error(where, "'" + item + "': expected an actor index >= 0, got '" + text + "'");
}

uint64_t mix(uint64_t h, uint64_t v) {  // splitmix64 step over h ^ v
  uint64_t z = h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

std::string Perturbation::to_string() const {
  std::ostringstream o;
  const char* sep = "";
  for (const auto& [a, f] : slow_actors) {
    o << sep << "slow-actor=" << a << ":" << f;
    sep = ",";
  }
  for (const auto& [a, b, f] : slow_links) {
    o << sep << "slow-link=" << a << "-" << b << ":" << f;
    sep = ",";
  }
  if (jitter > 0) o << sep << "jitter=" << jitter << ",seed=" << seed;
  return o.str();
}

Perturbation parse_perturbation(const std::string& spec, const std::string& where) {
  Perturbation p;
  std::stringstream in(spec);
  std::string item;
  bool any = false;
  while (std::getline(in, item, ',')) {
    any = true;
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw_input_error(where, "'" + item +
                                   "': expected slow-actor=R:F, slow-link=A-B:F, "
                                   "jitter=J or seed=S");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "slow-actor") {
      const size_t colon = value.find(':');
      if (colon == std::string::npos)
        throw_input_error(where, "'" + item + "': expected slow-actor=ACTOR:FACTOR");
      p.slow_actors.emplace_back(parse_index(value.substr(0, colon), where, item),
                                 parse_factor(value.substr(colon + 1), where, item));
    } else if (key == "slow-link") {
      const size_t colon = value.find(':'), dash = value.find('-');
      if (colon == std::string::npos || dash == std::string::npos || dash > colon)
        throw_input_error(where, "'" + item + "': expected slow-link=A-B:FACTOR");
      p.slow_links.emplace_back(parse_index(value.substr(0, dash), where, item),
                                parse_index(value.substr(dash + 1, colon - dash - 1), where, item),
                                parse_factor(value.substr(colon + 1), where, item));
    } else if (key == "jitter") {
      try {
        size_t pos = 0;
        p.jitter = std::stod(value, &pos);
        if (pos != value.size() || !(p.jitter >= 0 && p.jitter < 1))
          throw std::invalid_argument(value);
      } catch (const std::exception&) {
        throw_input_error(where,
                          "'" + item + "': expected a jitter in [0, 1), got '" + value + "'");
      }
    } else if (key == "seed") {
      try {
        size_t pos = 0;
        p.seed = std::stoull(value, &pos);
        if (pos != value.size()) throw std::invalid_argument(value);
      } catch (const std::exception&) {
        throw_input_error(where, "'" + item + "': expected a non-negative integer seed");
      }
    } else {
      throw_input_error(
          where, "unknown item '" + key + "' (expected slow-actor, slow-link, jitter, seed)");
    }
  }
  if (!any) throw_input_error(where, "empty perturbation");
  return p;
}

void check_perturbation(const Perturbation& p, int num_actors, const std::string& where) {
  auto check = [&](int a) {
    if (a >= num_actors)
      throw_input_error(where, "actor " + std::to_string(a) + " out of range (the plan has " +
                                   std::to_string(num_actors) + " actors)");
  };
  for (const auto& [a, f] : p.slow_actors) check(a);
  for (const auto& [a, b, f] : p.slow_links) {
    check(a);
    check(b);
  }
}

PerturbedCost::PerturbedCost(const CostProvider& base, Perturbation p)
    : base_(base), p_(std::move(p)) {}

double PerturbedCost::actor_factor(int actor) const {
  double f = 1;
  for (const auto& [a, x] : p_.slow_actors)
    if (a == actor) f *= x;
  return f;
}

double PerturbedCost::link_factor(int from, int to) const {
  double f = 1;
  for (const auto& [a, b, x] : p_.slow_links)
    if ((a == from && b == to) || (a == to && b == from)) f *= x;
  return f;
}

double PerturbedCost::jitter_factor(int actor, const Instruction& ins) const {
  if (p_.jitter == 0 || ins.op != OpKind::kCompute) return 1;
  uint64_t h = mix(p_.seed, static_cast<uint64_t>(actor));
  h = mix(h, static_cast<uint64_t>(ins.stage + 1));
  for (const TaskRef& t : ins.tasks) {
    h = mix(h, static_cast<uint64_t>(t.kind));
    h = mix(h, static_cast<uint64_t>(t.stage));
    h = mix(h, static_cast<uint64_t>(t.microbatch));
  }
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53;  // [0, 1)
  return 1 + p_.jitter * (2 * u - 1);
}

double PerturbedCost::compute_s(int actor, const Instruction& ins) const {
  return base_.compute_s(actor, ins) * actor_factor(actor) * jitter_factor(actor, ins);
}
double PerturbedCost::p2p_latency_s(int from, int to) const {
  return base_.p2p_latency_s(from, to) * link_factor(from, to);
}
double PerturbedCost::p2p_bandwidth_bytes_per_s(int from, int to) const {
  return base_.p2p_bandwidth_bytes_per_s(from, to) / link_factor(from, to);
}
int PerturbedCost::link_id(int from, int to) const { return base_.link_id(from, to); }
double PerturbedCost::transfer_latency_s(int from, int to, const Instruction& ins) const {
  return base_.transfer_latency_s(from, to, ins) * link_factor(from, to);
}
double PerturbedCost::allreduce_s(int actor, const Instruction& ins) const {
  return base_.allreduce_s(actor, ins) * actor_factor(actor);
}

}  // namespace jaxpp
