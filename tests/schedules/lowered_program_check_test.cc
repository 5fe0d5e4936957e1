// check_program (graph/program.h) on lowered programs, and on lowered programs broken on purpose:
// each error names the actor, the instruction and the reason.
//
// The lowered 1F1B program on 2 actors with 2 microbatches used below:
//   actor 0: F0, send F0 ->1 (tag 0), F1, send F1 ->1 (tag 1), recv B0 <-1 (tag 2), B0,
//            recv B1 <-1 (tag 3), B1, allreduce, optimizer
//   actor 1: recv F0 <-0 (tag 0), recv F1 <-0 (tag 1), F0, B0, send B0 ->0 (tag 2), F1, B1,
//            send B1 ->0 (tag 3), allreduce, optimizer
#include <gtest/gtest.h>

#include <string>

#include "graph/error.h"
#include "graph/program.h"
#include "schedules/lower.h"
#include "schedules/registry.h"

namespace jaxpp {
namespace {

Program one_f_one_b() {
  return lower(generate_schedule("1f1b", {.num_actors = 2, .num_microbatches = 2}), {});
}

// The message of the InputError check_program throws, or "" when it passes.
std::string check_error(const Program& p) {
  try {
    check_program(p);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(LoweredProgramCheck, LargeScheduleLowersToAWellFormedProgram) {
  const Program p = lower(
      generate_schedule("interleaved", {.num_actors = 4, .num_stages = 8, .num_microbatches = 8}));
  EXPECT_EQ(check_error(p), "");
}

TEST(LoweredProgramCheck, TagsNeedNotCountUpFromZero) {
  Program p = one_f_one_b();
  for (auto& list : p.actors)
    for (Instruction& ins : list)
      if (ins.tag >= 0) ins.tag = 1'000'000'007 + 3 * ins.tag;
  EXPECT_EQ(check_error(p), "");
}

TEST(LoweredProgramCheck, TwoSendsWithOneTagNameTheSecond) {
  Program p = one_f_one_b();
  p.actors[0][3].tag = 0;
  EXPECT_EQ(check_error(p),
            "program: actor 0, instruction 3 (send F1@s0 ->1): tag 0 used by two sends");
}

TEST(LoweredProgramCheck, RecvWithoutSendIsNamed) {
  Program p = one_f_one_b();
  Instruction extra = p.actors[1][0];
  extra.tag = 99;
  p.actors[1].push_back(extra);
  EXPECT_EQ(check_error(p),
            "program: actor 1, instruction 10 (recv F0@s0 <-0): recv with tag 99 has no matching "
            "send");
}

TEST(LoweredProgramCheck, SendWithoutRecvComesBeforeRecvWithoutSend) {
  Program p = one_f_one_b();
  p.actors[1][1].tag = 7;  // the recv of tag 1 now waits for a send of tag 7
  EXPECT_EQ(check_error(p),
            "program: actor 0, instruction 3 (send F1@s0 ->1): send with tag 1 has no matching "
            "recv");
}

TEST(LoweredProgramCheck, RecvsInAnotherOrderThanTheSendsAreNamed) {
  Program p = one_f_one_b();
  // Actor 1 posts the recv of F1 before the recv of F0; every tag still matches its send.
  std::swap(p.actors[1][0].tasks, p.actors[1][1].tasks);
  std::swap(p.actors[1][0].tag, p.actors[1][1].tag);
  EXPECT_EQ(check_error(p),
            "program: actor 1, instruction 0 (recv F1@s0 <-0): recvs from actor 0 in a different "
            "order than they are sent (expected tag 0, got 1)");
}

TEST(LoweredProgramCheck, MismatchedBytesNameTheSend) {
  Program p = one_f_one_b();
  p.actors[1][4].bytes = 5;
  EXPECT_EQ(check_error(p),
            "program: actor 1, instruction 4 (send B0@s1 ->0): sends 5 bytes but the recv expects "
            "1");
}

}  // namespace
}  // namespace jaxpp
