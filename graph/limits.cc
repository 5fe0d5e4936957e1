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

}  // namespace jaxpp
