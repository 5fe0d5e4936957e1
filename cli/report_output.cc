#include "cli/report_output.h"

#include <unistd.h>

#include <filesystem>

#include "graph/error.h"

namespace jaxpp::cli {

void check_output_path(const std::string& path, const std::string& flag) {
  namespace fs = std::filesystem;
  const std::string where = flag + " " + path;
  std::error_code ec;
  if (path.empty()) throw_input_error(flag, "expected a file name");
  if (fs::is_directory(path, ec)) throw_input_error(where, "is a directory");
  fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) parent = ".";
  if (!fs::is_directory(parent, ec))
    throw_input_error(where, "directory '" + parent.string() + "' does not exist");
  if (access(parent.c_str(), W_OK) != 0)
    throw_input_error(where, "directory '" + parent.string() + "' is not writable");
}

}  // namespace jaxpp::cli
