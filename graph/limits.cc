#include "graph/limits.h"

#include "graph/error.h"

namespace jaxpp {

void check_pipeline_size(int64_t num_stages, int64_t num_microbatches, const std::string& where) {
  if (num_stages > kMaxStages)
    throw_input_error(where, std::to_string(num_stages) + " stages is more than the limit of " +
                                 std::to_string(kMaxStages));
  if (num_microbatches > kMaxMicrobatches)
    throw_input_error(where, std::to_string(num_microbatches) +
                                 " microbatches is more than the limit of " +
                                 std::to_string(kMaxMicrobatches));
  if (num_stages * num_microbatches > kMaxStageMicrobatches)
    throw_input_error(where, std::to_string(num_stages) + " stages x " +
                                 std::to_string(num_microbatches) + " microbatches is more than " +
                                 "the limit of " + std::to_string(kMaxStageMicrobatches) +
                                 " stage-microbatches");
}

std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

int checked_int_product(int64_t a, int64_t b, int64_t limit, const std::string& where) {
  const std::optional<int64_t> product = checked_mul(a, b);
  if (!product || *product > limit) {
    throw_input_error(where, std::to_string(a) + " x " + std::to_string(b) + " = " +
                                 (product ? std::to_string(*product) : "more than 2^63") +
                                 " is more than the limit of " + std::to_string(limit));
  }
  return static_cast<int>(*product);
}

}  // namespace jaxpp
