#include "schedules/registry.h"

#include <algorithm>
#include <cctype>

#include "graph/error.h"
#include "graph/limits.h"
#include "schedules/shardy.h"

namespace jaxpp {
namespace {

ScheduleInfo shardy_entry(ShardySchedule s, std::vector<std::string> aliases,
                          std::string description, std::string constraints) {
  ScheduleInfo info;
  info.name = std::string(to_string(s));
  info.aliases = std::move(aliases);
  info.description = std::move(description);
  info.constraints = std::move(constraints);
  info.generate = [s](const ScheduleParams& params) { return make_shardy_schedule(s, params); };
  info.searched_by_default = false;
  return info;
}

// Levenshtein distance of two normalised names.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::vector<ScheduleInfo> build_registry() {
  return {
      {"GPipe",
       {"gpipe"},
       "JaxPP's GPipe: all forwards, then all backwards",
       "S = p (linear), m >= 1",
       make_gpipe},
      {"Std1F1B",
       {"1f1b", "std-1f1b", "onefoneb"},
       "JaxPP's standard 1F1B: S-r warm-up forwards, then one backward / one forward",
       "S = p (linear), m >= 1",
       make_std_1f1b},
      {"Eager1F1B",
       {"eager-1f1b"},
       "JaxPP's eager 1F1B: 2(S-1-r)+1 warm-up forwards, then one backward / one forward",
       "S = p (linear), m >= 1",
       make_eager_1f1b},
      {"ZeroBubble",
       {"zb-h1", "zb1", "zero-bubble"},
       "JaxPP's ZeroBubble (= ZB-H1): split backward into I and W, W fills the bubbles",
       "S = p (linear), m >= S >= 2",
       make_zero_bubble},
      {"Interleaved1F1B",
       {"interleaved", "interleaved-1f1b"},
       "JaxPP's interleaved 1F1B over v = S/p loop-placed stages per actor",
       "S divisible by p (loop), m divisible by R = max(1, floor(m/p)); "
       "--fuse-steady-state fuses steady (F, B) pairs",
       make_interleaved_1f1b},
      {"KimiK2",
       {"kimi-k2", "kimi"},
       "JaxPP's KimiK2: Interleaved1F1B with one more warm-up forward per actor",
       "as Interleaved1F1B",
       make_kimi_k2},
      {"InterleavedGPipe",
       {"interleaved-gpipe"},
       "JaxPP's interleaved GPipe: all forwards (round-major), then all backwards",
       "S divisible by p (loop), m divisible by R = max(1, floor(m/p))",
       make_interleaved_gpipe},
      {"DualPipeV",
       {"dualpipe-v", "dualpipe"},
       "JaxPP's DualPipeV: V placement, overlapped forward/backward pairs (DeepSeek)",
       "S = 2p (V placement), m >= 2p",
       make_dualpipe_v},
      {"ZB-H2",
       {"zbh2", "zb2"},
       "Zero Bubble paper's ZB-H2: 2(p-r)-1 warm-up forwards, I/F then I/W, W last",
       "S = p (linear), m >= 1",
       make_zb_h2},
      {"ZB-V",
       {"zbv"},
       "Zero Bubble paper's ZB-V (PyTorch ScheduleZBVZeroBubble): V placement, split backward",
       "S = 2p (V placement), m >= 1",
       make_zb_v},
      {"LoopedBFS",
       {"looped-bfs", "bfs"},
       "PyTorch's LoopedBFS: each local stage runs all forwards, backwards in reverse",
       "S divisible by p (loop), m >= 1",
       make_looped_bfs},
      {"MegatronInterleaved",
       {"megatron", "megatron-interleaved-1f1b", "megatron-1f1b"},
       "Megatron-LM interleaved 1F1B with microbatch group size g",
       "S divisible by p (loop), p <= g <= m and m divisible by g when v > 1 (--group-size, "
       "default p)",
       make_megatron_interleaved},
      shardy_entry(ShardySchedule::kCircular, {"shardy-circular"},
                   "Shardy's Circular: loop placement, forwards then backwards in phases of p "
                   "microbatches",
                   "S divisible by p (loop), m >= 1"),
      shardy_entry(
          ShardySchedule::kCircularWithReversedBackward,
          {"circular-reversed-backward", "circular-reversed"},
          "Shardy's Circular with the backwards in reverse (phase, stage, microbatch) order",
          "S divisible by p (loop), m >= 1"),
      shardy_entry(ShardySchedule::kGPipeBut1F1BForLastMesh, {"gpipe-1f1b-last"},
                   "Shardy's GPipe on every actor but the last, which runs 1F1B",
                   "S = p (linear), m >= 1"),
      shardy_entry(ShardySchedule::kZeroBubbleH1, {"shardy-zb-h1"},
                   "Shardy's ZeroBubbleH1: pairwise ZB-H1 rules, split backward but on stage 0",
                   "S = p (linear), m >= 1"),
      shardy_entry(ShardySchedule::kZeroBubbleH2ZeroTxLatency, {"zb-h2-zero-tx"},
                   "Shardy's ZeroBubbleH2, warm-up 2(p-r)-1 forwards (transfers cost nothing)",
                   "S = p (linear), m >= 1"),
      shardy_entry(ShardySchedule::kZeroBubbleH2HalfTxLatency, {"zb-h2-half-tx"},
                   "Shardy's ZeroBubbleH2, warm-up hides transfers of half a stage's compute",
                   "S = p (linear), m >= 1"),
      shardy_entry(ShardySchedule::kZeroBubbleH2FullTxLatency, {"zb-h2-full-tx"},
                   "Shardy's ZeroBubbleH2, warm-up hides transfers of a whole stage's compute",
                   "S = p (linear), m >= 1"),
  };
}

}  // namespace

std::string normalize_schedule_name(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == '-' || c == '_' || c == ' ') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

const std::vector<ScheduleInfo>& all_schedules() {
  static const std::vector<ScheduleInfo> registry = build_registry();
  return registry;
}

const ScheduleInfo* find_schedule(std::string_view name) {
  const std::string key = normalize_schedule_name(name);
  if (key.empty()) return nullptr;
  for (const ScheduleInfo& info : all_schedules()) {
    if (normalize_schedule_name(info.name) == key) return &info;
    for (const std::string& alias : info.aliases) {
      if (normalize_schedule_name(alias) == key) return &info;
    }
  }
  return nullptr;
}

const ScheduleInfo& schedule_or_throw(std::string_view name) {
  if (const ScheduleInfo* info = find_schedule(name)) return *info;
  if (is_wrap_around_name(name)) {
    throw InputError(std::string(kParallelPipelinesWithWrapAround) +
                     " is forward-only and moves stages between actors with the microbatch, so "
                     "only `jaxpp-sim show` prints it; it cannot be simulated, lowered or run");
  }
  std::string names;
  const std::string key = normalize_schedule_name(name);
  std::string nearest;
  size_t best = std::string::npos;
  for (const ScheduleInfo& info : all_schedules()) {
    names += (names.empty() ? "" : ", ") + info.name;
    std::vector<std::string> spellings = info.aliases;
    spellings.push_back(info.name);
    for (const std::string& spelling : spellings) {
      const size_t d = edit_distance(key, normalize_schedule_name(spelling));
      if (d < best) {
        best = d;
        nearest = info.name;
      }
    }
  }
  // A suggestion only when it is close: at most a third of the name's letters differ.
  const std::string hint =
      !key.empty() && best * 3 <= key.size() ? "; did you mean " + nearest + "?" : "";
  throw InputError("unknown schedule '" + std::string(name) + "'" + hint + " (valid: " + names +
                   "; see jaxpp-sim schedules for aliases)");
}

Schedule generate_schedule(std::string_view name, const ScheduleParams& params) {
  const ScheduleInfo& info = schedule_or_throw(name);
  check_pipeline_size(std::max(params.num_actors, params.num_stages), params.num_microbatches,
                      info.name);
  return info.generate(params);
}

}  // namespace jaxpp
