// Fuzzes the validation corpus's CSV reader (costmodel/corpus.h corpus_from_csv), then what
// validate-model checks before predicting (tests/fuzz/corpus_checks.h).
#include "costmodel/corpus.h"
#include "tests/fuzz/corpus_checks.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return jaxpp::fuzz::with_text(data, size, [](const std::string& text) {
    jaxpp::fuzz::check_loaded_corpus(
        jaxpp::corpus_from_csv(text, "corpus.csv", "/nonexistent-corpus-dir"));
  });
}
