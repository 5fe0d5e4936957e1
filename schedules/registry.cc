#include "schedules/registry.h"

#include <algorithm>
#include <cctype>

#include "graph/error.h"
#include "graph/limits.h"

namespace jaxpp {
namespace {

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
  std::string names;
  for (const ScheduleInfo& info : all_schedules()) {
    names += (names.empty() ? "" : ", ") + info.name;
  }
  throw InputError("unknown schedule '" + std::string(name) + "' (valid: " + names +
                   "; see jaxpp-sim schedules for aliases)");
}

Schedule generate_schedule(std::string_view name, const ScheduleParams& params) {
  const ScheduleInfo& info = schedule_or_throw(name);
  check_pipeline_size(std::max(params.num_actors, params.num_stages), params.num_microbatches,
                      info.name);
  return info.generate(params);
}

}  // namespace jaxpp
