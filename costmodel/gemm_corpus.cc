#include "costmodel/gemm_corpus.h"

#include <algorithm>
#include <cmath>

#include "costmodel/calibration.h"
#include "costmodel/operator_cost.h"
#include "graph/error.h"
#include "graph/json_util.h"

namespace jaxpp {
namespace {

GemmRow read_gemm_row(const nlohmann::json& r, const std::string& where, bool test) {
  const bool shape_ok = r.is_array() && r.size() == 5 && r[0].is_number() && r[1].is_number() &&
                        r[2].is_number() && r[3].is_string() && r[4].is_number();
  if (!shape_ok)
    throw_input_error(where, "expected [m, n, k, layout, seconds], got " + r.dump());
  GemmRow row;
  row.m = r[0].get<double>();
  row.n = r[1].get<double>();
  row.k = r[2].get<double>();
  row.layout = r[3].get<std::string>();
  row.seconds = r[4].get<double>();
  row.test = test;
  for (double v : {row.m, row.n, row.k})
    if (!(v >= 1 && v <= 1e7 && v == std::floor(v)))
      throw_input_error(where, "m, n and k must be integers in [1, 1e7], got " + r.dump());
  if (!(row.seconds > 0 && row.seconds < 1e4))
    throw_input_error(where, "seconds must be in (0, 1e4), got " + r.dump());
  if (row.layout != "NN" && row.layout != "NT" && row.layout != "TN" && row.layout != "TT")
    throw_input_error(where, "layout must be NN, NT, TN or TT, got '" + row.layout + "'");
  return row;
}

}  // namespace

GemmCorpus load_gemm_corpus(const std::string& path) {
  return gemm_corpus_from_json(read_json_file(path), path);
}

GemmCorpus gemm_corpus_from_json(const nlohmann::json& doc, const std::string& path) {
  JsonObject obj(doc, path);
  obj.reject_unknown({"description", "cluster", "dtype", "min_time_s", "min_time_reason", "split",
                      "fit", "test"});
  GemmCorpus g;
  g.path = path;
  g.cluster = obj.string("cluster");
  try {
    cluster_preset(g.cluster);
  } catch (const InputError& e) {
    throw_input_error(obj.field("cluster"), e.what());
  }
  g.dtype = parse_dtype(obj.string_or("dtype", "bf16"), obj.field("dtype"));
  // The free-text fields are text: a number or object there is a mistake, not a comment.
  for (const char* key : {"description", "min_time_reason", "split"})
    if (obj.has(key)) (void)obj.string(key);
  g.min_time_s = obj.has("min_time_s") ? obj.non_negative_number("min_time_s") : 0;
  if (g.min_time_s >= 1e4)  // as the rows' seconds: a larger floor would score no row
    throw_input_error(obj.field("min_time_s"),
                      "expected seconds in [0, 1e4), got " + obj.at("min_time_s").dump());
  for (const char* split : {"fit", "test"}) {
    const nlohmann::json& rows = obj.array(split);
    if (rows.empty()) throw_input_error(obj.field(split), "no rows");
    for (size_t i = 0; i < rows.size(); ++i)
      g.rows.push_back(read_gemm_row(rows[i], obj.field(split + ("[" + std::to_string(i) + "]")),
                                     std::string(split) == "test"));
  }
  return g;
}

GemmScore score_gemms(const GemmCorpus& corpus, const ClusterSpec& cluster,
                      const std::string& split, double band) {
  if (split != "fit" && split != "test" && split != "all")
    throw InputError("--split: expected fit, test or all, got '" + split + "'");
  ModelSpec model;
  model.dtype = corpus.dtype;
  const OperatorCost cost(model, ParallelConfig{}, cluster);
  GemmScore s;
  s.split = split;
  s.band = band;
  std::vector<double> ratios;
  for (const GemmRow& r : corpus.rows) {
    if ((split == "fit" && r.test) || (split == "test" && !r.test)) continue;
    if (r.seconds < corpus.min_time_s) {
      ++s.skipped;
      continue;
    }
    GemmScoredRow out;
    out.row = r;
    out.predicted_s = cost.gemm_s(r.m, r.n, r.k);
    out.ratio = r.seconds / out.predicted_s;
    ratios.push_back(out.ratio);
    s.scored.push_back(out);
  }
  if (s.scored.empty())
    throw InputError(corpus.path + ": no " + split + " row at or above min_time_s to score");
  s.rows = static_cast<int>(s.scored.size());
  s.scale = median_of(std::move(ratios));
  for (GemmScoredRow& r : s.scored) {
    r.error = r.ratio / s.scale - 1;
    r.in_band = std::abs(r.error) <= band;
    s.in_band += r.in_band ? 1 : 0;
    s.mean_abs_error += std::abs(r.error) / s.rows;
    s.max_abs_error = std::max(s.max_abs_error, std::abs(r.error));
    s.mean_abs_unscaled += std::abs(r.ratio - 1) / s.rows;
  }
  return s;
}

nlohmann::json gemm_score_to_json(const GemmScore& s) {
  nlohmann::json rows = nlohmann::json::array();
  for (const GemmScoredRow& r : s.scored)
    rows.push_back({{"m", r.row.m},
                    {"n", r.row.n},
                    {"k", r.row.k},
                    {"layout", r.row.layout},
                    {"measured_s", r.row.seconds},
                    {"predicted_s", r.predicted_s},
                    {"ratio", r.ratio},
                    {"error", r.error},
                    {"in_band", r.in_band}});
  return {{"split", s.split},
          {"rows", s.rows},
          {"skipped_below_min_time", s.skipped},
          {"scale", s.scale},
          {"band", s.band},
          {"in_band", s.in_band},
          {"mean_abs_error", s.mean_abs_error},
          {"max_abs_error", s.max_abs_error},
          {"mean_abs_unscaled_error", s.mean_abs_unscaled},
          {"scored", rows}};
}

}  // namespace jaxpp
