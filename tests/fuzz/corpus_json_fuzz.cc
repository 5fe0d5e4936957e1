// Fuzzes the validation corpus's JSON reader (costmodel/corpus.h corpus_from_json), then what
// validate-model checks before predicting (tests/fuzz/corpus_checks.h). Model files named by rows
// resolve against a base directory that does not exist, so only presets and inline models load.
#include "costmodel/corpus.h"
#include "tests/fuzz/corpus_checks.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return jaxpp::fuzz::with_json(data, size, [](const nlohmann::json& doc) {
    jaxpp::fuzz::check_loaded_corpus(
        jaxpp::corpus_from_json(doc, "corpus.json", "/nonexistent-corpus-dir"));
  });
}
