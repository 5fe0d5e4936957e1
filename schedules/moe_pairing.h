// MoE all-to-all overlap in 1F1B (Megatron-LM's combined 1F1B expert-parallel overlap): in the
// steady state a backward and the next forward of another microbatch run as one overlapped pair,
// each one's all-to-all hidden behind the other's compute (costmodel/analytic_cost.h prices the
// pair).
//
// pair_backward_forward(schedule): on every actor, an item holding only backward tasks (B, or I,
// with or without W) that is immediately followed by an item holding only forward tasks with no
// (stage, microbatch) in common becomes one fused item (the backward's tasks, then the
// forward's). The per-actor task ORDER is unchanged (JaxPP's orders stay exact); only the
// grouping changes, and a pair starts when the inputs of both halves are there. The result is
// validated (InputError "<where>: invalid schedule: ... deadlock ..." if pairing made it stall).
//
// Usage:
//   Schedule paired = pair_backward_forward(generate_schedule("1f1b", params), "--moe-overlap");
#pragma once

#include <string>

#include "schedules/schedule.h"

namespace jaxpp {

Schedule pair_backward_forward(const Schedule& schedule, const std::string& where);

// Items of `schedule` that pair_backward_forward fuses (for reports and tests).
int count_backward_forward_pairs(const Schedule& schedule);

}  // namespace jaxpp
