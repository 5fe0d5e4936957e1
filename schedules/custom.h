// Custom schedules: import and export of user-written per-actor orders.
//
// Two formats, detected by file extension (.json / .csv) or else by content (a leading '{' is
// JSON):
//
// JSON — one token list per actor; every field but "actors" is optional and inferred:
//   {"schedule": "my-1f1b",            // name, default "custom"
//    "num_stages": 4,                  // default: 1 + largest stage named
//    "num_microbatches": 8,            // default: 1 + largest microbatch named
//    "placement": {...},               // graph/placement.h JSON; default: inferred from which
//                                      //   actor holds each stage (linear/loop/V if it matches)
//    "actors": [["F0@s0", "F1@s0", "B0@s0", ...], ["F0@s1", "F0@s1+B0@s1", ...]]}
//   Tokens: <F|B|I|W><microbatch>@s<stage>; a fused group joins tokens with '+'.
// JSON with "rules" instead of "actors" — Shardy-style "before" rules, expanded into orders by
// rule_schedule.h (errors for cycles, missing tasks and unordered tasks name the rule).
//
// CSV — PyTorch torch.distributed.pipelining, compute_only dialect (what
// `_dump_csv(..., "compute_only")` writes and `_load_csv` reads): one row per rank, one action
// per cell, cells "<stage><F|I|W|B><microbatch>" with a GLOBAL stage index (0F3 = stage 0 forward
// of microbatch 3; 2I1 input-gradient backward, 1W0 weight backward, 3B2 full backward); an
// empty cell is an idle slot and is skipped. Placement is inferred from the rows. As an
// extension, a cell may join actions with '+' to keep a fused group ("3F0+3B0"). Export writes
// one cell per task with no idle cells, splitting fused groups into consecutive cells (PyTorch
// has no fused actions), so CSV round trips preserve every order but not the fusion.
//
// Errors (InputError) name the file, the line or actor, the position and the token, e.g.
//   bad.csv: line 2 (actor 1), cell 4: bad action 'F2' (expected <stage><F|I|W|B><microbatch>,
//   e.g. 0F3)
// Loading does not validate the order; run validate.h on the result.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "schedules/schedule.h"

namespace jaxpp {

enum class ScheduleFileFormat { kJson, kCsv };
inline constexpr std::array kAllScheduleFileFormats = {ScheduleFileFormat::kJson,
                                                       ScheduleFileFormat::kCsv};
std::string_view to_string(ScheduleFileFormat f);  // "json", "csv"

// By extension when it is .json or .csv (case-insensitive), else by content.
ScheduleFileFormat detect_schedule_format(const std::string& path, std::string_view content);

Schedule parse_schedule_csv(std::string_view text, const std::string& where);
std::string schedule_to_csv(const Schedule& schedule);
Schedule parse_schedule_json(std::string_view text, const std::string& where);
std::string schedule_to_json_text(const Schedule& schedule);  // pretty, one actor per line
// A parsed JSON schedule document: rule-based (rule_schedule.h) when it has "rules", else the
// explicit form (schedule_from_json). parse_schedule_json is parse_json_text + this.
Schedule custom_schedule_from_json(const nlohmann::json& j, const std::string& where);

// Reads (graph/input_file.h: a regular text file within the size limit) and parses a schedule file
// of either format. InputError when unreadable or malformed. parse_schedule_json is strict JSON
// (parse_json_text: depth limit, no duplicate keys).
Schedule load_schedule_file(const std::string& path);
// Writes CSV when `path` ends in .csv, JSON otherwise (atomic write).
void save_schedule_file(const Schedule& schedule, const std::string& path);

}  // namespace jaxpp
