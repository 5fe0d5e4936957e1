#include "costmodel/hetero_cluster.h"

#include <cmath>
#include <filesystem>

#include "graph/error.h"
#include "graph/input_file.h"
#include "graph/json_util.h"
#include "graph/limits.h"

namespace jaxpp {
namespace {

constexpr double kHeteroGB = 1e9;
constexpr double kHeteroUs = 1e-6;

ClusterKind read_kind(const nlohmann::json& entry, const std::string& where,
                      const std::string& folder) {
  const JsonObject k(entry, where);
  k.reject_unknown({"preset", "file", "cluster", "gpus", "name"});
  const int sources = int{k.has("preset")} + int{k.has("file")} + int{k.has("cluster")};
  if (sources != 1)
    throw_input_error(where, sources == 0
                                 ? "give the device kind as \"preset\", \"file\" or \"cluster\""
                                 : "give only one of \"preset\", \"file\" and \"cluster\"");
  ClusterKind kind;
  if (k.has("preset")) {
    const std::string preset = k.string("preset");
    try {
      kind.spec = cluster_preset(preset);
    } catch (const InputError&) {
      throw_input_error(k.field("preset"), "unknown preset '" + preset + "' (expected one of: " +
                                               cluster_preset_list() + ")");
    }
    kind.name = preset;
    for (char& c : kind.name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  } else if (k.has("file")) {
    std::filesystem::path path = k.string("file");
    if (path.is_relative() && !folder.empty()) path = std::filesystem::path(folder) / path;
    const std::string p = path.string();
    if (!path_exists(p)) throw_input_error(k.field("file"), "no such file: " + p);
    check_input_file(p);
    const nlohmann::json doc = read_json_file(p);
    if (is_hetero_cluster_doc(doc))
      throw_input_error(k.field("file"),
                        p + " is itself a heterogeneous cluster; a kind is one device kind");
    kind.spec = cluster_from_json(doc, p);
    kind.name = kind.spec.name;
    kind.file = p;
  } else {
    kind.spec = cluster_from_json(k.at("cluster"), k.field("cluster"));
    kind.name = kind.spec.name;
  }
  kind.gpus = k.positive_int("gpus");
  if (k.has("name")) kind.name = k.single_line_string("name", "it is printed in reports");
  if (kind.name.empty()) throw_input_error(k.field("name"), "a device kind needs a non-empty name");
  // --actor-kinds and --kind-tp split on commas: a name holding one could never be given.
  if (kind.name.find(',') != std::string::npos)
    throw_input_error(k.has("name") ? k.field("name") : k.where(),
                      "device kind '" + kind.name +
                          "': a name cannot hold ',' (--actor-kinds "
                          "lists kinds separated by commas)");
  return kind;
}

}  // namespace

int HeteroCluster::total_gpus() const {
  int n = 0;
  for (const ClusterKind& k : kinds) n += k.gpus;
  return n;
}

int HeteroCluster::kind_index(const std::string& kind) const {
  for (size_t i = 0; i < kinds.size(); ++i)
    if (kinds[i].name == kind) return static_cast<int>(i);
  return -1;
}

std::string HeteroCluster::kind_names() const {
  std::string list;
  for (const ClusterKind& k : kinds) list += (list.empty() ? "" : ", ") + k.name;
  return list;
}

bool is_hetero_cluster_doc(const nlohmann::json& doc) {
  return doc.is_object() && (doc.contains("kinds") || doc.contains("inter_kind"));
}

HeteroCluster hetero_cluster_from_json(const nlohmann::json& doc, const std::string& source,
                                       const std::string& folder) {
  const JsonObject obj(doc, source);
  obj.reject_unknown({"name", "kinds", "inter_kind"});
  HeteroCluster h;
  h.name = obj.single_line_string_or("name", std::filesystem::path(source).stem().string(),
                                     "it is printed in reports");
  const nlohmann::json& kinds = obj.array("kinds");
  if (kinds.empty()) throw_input_error(obj.field("kinds"), "expected at least one device kind");
  if (kinds.size() > 64)
    throw_input_error(obj.field("kinds"),
                      "at most 64 device kinds, got " + std::to_string(kinds.size()));
  for (size_t i = 0; i < kinds.size(); ++i) {
    const std::string where = source + ": kinds[" + std::to_string(i) + "]";
    ClusterKind kind = read_kind(kinds[i], where, folder);
    if (h.kind_index(kind.name) >= 0)
      throw_input_error(where, "device kind '" + kind.name +
                                   "' appears twice; give each kind a distinct \"name\"");
    if (static_cast<int64_t>(h.total_gpus()) + kind.gpus > kMaxGpus)
      throw_input_error(where, "more than " + std::to_string(kMaxGpus) + " GPUs in all");
    h.kinds.push_back(std::move(kind));
  }
  if (obj.has("inter_kind")) {
    h.inter_kind = link_from_json(obj.object("inter_kind"));
  } else {
    // The slower kind's network.
    const ClusterKind* slowest = &h.kinds.front();
    for (const ClusterKind& k : h.kinds)
      if (k.spec.inter_node.effective_bandwidth_bytes_per_s() <
          slowest->spec.inter_node.effective_bandwidth_bytes_per_s())
        slowest = &k;
    h.inter_kind = slowest->spec.inter_node;
  }
  return h;
}

nlohmann::json hetero_cluster_to_json(const HeteroCluster& h) {
  nlohmann::json kinds = nlohmann::json::array();
  for (const ClusterKind& k : h.kinds)
    kinds.push_back({{"name", k.name}, {"gpus", k.gpus}, {"cluster", cluster_to_json(k.spec)}});
  return {{"name", h.name},
          {"kinds", kinds},
          {"inter_kind",
           {{"bandwidth_gb_per_s", h.inter_kind.bandwidth_bytes_per_s / kHeteroGB},
            {"latency_us", h.inter_kind.latency_s / kHeteroUs},
            {"efficiency", h.inter_kind.efficiency}}}};
}

std::optional<HeteroCluster> load_hetero_cluster_arg(const std::string& name_or_path) {
  std::string key = name_or_path;
  for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const std::string& p : cluster_preset_names())
    if (key == p) return std::nullopt;
  if (!path_exists(name_or_path)) return std::nullopt;  // load_cluster_arg says what it is
  check_input_file(name_or_path);
  const nlohmann::json doc = read_json_file(name_or_path);
  if (!is_hetero_cluster_doc(doc)) return std::nullopt;
  return hetero_cluster_from_json(doc, name_or_path,
                                  std::filesystem::path(name_or_path).parent_path().string());
}

}  // namespace jaxpp
