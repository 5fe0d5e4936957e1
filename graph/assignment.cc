#include "graph/assignment.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <optional>

#include "graph/error.h"
#include "graph/json_util.h"
#include "graph/limits.h"
#include "graph/model.h"

namespace jaxpp {
namespace {

constexpr std::string_view kIndexMarker = "{i}";

// "embedding, layer0, layer1, ..., layer39, logits": enough names to show the naming.
std::string layer_names_hint(const ModelSpec& model) {
  const int n = model.num_layers();
  std::string out;
  for (int i = 0; i < n; ++i) {
    if (n > 6 && i == 3) {
      out += ", ...";
      i = n - 3;
    }
    out += (out.empty() ? "" : ", ") + model.layers[i].name;
  }
  return out;
}

// Layers whose name is exactly `name`.
std::vector<int> layers_named(const ModelSpec& model, const std::string& name) {
  std::vector<int> out;
  for (int i = 0; i < model.num_layers(); ++i)
    if (model.layers[i].name == name) out.push_back(i);
  return out;
}

// The one layer named `name`, or nullopt; InputError when several layers share the name.
std::optional<int> unique_layer(const ModelSpec& model, const std::string& name,
                                const std::string& where) {
  const std::vector<int> found = layers_named(model, name);
  if (found.empty()) return std::nullopt;
  if (found.size() > 1)
    throw_input_error(where, std::to_string(found.size()) + " layers of " + model.name +
                                 " are named '" + name + "'; name a layer that is unique");
  return found.front();
}

// Recursive-descent evaluation of an actor rule over one variable i.
class RuleParser {
 public:
  RuleParser(const std::string& text, int64_t i, std::string where)
      : text_(text), i_(i), where_(std::move(where)) {}

  int64_t run() {
    const int64_t v = expr();
    skip_space();
    if (pos_ != text_.size()) fail("unexpected '" + quoted(text_.substr(pos_)) + "'");
    return v;
  }

 private:
  // A rule as it is quoted in an error: a long one shortened, so the message stays one line.
  static std::string quoted(const std::string& text) {
    constexpr size_t kShown = 40;
    return text.size() <= kShown ? text : text.substr(0, kShown) + "...";
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw_input_error(where_, "rule '" + quoted(text_) + "': " + why +
                                  " (expected an integer expression in i with + - * / mod % and "
                                  "parentheses, e.g. \"i mod 4\")");
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool take(std::string_view token) {
    skip_space();
    if (text_.compare(pos_, token.size(), token) != 0) return false;
    // "mod" is a word: not the start of a longer identifier.
    if (std::isalpha(static_cast<unsigned char>(token[0])) && pos_ + token.size() < text_.size() &&
        std::isalnum(static_cast<unsigned char>(text_[pos_ + token.size()])))
      return false;
    pos_ += token.size();
    return true;
  }
  static int64_t checked(__int128 v, const RuleParser& p) {
    if (v > std::numeric_limits<int32_t>::max() || v < std::numeric_limits<int32_t>::min())
      p.fail("the value overflows");
    return static_cast<int64_t>(v);
  }
  int64_t expr() {
    int64_t v = term();
    for (;;) {
      if (take("+")) {
        v = checked(static_cast<__int128>(v) + term(), *this);
      } else if (take("-")) {
        v = checked(static_cast<__int128>(v) - term(), *this);
      } else {
        return v;
      }
    }
  }
  int64_t term() {
    int64_t v = factor();
    for (;;) {
      if (take("*")) {
        v = checked(static_cast<__int128>(v) * factor(), *this);
      } else if (take("/")) {
        const int64_t d = factor();
        if (d == 0) fail("division by zero");
        v = floor_div(v, d);
      } else if (take("%") || take("mod")) {
        const int64_t d = factor();
        if (d == 0) fail("modulo by zero");
        v = v - floor_div(v, d) * d;
      } else {
        return v;
      }
    }
  }
  static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  }
  // Parentheses and unary minus recurse: their nesting is capped (as JSON's, graph/limits.h) so
  // that a rule of 20,000 '(' is an error, not the end of the stack.
  struct Nested {
    explicit Nested(RuleParser& p) : p_(p) {
      if (++p_.depth_ > kMaxJsonDepth)
        p_.fail("nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    }
    ~Nested() { --p_.depth_; }
    Nested(const Nested&) = delete;
    Nested& operator=(const Nested&) = delete;
    RuleParser& p_;
  };
  int64_t factor() {
    skip_space();
    if (take("(")) {
      const Nested nested(*this);
      const int64_t v = expr();
      if (!take(")")) fail("missing ')'");
      return v;
    }
    if (take("-")) {
      const Nested nested(*this);
      return checked(-static_cast<__int128>(factor()), *this);
    }
    if (take("i")) return i_;
    if (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      int64_t v = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        v = checked(static_cast<__int128>(v) * 10 + (text_[pos_] - '0'), *this);
        ++pos_;
      }
      return v;
    }
    fail(pos_ < text_.size() ? "unexpected '" + text_.substr(pos_) + "'" : "ends too early");
  }

  const std::string& text_;
  int64_t i_;
  std::string where_;
  size_t pos_ = 0;
  int depth_ = 0;
};

// The index N of a name "<prefix>N<suffix>" for a rule key "<prefix>{i}<suffix>", or -1.
int64_t rule_index(const std::string& name, const std::string& prefix, const std::string& suffix) {
  if (name.size() <= prefix.size() + suffix.size()) return -1;
  if (name.compare(0, prefix.size(), prefix) != 0) return -1;
  if (name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return -1;
  const std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 9 || !std::all_of(digits.begin(), digits.end(),
                                        [](unsigned char c) { return std::isdigit(c) != 0; }))
    return -1;
  if (digits.size() > 1 && digits[0] == '0') return -1;  // "layer01" is not layer 1
  return std::stoll(digits);
}

std::string actor_range(int num_actors) {
  return num_actors == 1 ? "0 (1 actor)"
                         : "0.." + std::to_string(num_actors - 1) + " (" +
                               std::to_string(num_actors) + " actors)";
}

// A fixed actor: an integer in range.
int fixed_actor(const nlohmann::json& value, int num_actors, const std::string& where) {
  if (!value.is_number_integer()) {
    throw_input_error(where, std::string("expected an actor index (an integer)") +
                                 (value.is_string() ? "; a rule such as \"i mod 4\" needs a key "
                                                      "with {i}, e.g. \"layer{i}\""
                                                    : ", got " + value.dump()));
  }
  const int64_t a = value.get<int64_t>();
  if (a < 0 || a >= num_actors)
    throw_input_error(where,
                      "actor " + std::to_string(a) + " is out of range " + actor_range(num_actors));
  return static_cast<int>(a);
}

}  // namespace

std::string AssignmentSpec::key_where(const std::string& key) const {
  return source + ": field 'assignment." + key + "'";
}

std::string AssignmentSpec::where() const { return source + ": field 'assignment'"; }

AssignmentSpec assignment_spec_from_json(const nlohmann::json& entries, const std::string& source) {
  AssignmentSpec spec;
  spec.source = source;
  if (!entries.is_object())
    throw_input_error(spec.where(),
                      "expected an object mapping layer names, ranges or rules to "
                      "actors, got " +
                          std::string(entries.type_name()));
  if (entries.empty()) throw_input_error(spec.where(), "is empty: assign every layer to an actor");
  spec.entries = entries;
  return spec;
}

AssignmentSpec read_assignment_file(const std::string& path) {
  const nlohmann::json doc = read_json_file(path);
  const JsonObject obj(doc, path);
  const bool is_plan = doc.contains("format") && doc["format"] == "jaxpp-sim-plan";
  if (!is_plan) obj.reject_unknown({"assignment"});
  if (!obj.has("assignment"))
    throw_input_error(path, is_plan ? "the plan has no 'assignment' field (it was not built from "
                                      "an assignment)"
                                    : "missing field 'assignment'");
  return assignment_spec_from_json(doc["assignment"], path);
}

int64_t evaluate_actor_rule(const std::string& expression, int64_t i, const std::string& where) {
  return RuleParser(expression, i, where).run();
}

Placement classify_placement(const std::vector<int>& stage_to_actor, int num_actors) {
  const int stages = static_cast<int>(stage_to_actor.size());
  for (PlacementKind kind : {PlacementKind::kLinear, PlacementKind::kLoop, PlacementKind::kV}) {
    const bool shape_fits = (kind == PlacementKind::kLinear && stages == num_actors) ||
                            (kind == PlacementKind::kLoop && stages % num_actors == 0) ||
                            (kind == PlacementKind::kV && stages == 2 * num_actors);
    if (!shape_fits) continue;
    Placement p = make_placement(kind, stages, num_actors);
    if (p.stage_to_actor == stage_to_actor) return p;
  }
  return explicit_placement(stage_to_actor, num_actors);
}

int max_stages_per_actor(const Placement& placement) {
  std::vector<int> count(placement.num_actors, 0);
  for (int a : placement.stage_to_actor) ++count[a];
  return count.empty() ? 0 : *std::max_element(count.begin(), count.end());
}

Assignment resolve_assignment(const AssignmentSpec& spec, const ModelSpec& model, int num_actors) {
  if (num_actors < 1)
    throw_input_error(spec.where(), "needs at least 1 actor, got " + std::to_string(num_actors));
  const int n = model.num_layers();
  Assignment out;
  out.spec = spec;
  out.num_actors = num_actors;
  out.layer_actor.assign(n, -1);
  std::vector<std::string> assigned_by(n);
  std::vector<bool> starts_stage(n, false);  // "new_stage": a stage starts here
  auto assign = [&](int layer, int actor, const std::string& key) {
    const std::string where = spec.key_where(key);
    if (out.layer_actor[layer] >= 0)
      throw_input_error(
          where, model.layers[layer].name + " is also assigned by '" + assigned_by[layer] + "'");
    out.layer_actor[layer] = actor;
    assigned_by[layer] = key;
  };
  for (auto it = spec.entries.begin(); it != spec.entries.end(); ++it) {
    const std::string& key = it.key();
    const std::string where = spec.key_where(key);
    // {"actor": A, "new_stage": true}: A, and a stage starts at the key's first layer (at every
    // layer a rule key matches).
    bool new_stage = false;
    nlohmann::json value = it.value();
    if (value.is_object()) {
      const JsonObject obj(value, where);
      obj.reject_unknown({"actor", "new_stage"});
      new_stage = obj.boolean_or("new_stage", false);
      nlohmann::json actor = obj.at("actor");
      value = std::move(actor);
    }
    const size_t marker = key.find(kIndexMarker);
    if (marker != std::string::npos) {  // a rule over the layers named <prefix>N<suffix>
      const std::string prefix = key.substr(0, marker);
      const std::string suffix = key.substr(marker + kIndexMarker.size());
      if (suffix.find(kIndexMarker) != std::string::npos)
        throw_input_error(where, "a rule key holds {i} once");
      const bool constant = value.is_number_integer();
      if (!constant && !value.is_string())
        throw_input_error(
            where, "expected a rule such as \"i mod 4\" or an actor index, got " + value.dump());
      int matched = 0;
      for (int l = 0; l < n; ++l) {
        const int64_t index = rule_index(model.layers[l].name, prefix, suffix);
        if (index < 0) continue;
        ++matched;
        starts_stage[l] = starts_stage[l] || new_stage;
        if (constant) {
          assign(l, fixed_actor(value, num_actors, where), key);
          continue;
        }
        const std::string rule = value.get<std::string>();
        const int64_t actor = evaluate_actor_rule(rule, index, where);
        if (actor < 0 || actor >= num_actors)
          throw_input_error(where, "'" + rule + "' gives actor " + std::to_string(actor) + " for " +
                                       model.layers[l].name + ", out of range " +
                                       actor_range(num_actors));
        assign(l, static_cast<int>(actor), key);
      }
      if (matched == 0)
        throw_input_error(where, "no layer of " + model.name + " is named " + prefix + "<i>" +
                                     suffix + " (layers: " + layer_names_hint(model) + ")");
      continue;
    }
    if (const std::optional<int> layer = unique_layer(model, key, where)) {
      assign(*layer, fixed_actor(value, num_actors, where), key);
      starts_stage[*layer] = starts_stage[*layer] || new_stage;
      continue;
    }
    // A range "<first>-<last>": the first '-' that splits the key into two layer names.
    bool ranged = false;
    for (size_t dash = key.find('-'); dash != std::string::npos; dash = key.find('-', dash + 1)) {
      const std::optional<int> first = unique_layer(model, key.substr(0, dash), where);
      const std::optional<int> last = unique_layer(model, key.substr(dash + 1), where);
      if (!first || !last) continue;
      if (*last < *first)
        throw_input_error(where, "the range runs backwards: " + key.substr(dash + 1) +
                                     " comes before " + key.substr(0, dash) + " in the model");
      const int actor = fixed_actor(value, num_actors, where);
      for (int l = *first; l <= *last; ++l) assign(l, actor, key);
      starts_stage[*first] = starts_stage[*first] || new_stage;
      ranged = true;
      break;
    }
    if (!ranged)
      throw_input_error(where, "no layer named '" + key + "' in " + model.name +
                                   ", and not a range 'first-last' of two layer names (layers: " +
                                   layer_names_hint(model) + ")");
  }
  for (int l = 0; l < n; ++l)
    if (out.layer_actor[l] < 0)
      throw_input_error(spec.where(), "layer '" + model.layers[l].name + "' is not assigned");
  std::vector<int> stage_actor;
  std::vector<int> starts;
  std::vector<bool> used(num_actors, false);
  for (int l = 0; l < n; ++l) {
    used[out.layer_actor[l]] = true;
    if (l == 0 || out.layer_actor[l] != out.layer_actor[l - 1] || starts_stage[l]) {
      starts.push_back(l);
      stage_actor.push_back(out.layer_actor[l]);
    }
  }
  for (int a = 0; a < num_actors; ++a)
    if (!used[a])
      throw_input_error(spec.where(), "actor " + std::to_string(a) + " gets no layer (" +
                                          std::to_string(num_actors) + " actors)");
  if (static_cast<int64_t>(starts.size()) > kMaxStages)
    throw_input_error(spec.where(), "gives " + std::to_string(starts.size()) +
                                        " stages, more than the limit of " +
                                        std::to_string(kMaxStages));
  out.partition = partition_from_starts(starts, n);
  out.placement = classify_placement(stage_actor, num_actors);
  return out;
}

}  // namespace jaxpp
