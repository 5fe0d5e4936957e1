#include "runtime/comm_plan.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <set>
#include <utility>

#include "runtime/backend.h"

namespace jaxpp {

std::string CommSpec::name() const {
  if (kind == Kind::kLink)
    return "link " + std::to_string(src) + "->" + std::to_string(dst) + " of replica " +
           std::to_string(replica);
  return "replicas of actor " + std::to_string(actor);
}

CommPlan make_comm_plan(const Program& program, int num_replicas) {
  CommPlan plan;
  plan.num_actors = program.num_actors;
  plan.num_replicas = num_replicas;
  std::set<std::pair<int, int>> links;
  for (int a = 0; a < program.num_actors; ++a)
    for (const Instruction& ins : program.actors.at(a))
      if (ins.op == OpKind::kSend) links.insert({a, ins.peer});
  for (int r = 0; r < num_replicas; ++r) {
    for (auto [src, dst] : links) {
      CommSpec c;
      c.kind = CommSpec::Kind::kLink;
      c.replica = r;
      c.src = src;
      c.dst = dst;
      c.workers = {plan.worker(src, r), plan.worker(dst, r)};
      plan.comms.push_back(std::move(c));
    }
  }
  if (num_replicas > 1) {
    for (int a = 0; a < program.num_actors; ++a) {
      CommSpec c;
      c.kind = CommSpec::Kind::kReplicas;
      c.actor = a;
      for (int r = 0; r < num_replicas; ++r) c.workers.push_back(plan.worker(a, r));
      plan.comms.push_back(std::move(c));
    }
  }
  return plan;
}

std::vector<int> CommPlan::comms_of(int worker) const {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(comms.size()); ++i)
    if (std::find(comms[i].workers.begin(), comms[i].workers.end(), worker) !=
        comms[i].workers.end())
      out.push_back(i);
  return out;
}

int CommPlan::link(int replica, int src, int dst) const {
  for (int i = 0; i < static_cast<int>(comms.size()); ++i) {
    const CommSpec& c = comms[i];
    if (c.kind == CommSpec::Kind::kLink && c.replica == replica && c.src == src && c.dst == dst)
      return i;
  }
  return -1;
}

int CommPlan::replica_group(int actor) const {
  for (int i = 0; i < static_cast<int>(comms.size()); ++i)
    if (comms[i].kind == CommSpec::Kind::kReplicas && comms[i].actor == actor) return i;
  return -1;
}

int assign_device(int local_rank, int local_workers, int device_count) {
  if (device_count < local_workers)
    throw RuntimeFailure("--backend cuda: one GPU per worker: " + std::to_string(local_workers) +
                         " workers on this host need " + std::to_string(local_workers) +
                         " GPUs, found " + std::to_string(device_count));
  return local_rank % device_count;
}

int device_of_rank(int local_rank, int local_workers, int visible_devices) {
  if (visible_devices >= local_workers) return local_rank;
  if (visible_devices == 1) return 0;
  throw RuntimeFailure("--backend cuda: one GPU per worker: rank " + std::to_string(local_rank) +
                       " of " + std::to_string(local_workers) + " MPI ranks on this host sees " +
                       std::to_string(visible_devices) + " GPUs; let every rank see all " +
                       std::to_string(local_workers) +
                       " GPUs or exactly one (CUDA_VISIBLE_DEVICES per rank, Slurm "
                       "--gpus-per-task=1)");
}

bool launched_by_mpi_launcher(const std::function<const char*(const char*)>& get_env) {
  auto env = get_env ? get_env : [](const char* n) -> const char* { return std::getenv(n); };
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (env(name) != nullptr) return true;
  return false;
}

int mpi_launcher_world_size(const std::function<const char*(const char*)>& get_env) {
  auto env = get_env ? get_env : [](const char* n) -> const char* { return std::getenv(n); };
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    const char* v = env(name);
    if (v == nullptr) continue;
    int size = 0;
    const char* end = v + std::strlen(v);
    const auto [ptr, ec] = std::from_chars(v, end, size);
    if (ec == std::errc() && ptr == end && size > 0) return size;
  }
  return 0;
}

void check_link_header(const LinkHeader& header, int64_t expected_key, int src, int64_t max_count) {
  if (header.key != expected_key)
    throw RuntimeFailure("message from actor " + std::to_string(src) +
                         " out of order: expected key " + std::to_string(expected_key) + ", got " +
                         std::to_string(header.key) +
                         " (a send was dropped or the programs disagree)");
  if (header.count < 0 || header.count > max_count)
    throw RuntimeFailure("message from actor " + std::to_string(src) + " with key " +
                         std::to_string(expected_key) + " announces " +
                         std::to_string(header.count) + " values (at most " +
                         std::to_string(max_count) + " expected)");
}

}  // namespace jaxpp
