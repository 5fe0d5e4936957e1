// Registry of built-in pipeline schedules, looked up by name.
//
// Names are matched case-insensitively and ignoring '-', '_' and spaces, so "1F1B", "std-1f1b"
// and "Std1F1B" name the same schedule. JaxPP's schedules come first, then the other well-known
// ones, then Shardy:MPMD's (schedules/shardy.h) under Shardy's names. Each entry has a canonical
// name (JaxPP's spelling for JaxPP's schedules, Shardy's for Shardy's), aliases, a one-line
// description, a constraints text, and a generator. The exact order each generator emits is
// specified in docs/schedules.md; schedules with a JaxPP name reproduce JaxPP's order token for
// token, and those with a Shardy name the order of Shardy's rules and scheduler.
//
// A generator CHECKS its constraints and throws InputError with the values it got, e.g.
//   ZeroBubble needs m >= S (got m=2, S=4)
//
// Usage:
//   const ScheduleInfo& info = schedule_or_throw("zb-h1");
//   Schedule s = info.generate({.num_actors = 4, .num_microbatches = 8});
//   Schedule t = generate_schedule("interleaved", {.num_actors = 2, .num_stages = 4,
//                                                  .num_microbatches = 4});
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/schedule.h"

namespace jaxpp {

struct ScheduleParams {
  int num_actors = 0;              // p, >= 1
  int num_stages = 0;              // S; 0 = the schedule's default (p, or 2p for V schedules)
  int num_microbatches = 0;        // m, >= 1
  bool fuse_steady_state = false;  // Interleaved1F1B / KimiK2 only
  int group_size = 0;              // g, MegatronInterleaved only; 0 = p
};

struct ScheduleInfo {
  std::string name;                  // canonical, e.g. "ZeroBubble"
  std::vector<std::string> aliases;  // e.g. {"zb-h1", "zb1", "zero-bubble"}
  std::string description;           // one line
  std::string constraints;           // human text, e.g. "S = p, m >= S >= 2"
  std::function<Schedule(const ScheduleParams&)> generate;
  // Whether `explore` tries it when --schedules is not given. Shardy:MPMD's schedules are not
  // (each equals or closely follows a JaxPP one, and they are scheduled from pairwise rules).
  bool searched_by_default = true;
};

// All built-in schedules, in a fixed documented order (JaxPP's first).
const std::vector<ScheduleInfo>& all_schedules();
// nullptr when no canonical name or alias matches.
const ScheduleInfo* find_schedule(std::string_view name);
// As find_schedule, but InputError listing the valid names (and the nearest one) when unknown.
const ScheduleInfo& schedule_or_throw(std::string_view name);
// schedule_or_throw(name).generate(params).
Schedule generate_schedule(std::string_view name, const ScheduleParams& params);

// The lookup key of a name: lower case without '-', '_' and spaces.
std::string normalize_schedule_name(std::string_view name);

// The individual generators (also reachable through the registry).
Schedule make_gpipe(const ScheduleParams& params);
Schedule make_std_1f1b(const ScheduleParams& params);
Schedule make_eager_1f1b(const ScheduleParams& params);
Schedule make_zero_bubble(const ScheduleParams& params);
Schedule make_interleaved_1f1b(const ScheduleParams& params);
Schedule make_kimi_k2(const ScheduleParams& params);
Schedule make_interleaved_gpipe(const ScheduleParams& params);
Schedule make_dualpipe_v(const ScheduleParams& params);
Schedule make_zb_h2(const ScheduleParams& params);
Schedule make_zb_v(const ScheduleParams& params);
Schedule make_looped_bfs(const ScheduleParams& params);
Schedule make_megatron_interleaved(const ScheduleParams& params);
// Shardy:MPMD's schedules (schedules/shardy.h) are registered under Shardy's names; its 1F1B and
// GPipe are JaxPP's Std1F1B and GPipe order for order (tested), so those names resolve there.

}  // namespace jaxpp
