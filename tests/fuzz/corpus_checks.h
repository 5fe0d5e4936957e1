// Shared by the corpus_json and corpus_csv fuzz targets: what validate-model does with a corpus
// after loading it and before predicting (check_corpus_schedules, select_corpus_rows), and the
// load's own promises, checked on every corpus that loads. A broken promise aborts (a finding).
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "costmodel/cluster.h"
#include "costmodel/corpus.h"
#include "graph/error.h"
#include "simulator/model_validation.h"

namespace jaxpp::fuzz {

inline void fail(const char* what, const std::string& id) {
  std::fprintf(stderr, "corpus promise broken: %s (row '%s')\n", what, id.c_str());
  std::abort();
}

// A loaded corpus: at least one row, every row with a printable non-empty id, a known cluster, a
// positive finite measured value and step time, finite FLOPs; then validate-model's checks.
inline void check_loaded_corpus(const Corpus& corpus) {
  if (corpus.rows.empty()) fail("a corpus without rows loaded", "");
  for (const CorpusRow& r : corpus.rows) {
    if (r.id.empty()) fail("empty id", r.id);
    for (unsigned char ch : r.id)
      if (ch < 0x20 || ch == 0x7f) fail("control character in the id", r.id);
    try {
      (void)cluster_preset(r.cluster);  // known, or the load should have refused it
    } catch (const InputError&) {
      fail("unknown cluster", r.id);
    }
    if (!(r.measured_value > 0) || !std::isfinite(r.measured_value)) fail("measured value", r.id);
    if (!(r.measured_step_time_s > 0) || !std::isfinite(r.measured_step_time_s))
      fail("measured step time", r.id);
    if (!(r.convention_flops >= 0) || !std::isfinite(r.convention_flops))
      fail("FLOPs of the convention", r.id);
    if (!(r.peak_flops_per_s > 0) || !std::isfinite(r.peak_flops_per_s)) fail("peak", r.id);
    const ParallelConfig& c = r.config;
    if (int64_t{c.tp} * c.pp * c.dp * c.cp != c.gpus) fail("tp·pp·dp·cp != gpus", r.id);
    if (int64_t{c.num_microbatches} * c.dp * c.microbatch_size != c.global_batch)
      fail("global batch", r.id);
  }
  check_corpus_schedules(corpus);
  (void)select_corpus_rows(corpus, "", "all");
}

}  // namespace jaxpp::fuzz
