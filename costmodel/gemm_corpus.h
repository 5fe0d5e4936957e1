// Measured GEMMs against the operator-level GEMM model (OperatorCost::gemm_s): the shape effects
// of the cost model (tile and wave quantization, short inner dimensions, stream-K) scored on
// kernels timed on a real GPU, with a fit/test split recorded in the file before any fitting.
//
// File (tests/data/kernels/h200_gemm_bf16.json; docs/validation.md):
//   {"cluster": "h200", "dtype": "bf16", "min_time_s": 2e-5, "description": "...",
//    "fit": [[m, n, k, "NN", seconds], ...], "test": [[...], ...]}
// Rows faster than min_time_s are kept but not scored (harness-bound). Layouts: NN, NT, TN, TT.
//
// Scoring: ratio = measured / predicted per row. The preset's gemm_efficiency max is an
// end-to-end constant (fitted on whole training runs, docs/validation.md), so a kernel alone runs
// faster than it says; the shape model is judged after one common scale, the median ratio of
// the scored rows: error = ratio / scale − 1. The unscaled ratio is reported too. A row is within
// the band (a fraction, validate-model's --band) when |error| <= band.
//
// Usage:
//   GemmCorpus g = load_gemm_corpus("tests/data/kernels/h200_gemm_bf16.json");
//   GemmScore s = score_gemms(g, cluster_preset(g.cluster), "test", 0.10);
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "costmodel/cluster.h"
#include "graph/model.h"

namespace jaxpp {

struct GemmRow {
  double m = 0, n = 0, k = 0;
  std::string layout;  // "NN", "NT", "TN", "TT"
  double seconds = 0;
  bool test = false;
};

struct GemmCorpus {
  std::string path;
  std::string cluster;  // preset the rows were measured on
  Dtype dtype = Dtype::kBf16;
  double min_time_s = 0;
  std::vector<GemmRow> rows;  // fit rows, then test rows
};

// InputError naming the file and field (a missing split, a row that is not [m, n, k, layout,
// seconds] with positive sizes and time, an unknown dtype or layout).
GemmCorpus load_gemm_corpus(const std::string& path);
// The same from a parsed document; `path` names it in messages.
GemmCorpus gemm_corpus_from_json(const nlohmann::json& doc, const std::string& path);

struct GemmScoredRow {
  GemmRow row;
  double predicted_s = 0;
  double ratio = 0;  // measured / predicted
  double error = 0;  // ratio / scale − 1
  bool in_band = false;  // |error| <= GemmScore::band
};

struct GemmScore {
  std::string split;  // "fit", "test" or "all"
  int rows = 0;       // scored rows
  int skipped = 0;    // below min_time_s
  double scale = 0;   // median measured / predicted
  double band = 0;    // allowed |error| (a fraction)
  int in_band = 0;    // scored rows with |error| <= band
  double mean_abs_error = 0, max_abs_error = 0;  // after the scale
  double mean_abs_unscaled = 0;                  // |ratio − 1|
  std::vector<GemmScoredRow> scored;
};

// Prices every row of `split` ("fit", "test" or "all") with OperatorCost::gemm_s on `cluster`
// (a model of the corpus dtype) and counts the rows within `band` (> 0; the caller checks it,
// check_validation_band). InputError for another split name or when no row is scored.
GemmScore score_gemms(const GemmCorpus& corpus, const ClusterSpec& cluster,
                      const std::string& split, double band);

nlohmann::json gemm_score_to_json(const GemmScore& s);

}  // namespace jaxpp
