// Fuzzes the measured-GEMM file reader (costmodel/gemm_corpus.h gemm_corpus_from_json), then
// scores both splits on the file's cluster preset as validate-model --gemms does.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "costmodel/cluster.h"
#include "costmodel/gemm_corpus.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return jaxpp::fuzz::with_json(data, size, [](const nlohmann::json& doc) {
    const jaxpp::GemmCorpus g = jaxpp::gemm_corpus_from_json(doc, "gemms.json");
    const jaxpp::ClusterSpec cluster = jaxpp::cluster_preset(g.cluster);
    for (const char* split : {"fit", "test"}) {
      const jaxpp::GemmScore s = jaxpp::score_gemms(g, cluster, split, 0.10);
      for (const jaxpp::GemmScoredRow& r : s.scored) {
        if (!(r.predicted_s > 0) || !std::isfinite(r.predicted_s) || !std::isfinite(r.error)) {
          std::fprintf(stderr, "gemm promise broken: predicted %g, error %g\n", r.predicted_s,
                       r.error);
          std::abort();
        }
      }
      (void)jaxpp::gemm_score_to_json(s).dump();
    }
  });
}
