// Output-file checks shared by the commands that write reports and fitted files (calibrate, run):
// a path that cannot be written is reported before any long work starts, so a failed command
// never leaves a partial file and never wastes a run.
#pragma once

#include <string>

namespace jaxpp::cli {

// InputError "<flag> <path>: ..." when `path` is a directory, or its directory does not exist or
// is not writable.
void check_output_path(const std::string& path, const std::string& flag);

}  // namespace jaxpp::cli
