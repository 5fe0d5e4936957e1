#include "runtime/cuda/check.h"

#include <cstdio>
#include <sstream>

namespace jaxpp::cuda {
namespace {
thread_local int g_rank = -1;
}  // namespace

void set_error_rank(int rank) { g_rank = rank; }
int error_rank() { return g_rank; }

const char* cublas_status_string(cublasStatus_t status) { return cublasGetStatusString(status); }

std::string failure_message(const char* file, int line, const char* expr, const std::string& what) {
  std::string path = file;
  size_t at = path.rfind("runtime/");
  if (at != std::string::npos) path = path.substr(at);  // project-relative
  std::ostringstream msg;
  msg << "rank " << g_rank << ": " << path << ":" << line << ": " << expr << " failed: " << what;
  return msg.str();
}

void fail(const char* file, int line, const char* expr, const std::string& what) {
  throw CudaError(failure_message(file, line, expr, what));
}

void warn(const char* file, int line, const char* expr, const std::string& what) {
  std::fprintf(stderr, "jaxpp-sim run: warning: %s\n",
               failure_message(file, line, expr, what).c_str());
}

}  // namespace jaxpp::cuda
