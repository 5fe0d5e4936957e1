#include "cli/cluster_arg.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "graph/error.h"
#include "graph/input_file.h"

namespace jaxpp::cli {

ClusterSpec load_cluster_arg(const std::string& name_or_path) {
  std::string key = name_or_path;
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::vector<std::string> presets = cluster_preset_names();
  if (std::find(presets.begin(), presets.end(), key) != presets.end())
    return load_cluster(name_or_path);
  if (!path_exists(name_or_path)) {
    std::string list;
    for (const std::string& p : presets) list += (list.empty() ? "" : ", ") + p;
    throw_input_error(name_or_path,
                      "unknown cluster: not a preset and no such file (presets: " + list + ")");
  }
  check_input_file(name_or_path);  // a directory, a FIFO, a device, too large: says which
  return load_cluster(name_or_path);
}

}  // namespace jaxpp::cli
