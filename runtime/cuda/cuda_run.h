// Entry points of the CUDA backend used by runtime/run.cc (compiled only with JAXPP_HAVE_CUDA).
#pragma once

namespace jaxpp::cuda {

// Throws jaxpp::RuntimeFailure("--backend cuda: no CUDA device visible ...") when the driver
// reports no GPU (or no driver at all).
void require_device();

}  // namespace jaxpp::cuda
