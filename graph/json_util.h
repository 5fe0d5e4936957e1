// Typed, checked access to JSON objects loaded from user files.
//
// Every accessor names the source (usually a file path) and the field on failure:
//   cluster.json: field 'intra_node.bandwidth_gb_per_s': expected a number > 0, got "fast"
// Usage:
//   JsonObject obj(doc, "model.json");
//   int layers = obj.positive_int("layers");
//   std::string dtype = obj.string_or("dtype", "bf16");
//   obj.reject_unknown();  // unknown keys are errors, so typos do not pass silently
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace jaxpp {

// Parses a whole file as JSON: read_input_text (a regular file of at most kMaxInputFileBytes, no
// NUL byte; graph/input_file.h), then parse_json_text. InputError names the file.
nlohmann::json read_json_file(const std::string& path);

// Parses JSON text strictly. Besides syntax (an InputError naming `where` and the line/column),
// rejects what nlohmann's parser would otherwise accept silently or pass on to code that recurses:
//   deep.json: nesting deeper than 64 levels              (kMaxJsonDepth, graph/limits.h)
//   plan.json: field 'config.pp': duplicate key            (the parser keeps the last one)
// The field path joins object keys with '.' and array indices as "[i]".
nlohmann::json parse_json_text(const std::string& text, const std::string& where);

// Writes JSON to `path` atomically (temporary file + rename), so a failed write leaves no
// partial file. InputError when the path cannot be written.
void write_text_file_atomic(const std::string& path, const std::string& text);

class JsonObject {
 public:
  // `where` is the prefix for messages, e.g. "model.json" or "plan.json: field 'program'".
  JsonObject(const nlohmann::json& value, std::string where);

  bool has(const std::string& key) const;
  const nlohmann::json& at(const std::string& key) const;  // required

  std::string string(const std::string& key) const;
  std::string string_or(const std::string& key, const std::string& fallback) const;
  // string(key), refused when it holds a control character (below 0x20, or 0x7f): a name that is
  // printed in tables and messages or written into generated files, where a "\n" would start a
  // new line. `why` says where it goes:
  //   m.json: field 'name': contains a control character (<why>), got "a\nb"
  std::string single_line_string(const std::string& key, const std::string& why) const;
  std::string single_line_string_or(const std::string& key, const std::string& fallback,
                                    const std::string& why) const;
  bool boolean_or(const std::string& key, bool fallback) const;
  double number(const std::string& key) const;           // any finite number
  double positive_number(const std::string& key) const;  // > 0
  double non_negative_number(const std::string& key) const;
  double number_or(const std::string& key, double fallback) const;
  int64_t integer(const std::string& key) const;
  int64_t non_negative_integer(const std::string& key) const;
  int positive_int(const std::string& key) const;
  int positive_int_or(const std::string& key, int fallback) const;
  JsonObject object(const std::string& key) const;
  const nlohmann::json& array(const std::string& key) const;

  // Throws for any key not in `known` (and not read through this object).
  void reject_unknown(const std::set<std::string>& known) const;

  const std::string& where() const { return where_; }
  std::string field(const std::string& key) const;  // "<where>: field '<key>'"

 private:
  const nlohmann::json& value_;
  std::string where_;
};

}  // namespace jaxpp
