#include "runtime/cuda/check.h"

#include <sstream>

namespace jaxpp::cuda {
namespace {
thread_local int g_rank = -1;
}  // namespace

void set_error_rank(int rank) { g_rank = rank; }
int error_rank() { return g_rank; }

const char* cublas_status_string(cublasStatus_t status) { return cublasGetStatusString(status); }

void fail(const char* file, int line, const char* expr, const std::string& what) {
  std::ostringstream msg;
  msg << "rank " << g_rank << ": " << file << ":" << line << ": " << expr << " failed: " << what;
  throw CudaError(msg.str());
}

}  // namespace jaxpp::cuda
