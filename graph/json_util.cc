#include "graph/json_util.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <unordered_set>
#include <vector>

#include "graph/error.h"
#include "graph/input_file.h"
#include "graph/limits.h"

namespace jaxpp {
namespace {

std::string describe(const nlohmann::json& v) {
  // replace: a string of invalid UTF-8 (built from raw bytes, not parsed) is shown with U+FFFD
  // instead of throwing nlohmann's type_error out of an error message.
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// Checks depth and key uniqueness while nlohmann parses (its parser callback sees every event).
// A stack of open containers: for an object the keys seen so far and the key being parsed, for an
// array the index of the element being parsed. Frames are reused, so their sets keep their memory.
class StrictJsonChecker {
 public:
  explicit StrictJsonChecker(const std::string& where) : where_(where) {}

  bool operator()(int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        open(event == Event::object_start);
        break;
      case Event::key:
        add_key(parsed.get_ref<const std::string&>());
        break;
      case Event::object_end:
      case Event::array_end:
        --depth_;
        element_done();
        break;
      case Event::value:
        element_done();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool is_object = false;
    std::unordered_set<std::string> keys;
    std::string key;   // object: the member being parsed
    size_t index = 0;  // array: the element being parsed
  };

  void open(bool is_object) {
    if (depth_ >= kMaxJsonDepth)
      throw_input_error(where_, "nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    if (frames_.size() <= depth_) frames_.emplace_back();
    Frame& f = frames_[depth_++];
    f.is_object = is_object;
    f.keys.clear();
    f.key.clear();
    f.index = 0;
  }

  void add_key(const std::string& key) {
    Frame& f = frames_[depth_ - 1];
    f.key = key;
    if (!f.keys.insert(key).second)
      throw_input_error(where_ + ": field '" + path() + "'",
                        "duplicate key (a JSON object names each field once)");
  }

  void element_done() {
    if (depth_ > 0 && !frames_[depth_ - 1].is_object) ++frames_[depth_ - 1].index;
  }

  std::string path() const {
    std::string p;
    for (size_t i = 0; i < depth_; ++i) {
      const Frame& f = frames_[i];
      if (f.is_object) {
        if (!p.empty()) p.push_back('.');
        p.append(f.key);
      } else {
        p.push_back('[');
        p.append(std::to_string(f.index));
        p.push_back(']');
      }
    }
    return p;
  }

  const std::string& where_;
  std::vector<Frame> frames_;
  size_t depth_ = 0;
};

}  // namespace

nlohmann::json parse_json_text(const std::string& text, const std::string& where) {
  StrictJsonChecker checker(where);
  try {
    return nlohmann::json::parse(text, std::ref(checker));
  } catch (const nlohmann::json::parse_error& e) {
    // Turn the byte offset into line:column for the message.
    size_t line = 1, col = 1;
    for (size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string what = e.what();
    const auto pos = what.find("parse error");
    if (pos != std::string::npos) what = what.substr(pos);
    throw_input_error(where + ":" + std::to_string(line) + ":" + std::to_string(col),
                      "malformed JSON (" + what + ")");
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double
    throw_input_error(where, std::string("malformed JSON (") + e.what() + ")");
  }
}

nlohmann::json read_json_file(const std::string& path) {
  return parse_json_text(read_input_text(path), path);
}

void write_text_file_atomic(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  std::error_code ec;
  if (fs::is_directory(target, ec))
    throw_input_error(path, "is a directory, cannot write a file there");
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec))
    throw_input_error(path, "cannot write: directory '" + dir.string() + "' does not exist");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw_input_error(path, std::string("cannot write: ") + std::strerror(errno));
    out << text;
    out.flush();
    if (!out) {
      fs::remove(tmp, ec);
      throw_input_error(path, "cannot write: write failed");
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw_input_error(path, "cannot write: " + ec.message());
  }
}

JsonObject::JsonObject(const nlohmann::json& value, std::string where)
    : value_(value), where_(std::move(where)) {
  if (!value_.is_object())
    throw_input_error(where_, "expected a JSON object, got " + describe(value_));
}

std::string JsonObject::field(const std::string& key) const {
  return where_ + ": field '" + key + "'";
}

bool JsonObject::has(const std::string& key) const { return value_.contains(key); }

const nlohmann::json& JsonObject::at(const std::string& key) const {
  auto it = value_.find(key);
  if (it == value_.end()) throw_input_error(field(key), "missing (required)");
  return *it;
}

std::string JsonObject::string(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_string()) throw_input_error(field(key), "expected a string, got " + describe(v));
  return v.get<std::string>();
}

std::string JsonObject::single_line_string(const std::string& key, const std::string& why) const {
  std::string text = string(key);
  if (has_control_character(text))
    throw_input_error(field(key),
                      "contains a control character (" + why + "), got " + at(key).dump());
  return text;
}

std::string JsonObject::single_line_string_or(const std::string& key, const std::string& fallback,
                                              const std::string& why) const {
  return has(key) ? single_line_string(key, why) : fallback;
}

std::string JsonObject::string_or(const std::string& key, const std::string& fallback) const {
  return has(key) ? string(key) : fallback;
}

bool JsonObject::boolean_or(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const auto& v = at(key);
  if (!v.is_boolean()) throw_input_error(field(key), "expected true or false, got " + describe(v));
  return v.get<bool>();
}

double JsonObject::number(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_number()) throw_input_error(field(key), "expected a number, got " + describe(v));
  const double d = v.get<double>();
  if (!std::isfinite(d)) throw_input_error(field(key), "expected a finite number");
  return d;
}

double JsonObject::positive_number(const std::string& key) const {
  const double d = number(key);
  if (!(d > 0)) throw_input_error(field(key), "expected a number > 0, got " + describe(at(key)));
  return d;
}

double JsonObject::non_negative_number(const std::string& key) const {
  const double d = number(key);
  if (d < 0) throw_input_error(field(key), "expected a number >= 0, got " + describe(at(key)));
  return d;
}

double JsonObject::number_or(const std::string& key, double fallback) const {
  return has(key) ? number(key) : fallback;
}

int64_t JsonObject::integer(const std::string& key) const {
  const auto& v = at(key);
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e18)
      return static_cast<int64_t>(d);
  }
  throw_input_error(field(key), "expected an integer, got " + describe(v));
}

int64_t JsonObject::non_negative_integer(const std::string& key) const {
  const int64_t i = integer(key);
  if (i < 0) throw_input_error(field(key), "expected an integer >= 0, got " + std::to_string(i));
  return i;
}

int JsonObject::positive_int(const std::string& key) const {
  const auto& v = at(key);
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int>::max()))
    throw_input_error(field(key), "too large, got " + describe(v));
  const int64_t i = integer(key);
  if (i <= 0)
    throw_input_error(field(key), "expected a positive integer, got " + std::to_string(i));
  if (i > std::numeric_limits<int>::max())
    throw_input_error(field(key), "too large, got " + std::to_string(i));
  return static_cast<int>(i);
}

int JsonObject::positive_int_or(const std::string& key, int fallback) const {
  return has(key) ? positive_int(key) : fallback;
}

JsonObject JsonObject::object(const std::string& key) const {
  return JsonObject(at(key), field(key));
}

const nlohmann::json& JsonObject::array(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_array()) throw_input_error(field(key), "expected an array, got " + describe(v));
  return v;
}

void JsonObject::reject_unknown(const std::set<std::string>& known) const {
  for (auto it = value_.begin(); it != value_.end(); ++it) {
    if (!known.count(it.key())) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw_input_error(field(it.key()), "unknown field (expected one of: " + list + ")");
    }
  }
}

}  // namespace jaxpp
