#include "costmodel/perturbed_cost.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "costmodel/alltoall_overlap.h"
#include "graph/error.h"
#include "graph/input_file.h"
#include "graph/limits.h"

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

// Appends the lengths of `text` (items separated by any of `separators`, each L or L*N) to `out`;
// `where` and `item` name the spec item (and `file` the file, when non-empty) in messages.
void parse_seq_lens(const std::string& text, const std::string& separators,
                    const std::string& where, const std::string& item, const std::string& file,
                    std::vector<int>& out) {
  const std::string in = file.empty() ? "" : " in " + file;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t begin = text.find_first_not_of(separators, pos);
    if (begin == std::string::npos) break;
    size_t end = text.find_first_of(separators, begin);
    if (end == std::string::npos) end = text.size();
    pos = end;
    const std::string token = text.substr(begin, end - begin);
    const size_t star = token.find('*');
    const std::string len_text = token.substr(0, star);
    const std::string count_text = star == std::string::npos ? "1" : token.substr(star + 1);
    const auto integer = [](const std::string& t, long long& v) {
      if (t.empty() || t == "-" || t.size() > 12) return false;
      for (size_t i = 0; i < t.size(); ++i)
        if ((t[i] < '0' || t[i] > '9') && !(t[i] == '-' && i == 0)) return false;
      v = std::stoll(t);
      return true;
    };
    long long len = 0, count = 0;
    if (!integer(len_text, len) || !integer(count_text, count))
      throw_input_error(where, "'" + item + "': expected a length or LENGTH*COUNT" + in +
                                   ", got '" + token + "'");
    if (len < 1 || len > kMaxSeqLen)
      throw_input_error(where, "'" + item + "': the length of microbatch " +
                                   std::to_string(out.size()) + in + " must be in [1, " +
                                   std::to_string(kMaxSeqLen) + "] tokens, got " +
                                   std::to_string(len));
    if (count < 1 || count > kMaxMicrobatches ||
        static_cast<long long>(out.size()) + count > kMaxMicrobatches)
      throw_input_error(where, "'" + item + "': '" + token + "'" + in +
                                   ": the count must be >= 1 and the lengths at most " +
                                   std::to_string(kMaxMicrobatches));
    out.insert(out.end(), static_cast<size_t>(count), static_cast<int>(len));
  }
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
  if (jitter > 0) {
    o << sep << "jitter=" << jitter << ",seed=" << seed;
    sep = ",";
  }
  if (!seq_lens.empty()) {
    o << sep << "seq-lens=";
    for (size_t i = 0; i < seq_lens.size();) {
      size_t j = i;
      while (j < seq_lens.size() && seq_lens[j] == seq_lens[i]) ++j;
      o << (i == 0 ? "" : ":") << seq_lens[i];
      if (j - i > 1) o << "*" << (j - i);
      i = j;
    }
    sep = ",";
  }
  if (nominal_seq_len > 0) o << sep << "nominal-seq-len=" << nominal_seq_len;
  return o.str();
}

Perturbation parse_perturbation(const std::string& spec, const std::string& where) {
  Perturbation p;
  std::stringstream in(spec);
  std::string item;
  bool any = false, seeded = false, jittered = false;
  while (std::getline(in, item, ',')) {
    any = true;
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw_input_error(where, "'" + item +
                                   "': expected slow-actor=R:F, slow-link=A-B:F, "
                                   "jitter=J, seed=S, seq-lens=L0:L1:... or nominal-seq-len=N");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "slow-actor") {
      const size_t colon = value.find(':');
      if (colon == std::string::npos)
        throw_input_error(where, "'" + item + "': expected slow-actor=ACTOR:FACTOR");
      const int actor = parse_index(value.substr(0, colon), where, item);
      for (const auto& [a, f] : p.slow_actors)
        if (a == actor)
          throw_input_error(where, "'" + item + "': actor " + std::to_string(actor) +
                                       " is slowed twice (give one factor per actor)");
      p.slow_actors.emplace_back(actor, parse_factor(value.substr(colon + 1), where, item));
    } else if (key == "slow-link") {
      const size_t colon = value.find(':'), dash = value.find('-');
      if (colon == std::string::npos || dash == std::string::npos || dash > colon)
        throw_input_error(where, "'" + item + "': expected slow-link=A-B:FACTOR");
      const int from = parse_index(value.substr(0, dash), where, item);
      const int to = parse_index(value.substr(dash + 1, colon - dash - 1), where, item);
      if (from == to)
        throw_input_error(where, "'" + item + "': a link joins two different actors");
      for (const auto& [a, b, f] : p.slow_links)
        if (std::minmax(a, b) == std::minmax(from, to))
          throw_input_error(where, "'" + item + "': the link " + std::to_string(from) + "-" +
                                       std::to_string(to) +
                                       " is slowed twice (give one factor per link)");
      p.slow_links.emplace_back(from, to, parse_factor(value.substr(colon + 1), where, item));
    } else if (key == "jitter") {
      if (jittered) throw_input_error(where, "jitter given twice");
      jittered = true;
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
      if (seeded) throw_input_error(where, "seed given twice");
      // Digits only: stoull reads "-1" as 2^64 - 1 and skips leading blanks.
      try {
        if (value.empty() || !std::all_of(value.begin(), value.end(), [](unsigned char ch) {
              return std::isdigit(ch) != 0;
            }))
          throw std::invalid_argument(value);
        p.seed = std::stoull(value);
      } catch (const std::exception&) {
        throw_input_error(where, "'" + item +
                                     "': expected a non-negative integer seed (at most 2^64 - 1)");
      }
      seeded = true;
    } else if (key == "seq-lens") {
      if (!p.seq_lens.empty()) throw_input_error(where, "seq-lens given twice");
      if (!value.empty() && value[0] == '@') {
        const std::string file = value.substr(1);
        if (file.empty()) throw_input_error(where, "'" + item + "': expected seq-lens=@FILE");
        p.seq_lens_file = file;
        std::string text;
        try {
          text = read_input_text(file);
        } catch (const InputError& e) {
          throw_input_error(where, "'" + item + "': " + e.what());
        }
        parse_seq_lens(text, " \t\r\n,:[]", where, item, file, p.seq_lens);
      } else {
        parse_seq_lens(value, ":", where, item, "", p.seq_lens);
      }
      if (p.seq_lens.empty())
        throw_input_error(where, "'" + item + "': no lengths (expected seq-lens=L0:L1:...)");
    } else if (key == "nominal-seq-len") {
      if (p.nominal_seq_len > 0) throw_input_error(where, "nominal-seq-len given twice");
      try {
        size_t pos = 0;
        const long long v = std::stoll(value, &pos);
        if (pos != value.size() || v < 1 || v > kMaxSeqLen) throw std::invalid_argument(value);
        p.nominal_seq_len = static_cast<int>(v);
      } catch (const std::exception&) {
        throw_input_error(where, "'" + item + "': expected a length in [1, " +
                                     std::to_string(kMaxSeqLen) + "] tokens, got '" + value +
                                     "'");
      }
    } else {
      throw_input_error(where, "unknown item '" + key +
                                   "' (expected slow-actor, slow-link, jitter, seed, seq-lens, "
                                   "nominal-seq-len)");
    }
  }
  if (!any) throw_input_error(where, "empty perturbation");
  if (seeded && p.jitter == 0)
    throw_input_error(where, "seed needs jitter=J > 0 (it seeds the jitter's draws)");
  if (p.nominal_seq_len > 0 && p.seq_lens.empty())
    throw_input_error(where, "nominal-seq-len needs seq-lens (the lengths it is the nominal of)");
  return p;
}

void check_perturbation(const Perturbation& p, int num_actors, int num_microbatches,
                        const std::string& where) {
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
  if (!p.seq_lens.empty() && static_cast<int>(p.seq_lens.size()) != num_microbatches)
    throw_input_error(where, "seq-lens gives " + std::to_string(p.seq_lens.size()) +
                                 " lengths but there are " + std::to_string(num_microbatches) +
                                 " microbatches (one length per microbatch)");
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

double PerturbedCost::token_factor(int microbatch) const {
  if (p_.seq_lens.empty() || p_.nominal_seq_len <= 0 || microbatch < 0 ||
      microbatch >= static_cast<int>(p_.seq_lens.size()))
    return 1;
  return static_cast<double>(p_.seq_lens[static_cast<size_t>(microbatch)]) / p_.nominal_seq_len;
}

double PerturbedCost::token_scaled_compute_s(int actor, const Instruction& ins) const {
  const double whole = base_.compute_s(actor, ins);
  if (p_.seq_lens.empty() || ins.op != OpKind::kCompute) return whole;
  bool uniform = true;
  for (const TaskRef& t : ins.tasks)
    uniform = uniform && token_factor(t.microbatch) == token_factor(ins.tasks[0].microbatch);
  Instruction part;  // the group without tasks, then each task alone
  part.op = ins.op;
  part.stage = ins.stage;
  const double fixed = base_.compute_s(actor, part);  // launch overhead; 0 for stage times
  if (ins.tasks.empty()) return whole;
  if (uniform) return fixed + (whole - fixed) * token_factor(ins.tasks[0].microbatch);
  double total = whole;
  for (const TaskRef& t : ins.tasks) {
    part.tasks = TaskList{t};
    total += (token_factor(t.microbatch) - 1) * (base_.compute_s(actor, part) - fixed);
  }
  return total;
}

double PerturbedCost::compute_s(int actor, const Instruction& ins) const {
  return token_scaled_compute_s(actor, ins) * actor_factor(actor) * jitter_factor(actor, ins);
}
double PerturbedCost::p2p_latency_s(int from, int to) const {
  return base_.p2p_latency_s(from, to) * link_factor(from, to);
}
double PerturbedCost::p2p_bandwidth_bytes_per_s(int from, int to) const {
  return base_.p2p_bandwidth_bytes_per_s(from, to) / link_factor(from, to);
}
int PerturbedCost::link_id(int from, int to) const { return base_.link_id(from, to); }
double PerturbedCost::transfer_latency_s(int from, int to, const Instruction& ins) const {
  const double tokens = ins.tasks.empty() ? 1 : token_factor(ins.tasks[0].microbatch);
  return base_.transfer_latency_s(from, to, ins) * link_factor(from, to) * tokens;
}
double PerturbedCost::allreduce_s(int actor, const Instruction& ins) const {
  return base_.allreduce_s(actor, ins) * actor_factor(actor);
}

double PerturbedCost::collective_busy_s(int actor, const Instruction& ins) const {
  return base_.collective_busy_s(actor, ins) * actor_factor(actor);
}

namespace {

// The model at another sequence length, rebuilt from its transformer shape.
ModelSpec model_at_seq_len(const ModelSpec& model, int seq_len, const std::string& where) {
  if (model.seq_len == seq_len) return model;
  if (model.hidden == 0 || model.num_transformer_layers == 0)
    throw_input_error(where, "seq-lens: model '" + model.name +
                                 "' is given in explicit form (layers_list); its work cannot be "
                                 "repriced at other sequence lengths");
  try {
    return model_from_json(model_shape_to_json(model, seq_len), "model '" + model.name + "'");
  } catch (const InputError& e) {
    throw_input_error(where, std::string("seq-lens: ") + e.what());
  }
}

}  // namespace

SequenceLengthCost::SequenceLengthCost(const ModelSpec& model, const Partition& partition,
                                       const Placement& placement, const ParallelConfig& config,
                                       const ClusterSpec& cluster,
                                       const std::vector<int>& seq_lens, const std::string& where)
    : config_(config), launch_overhead_s_(cluster.launch_overhead_s), nominal_model_(model) {
  nominal_ = std::make_unique<AnalyticCost>(model, partition, placement, config, cluster);
  std::map<int, int> by_length;                     // length -> index into costs_
  std::vector<std::pair<double, double>> flops;     // per costs_: model, hardware FLOPs
  for (const int len : seq_lens) {
    const auto [it, added] = by_length.emplace(len, static_cast<int>(costs_.size()));
    if (added) {
      const ModelSpec at_len = model_at_seq_len(model, len, where);
      try {
        costs_.push_back(
            std::make_unique<AnalyticCost>(at_len, partition, placement, config, cluster));
      } catch (const InputError& e) {
        throw_input_error(where, "seq-lens: length " + std::to_string(len) + ": " + e.what());
      }
      flops.emplace_back(at_len.model_flops_per_sequence(),
                         hardware_flops_per_sequence(at_len, partition, config.recompute,
                                                     config.recompute_layers,
                                                     config.recompute_modules));
      models_.push_back(at_len);
    }
    index_.push_back(it->second);
    tokens_ += len;
    model_flops_ += flops[static_cast<size_t>(it->second)].first;
    hardware_flops_ += flops[static_cast<size_t>(it->second)].second;
  }
}

const AnalyticCost& SequenceLengthCost::at(int microbatch) const {
  if (microbatch < 0 || microbatch >= static_cast<int>(index_.size())) return *nominal_;
  return *costs_[static_cast<size_t>(index_[static_cast<size_t>(microbatch)])];
}

const ModelSpec& SequenceLengthCost::model_at(int microbatch) const {
  if (microbatch < 0 || microbatch >= static_cast<int>(index_.size())) return nominal_model_;
  return models_[static_cast<size_t>(index_[static_cast<size_t>(microbatch)])];
}

int SequenceLengthCost::common_length(const Instruction& ins) const {
  int common = -2;
  for (const TaskRef& t : ins.tasks) {
    const int k = t.microbatch >= 0 && t.microbatch < static_cast<int>(index_.size())
                      ? index_[static_cast<size_t>(t.microbatch)]
                      : -1;
    if (common == -2) common = k;
    if (k != common || k < 0) return -1;
  }
  return common;
}

SequenceLengthCost::Group SequenceLengthCost::mixed_group(const Instruction& ins) const {
  // Each task at its own microbatch's length; the overlap rule of costmodel/alltoall_overlap.h.
  const AllToAllGroup a = alltoall_group(
      ins, config_.ep > 1 && config_.moe_overlap != MoeOverlap::kNone,
      [&](const TaskRef& t) { return at(t.microbatch).task_s(t.kind, t.stage); },
      [&](const TaskRef& t) { return at(t.microbatch).alltoall_task_s(t.kind, t.stage); });
  Group g;
  g.busy_s = a.busy_s;
  g.exposed_s = a.exposed_s;
  g.total_s = launch_overhead_s_ + a.compute_s;
  return g;
}

double SequenceLengthCost::compute_s(int actor, const Instruction& ins) const {
  if (ins.op != OpKind::kCompute || ins.tasks.empty()) return nominal_->compute_s(actor, ins);
  const int k = common_length(ins);
  if (k >= 0) return costs_[static_cast<size_t>(k)]->compute_s(actor, ins);
  return mixed_group(ins).total_s;
}

CostProvider::AllToAll SequenceLengthCost::alltoall(int actor, const Instruction& ins) const {
  if (ins.op != OpKind::kCompute || ins.tasks.empty() || config_.ep <= 1)
    return nominal_->alltoall(actor, ins);
  const int k = common_length(ins);
  if (k >= 0) return costs_[static_cast<size_t>(k)]->alltoall(actor, ins);
  const Group g = mixed_group(ins);
  return {g.busy_s, g.exposed_s};
}

double SequenceLengthCost::p2p_latency_s(int from, int to) const {
  return nominal_->p2p_latency_s(from, to);
}
double SequenceLengthCost::p2p_bandwidth_bytes_per_s(int from, int to) const {
  return nominal_->p2p_bandwidth_bytes_per_s(from, to);
}
int SequenceLengthCost::link_id(int from, int to) const { return nominal_->link_id(from, to); }
double SequenceLengthCost::allreduce_s(int actor, const Instruction& ins) const {
  return nominal_->allreduce_s(actor, ins);
}

double SequenceLengthCost::collective_busy_s(int actor, const Instruction& ins) const {
  return nominal_->collective_busy_s(actor, ins);
}

Program SequenceLengthCost::scale_program(const Program& program) const {
  Program out = program;
  const int num_stages = static_cast<int>(nominal_->stage_work().size());
  for (auto& list : out.actors)
    for (Instruction& ins : list) {
      if ((ins.op != OpKind::kSend && ins.op != OpKind::kRecv) || ins.tasks.empty()) continue;
      const TaskRef& t = ins.tasks[0];
      // The boundary the transfer crosses: a forward's output (stage s -> s+1) or a backward's
      // input gradient (stage s -> s-1), as the lowering sizes them (schedules/lower.cc).
      const int boundary = t.kind == TaskKind::kF ? t.stage : t.stage - 1;
      if (boundary < 0 || boundary >= num_stages) continue;
      ins.bytes = at(t.microbatch).activation_bytes(boundary);
    }
  return out;
}

}  // namespace jaxpp
