#include "graph/program.h"

#include <algorithm>
#include <cassert>
#include <map>

#include "graph/error.h"
#include "graph/json_util.h"

namespace jaxpp {
namespace {

constexpr const char* kProgramFormat = "jaxpp-sim-program";
constexpr int kProgramVersion = 1;

std::string at(int actor, size_t index) {
  return "program: actor " + std::to_string(actor) + ", instruction " + std::to_string(index);
}

OpKind parse_op(const std::string& s, const std::string& where) {
  for (OpKind k : kAllOpKinds)
    if (s == to_string(k)) return k;
  // The list from kAllOpKinds (a hand-written one left out allgather).
  std::string names;
  for (size_t i = 0; i < kAllOpKinds.size(); ++i)
    names += (i == 0 ? "" : i + 1 == kAllOpKinds.size() ? " or " : ", ") +
             std::string(to_string(kAllOpKinds[i]));
  throw_input_error(where, "unknown op \"" + s + "\" (expected " + names + ")");
}

std::vector<int> int_list(const JsonObject& obj, const std::string& key) {
  std::vector<int> out;
  const nlohmann::json& arr = obj.array(key);
  for (size_t i = 0; i < arr.size(); ++i) {
    if (!arr[i].is_number_integer())
      throw_input_error(obj.field(key) + "[" + std::to_string(i) + "]",
                        "expected an integer, got " + arr[i].dump());
    out.push_back(arr[i].get<int>());
  }
  return out;
}

nlohmann::json instruction_to_json(const Instruction& ins) {
  nlohmann::json j;
  j["op"] = std::string(to_string(ins.op));
  if (!ins.tasks.empty()) j["tasks"] = to_string(ins.tasks);
  j["stage"] = ins.stage;
  if (ins.peer != -1) j["peer"] = ins.peer;
  if (ins.bytes != 0) j["bytes"] = ins.bytes;
  if (ins.tag != -1) j["tag"] = ins.tag;
  if (!ins.deps.empty()) j["deps"] = std::vector<int>(ins.deps.begin(), ins.deps.end());
  return j;
}

Instruction instruction_from_json(const JsonObject& obj) {
  obj.reject_unknown({"op", "tasks", "stage", "peer", "bytes", "tag", "deps"});
  Instruction ins;
  ins.op = parse_op(obj.string("op"), obj.field("op"));
  if (obj.has("tasks")) {
    const std::string text = obj.string("tasks");
    auto tasks = parse_fused_tasks(text);
    if (!tasks)
      throw_input_error(obj.field("tasks"), "malformed task list \"" + text +
                                                "\" (expected e.g. \"F3@s2\" or \"F0@s3+B0@s3\")");
    ins.tasks = std::move(*tasks);
  }
  ins.stage = static_cast<int>(obj.integer("stage"));
  if (obj.has("peer")) ins.peer = static_cast<int>(obj.integer("peer"));
  if (obj.has("bytes")) ins.bytes = obj.non_negative_integer("bytes");
  if (obj.has("tag")) ins.tag = obj.integer("tag");
  if (obj.has("deps")) ins.deps = int_list(obj, "deps");
  return ins;
}

}  // namespace

std::string_view to_string(OpKind k) {
  switch (k) {
    case OpKind::kCompute:
      return "compute";
    case OpKind::kSend:
      return "send";
    case OpKind::kRecv:
      return "recv";
    case OpKind::kAllReduce:
      return "allreduce";
    case OpKind::kOptimizer:
      return "optimizer";
    case OpKind::kAllGather:
      return "allgather";
  }
  return "?";
}

std::string_view to_string(StreamKind k) {
  switch (k) {
    case StreamKind::kCompute:
      return "compute";
    case StreamKind::kSend:
      return "send";
    case StreamKind::kRecv:
      return "recv";
    case StreamKind::kCollective:
      return "collective";
    case StreamKind::kAllToAll:
      return "alltoall";
  }
  return "?";
}

std::string to_string(const StreamId& s) {
  switch (s.kind) {
    case StreamKind::kSend:
      return "send->" + std::to_string(s.peer);
    case StreamKind::kRecv:
      return "recv<-" + std::to_string(s.peer);
    default:
      return std::string(to_string(s.kind));
  }
}

std::string to_string(const TaskList& tasks) {
  std::string out;
  for (const TaskRef& t : tasks) {
    if (!out.empty()) out += '+';
    out += to_string(t);
  }
  return out;
}

StreamId stream_of(const Instruction& ins) {
  switch (ins.op) {
    case OpKind::kCompute:
    case OpKind::kOptimizer:
      return {StreamKind::kCompute, -1};
    case OpKind::kSend:
      return {StreamKind::kSend, ins.peer};
    case OpKind::kRecv:
      return {StreamKind::kRecv, ins.peer};
    case OpKind::kAllReduce:
    case OpKind::kAllGather:
      return {StreamKind::kCollective, -1};
  }
  return {};
}

std::string to_string(const Instruction& ins) {
  switch (ins.op) {
    case OpKind::kCompute:
      return to_string(ins.tasks);
    case OpKind::kSend:
      return "send " + to_string(ins.tasks) + " ->" + std::to_string(ins.peer);
    case OpKind::kRecv:
      return "recv " + to_string(ins.tasks) + " <-" + std::to_string(ins.peer);
    case OpKind::kAllReduce:
      if (!ins.tasks.empty()) return "reduce-scatter " + to_string(ins.tasks);
      return "allreduce s" + std::to_string(ins.stage);
    case OpKind::kOptimizer:
      return "optimizer s" + std::to_string(ins.stage);
    case OpKind::kAllGather:
      return "all-gather " + to_string(ins.tasks);
  }
  return "?";
}

int64_t Program::num_instructions() const {
  int64_t n = 0;
  for (const auto& list : actors) n += static_cast<int64_t>(list.size());
  return n;
}

bool Program::has_op(OpKind op) const {
  return std::any_of(actors.begin(), actors.end(), [op](const std::vector<Instruction>& list) {
    return std::any_of(list.begin(), list.end(), [op](const Instruction& i) { return i.op == op; });
  });
}

namespace {

// Where an instruction sits, for error messages.
struct Endpoint {
  int actor = -1;
  size_t index = 0;
  bool valid() const { return actor >= 0; }
};

[[noreturn]] void fail_at(const Program& p, const Endpoint& e, const std::string& reason) {
  throw_input_error(at(e.actor, e.index) + " (" + to_string(p.actors[e.actor][e.index]) + ")",
                    reason);
}

// The send and the recv of one tag. Kept small (the table has one per tag): int positions, and
// each side's ordinal, its position among the sends to (recvs from) the same peer on its actor.
struct TagEntry {
  struct Side {
    int actor = -1;
    int index = -1;
    int ordinal = -1;
    bool valid() const { return actor >= 0; }
    Endpoint endpoint() const { return {actor, static_cast<size_t>(index)}; }
  };
  Side send, recv;
};

// TagEntry by tag. Tags below `dense_limit` (all of them in a lowered program, whose tags count
// up from 0) live in a vector; any others in a map.
class TagTable {
 public:
  explicit TagTable(size_t dense_limit) : dense_(dense_limit) {}
  // `tag` >= 0.
  TagEntry& operator[](int64_t tag) {
    if (static_cast<uint64_t>(tag) < dense_.size()) return dense_[tag];
    return sparse_[tag];
  }
  // Calls f(tag, entry) for every tag seen, in increasing tag order.
  template <typename F>
  void for_each(F&& f) const {
    for (size_t t = 0; t < dense_.size(); ++t)
      if (dense_[t].send.valid() || dense_[t].recv.valid()) f(static_cast<int64_t>(t), dense_[t]);
    for (const auto& [tag, e] : sparse_) f(tag, e);
  }

 private:
  std::vector<TagEntry> dense_;
  std::map<int64_t, TagEntry> sparse_;
};

// The tags of `sender`'s sends to `receiver` and of `receiver`'s recvs from `sender`, each in
// program order, with the recv positions.
void pair_order(const Program& p, int sender, int receiver, std::vector<int64_t>& send_tags,
                std::vector<std::pair<int64_t, Endpoint>>& recvs) {
  for (const Instruction& ins : p.actors[sender])
    if (ins.op == OpKind::kSend && ins.peer == receiver) send_tags.push_back(ins.tag);
  const auto& list = p.actors[receiver];
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i].op == OpKind::kRecv && list[i].peer == sender)
      recvs.push_back({list[i].tag, {receiver, i}});
}

}  // namespace

void check_program(const Program& p) {
  if (p.num_actors < 1) throw_input_error("program", "expected at least 1 actor");
  if (static_cast<int>(p.actors.size()) != p.num_actors)
    throw_input_error("program", "num_actors is " + std::to_string(p.num_actors) + " but " +
                                     std::to_string(p.actors.size()) + " instruction lists given");
  if (static_cast<int>(p.stage_to_actor.size()) != p.num_stages)
    throw_input_error("program", "num_stages is " + std::to_string(p.num_stages) + " but " +
                                     "stage_to_actor has " +
                                     std::to_string(p.stage_to_actor.size()) + " entries");
  for (int s = 0; s < p.num_stages; ++s)
    if (p.stage_to_actor[s] < 0 || p.stage_to_actor[s] >= p.num_actors)
      throw_input_error("program", "stage " + std::to_string(s) + " placed on actor " +
                                       std::to_string(p.stage_to_actor[s]) + ", out of range");
  // A valid program has as many recvs as sends, so at most half its instructions are sends.
  TagTable tags(static_cast<size_t>(p.num_instructions()) / 2);
  // Per peer, how many sends to (recvs from) it the current actor has seen.
  std::vector<int> send_count(p.num_actors), recv_count(p.num_actors);
  for (int r = 0; r < p.num_actors; ++r) {
    const auto& list = p.actors[r];
    std::fill(send_count.begin(), send_count.end(), 0);
    std::fill(recv_count.begin(), recv_count.end(), 0);
    for (size_t i = 0; i < list.size(); ++i) {
      const Instruction& ins = list[i];
      auto fail = [&](const std::string& reason) { fail_at(p, {r, i}, reason); };
      for (int d : ins.deps)
        if (d < 0 || static_cast<size_t>(d) >= i)
          fail("dependency " + std::to_string(d) + " does not point to an earlier instruction");
      if (ins.stage < 0 || ins.stage >= p.num_stages)
        fail("stage " + std::to_string(ins.stage) + " out of range");
      for (const TaskRef& t : ins.tasks) {
        if (t.stage < 0 || t.stage >= p.num_stages)
          fail("task stage " + std::to_string(t.stage) + " out of range");
        if (t.microbatch < 0 || t.microbatch >= p.num_microbatches)
          fail("microbatch " + std::to_string(t.microbatch) + " out of range");
      }
      switch (ins.op) {
        case OpKind::kCompute:
          if (ins.tasks.empty()) fail("compute without tasks");
          for (const TaskRef& t : ins.tasks)
            if (p.stage_to_actor[t.stage] != r)
              fail("task " + to_string(t) + " belongs to actor " +
                   std::to_string(p.stage_to_actor[t.stage]));
          if (ins.stage != ins.tasks[0].stage)
            fail("stage field differs from the stage of its first task");
          break;
        case OpKind::kAllGather:
          if (ins.tasks.size() != 1 || ins.tasks[0].kind == TaskKind::kW)
            fail("an all-gather precedes exactly one F, B or I task");
          if (ins.stage != ins.tasks[0].stage)
            fail("stage field differs from the stage of its task");
          [[fallthrough]];
        case OpKind::kAllReduce:
        case OpKind::kOptimizer:
          if (p.stage_to_actor[ins.stage] != r)
            fail("stage " + std::to_string(ins.stage) + " belongs to actor " +
                 std::to_string(p.stage_to_actor[ins.stage]));
          break;
        case OpKind::kSend:
        case OpKind::kRecv: {
          if (ins.tasks.size() != 1) fail("a send/recv carries exactly one task's output");
          if (ins.peer < 0 || ins.peer >= p.num_actors || ins.peer == r)
            fail("peer " + std::to_string(ins.peer) + " invalid");
          if (ins.tag < 0) fail("missing tag");
          const bool send = ins.op == OpKind::kSend;
          TagEntry::Side& side = send ? tags[ins.tag].send : tags[ins.tag].recv;
          if (side.valid())
            fail("tag " + std::to_string(ins.tag) + " used by two " + (send ? "sends" : "recvs"));
          side = {r, static_cast<int>(i), (send ? send_count : recv_count)[ins.peer]++};
          break;
        }
      }
    }
  }
  bool same_order = true;
  int64_t unmatched_recv = -1;  // the lowest tag with a recv but no send
  tags.for_each([&](int64_t tag, const TagEntry& e) {
    if (!e.send.valid()) {
      if (unmatched_recv < 0) unmatched_recv = tag;
      return;
    }
    const Endpoint at_send = e.send.endpoint();
    if (!e.recv.valid())
      fail_at(p, at_send, "send with tag " + std::to_string(tag) + " has no matching recv");
    const Instruction& snd = p.actors[e.send.actor][e.send.index];
    const Instruction& rcv = p.actors[e.recv.actor][e.recv.index];
    if (e.recv.actor != snd.peer || rcv.peer != e.send.actor)
      fail_at(p, at_send,
              "tag " + std::to_string(tag) + " is received by actor " +
                  std::to_string(e.recv.actor) + " from actor " + std::to_string(rcv.peer));
    if (rcv.bytes != snd.bytes)
      fail_at(p, at_send,
              "sends " + std::to_string(snd.bytes) + " bytes but the recv expects " +
                  std::to_string(rcv.bytes));
    if (rcv.tasks != snd.tasks)
      fail_at(p, at_send, "the matching recv carries " + to_string(rcv.tasks));
    if (e.recv.ordinal != e.send.ordinal) same_order = false;
  });
  if (unmatched_recv >= 0) {
    const Endpoint at_recv = tags[unmatched_recv].recv.endpoint();
    fail_at(p, at_recv,
            "recv with tag " + std::to_string(unmatched_recv) + " has no matching send");
  }
  if (same_order) return;
  // Every send now has its recv on the peer and vice versa, so each (sender, receiver) pair has
  // as many sends as recvs; name the first pair, in (sender, receiver) order, whose sequences of
  // tags differ, at the first position where they do.
  for (int sender = 0; sender < p.num_actors; ++sender) {
    for (int receiver = 0; receiver < p.num_actors; ++receiver) {
      std::vector<int64_t> send_tags;
      std::vector<std::pair<int64_t, Endpoint>> recv_tags;
      pair_order(p, sender, receiver, send_tags, recv_tags);
      for (size_t k = 0; k < send_tags.size() && k < recv_tags.size(); ++k) {
        if (send_tags[k] != recv_tags[k].first)
          fail_at(p, recv_tags[k].second,
                  "recvs from actor " + std::to_string(sender) +
                      " in a different order than they are sent (expected tag " +
                      std::to_string(send_tags[k]) + ", got " + std::to_string(recv_tags[k].first) +
                      ")");
      }
    }
  }
  assert(false && "check_program: the order check found a mismatch that the pair scan did not");
}

nlohmann::json program_to_json(const Program& p) {
  nlohmann::json actors = nlohmann::json::array();
  for (const auto& list : p.actors) {
    nlohmann::json a = nlohmann::json::array();
    for (const Instruction& ins : list) a.push_back(instruction_to_json(ins));
    actors.push_back(std::move(a));
  }
  return {{"format", kProgramFormat},
          {"version", kProgramVersion},
          {"num_actors", p.num_actors},
          {"num_stages", p.num_stages},
          {"num_microbatches", p.num_microbatches},
          {"stage_to_actor", p.stage_to_actor},
          {"actors", std::move(actors)}};
}

Program program_from_json(const nlohmann::json& j, const std::string& where) {
  const JsonObject obj(j, where);
  obj.reject_unknown({"format", "version", "num_actors", "num_stages", "num_microbatches",
                      "stage_to_actor", "actors"});
  if (obj.string("format") != kProgramFormat)
    throw_input_error(obj.field("format"), "expected \"" + std::string(kProgramFormat) +
                                               "\", got \"" + obj.string("format") + "\"");
  if (obj.integer("version") != kProgramVersion)
    throw_input_error(obj.field("version"),
                      "unsupported version " + std::to_string(obj.integer("version")) +
                          " (this build reads version " + std::to_string(kProgramVersion) + ")");
  Program p;
  p.num_actors = obj.positive_int("num_actors");
  p.num_stages = obj.positive_int("num_stages");
  p.num_microbatches = obj.positive_int("num_microbatches");
  p.stage_to_actor = int_list(obj, "stage_to_actor");
  const nlohmann::json& actors = obj.array("actors");
  for (size_t r = 0; r < actors.size(); ++r) {
    const std::string aw = obj.field("actors") + "[" + std::to_string(r) + "]";
    if (!actors[r].is_array()) throw_input_error(aw, "expected an array of instructions");
    std::vector<Instruction> list;
    for (size_t i = 0; i < actors[r].size(); ++i)
      list.push_back(
          instruction_from_json(JsonObject(actors[r][i], aw + "[" + std::to_string(i) + "]")));
    p.actors.push_back(std::move(list));
  }
  return p;
}

}  // namespace jaxpp
