// Typed reading of JSON config files with errors that name the file and the field (STYLE.md
// rule 6). Private to sim_io; shared by the model, HuggingFace and device loaders.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/error.hpp"

namespace sim_io::detail {

using Json = nlohmann::json;

// Field named by errors about the document as a whole (syntax, top-level type).
inline constexpr std::string_view kDocumentField = "json";

// 1-based line and column of the character at 0-based `offset` in `text`.
inline std::pair<int64_t, int64_t> line_column(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  const std::string_view before = text.substr(0, offset);
  const auto line = 1 + static_cast<int64_t>(std::count(before.begin(), before.end(), '\n'));
  const size_t last_newline = before.rfind('\n');
  const size_t line_start = last_newline == std::string_view::npos ? 0 : last_newline + 1;
  return {line, static_cast<int64_t>(offset - line_start) + 1};
}

// Parses a whole file and requires an object at the top level. Throws ConfigError(source, "json",
// "invalid JSON at line L column C: <parser's reason>"), and ConfigError(source, key, ...) for a
// key repeated in one object: nlohmann would silently keep the last one, hiding a typo.
// famenc: `lenient` names one top-level key whose object may repeat keys (the last one wins, as
// Python's json does): HF's `label2id`, which real configs repeat (vit-base-patch16-224 lists
// "crane" twice; num_labels comes from id2label).
inline Json parse_json_object(std::string_view text, std::string_view source,
                              std::string_view lenient = {}) {
  std::vector<std::set<std::string>> open_objects;  // keys seen, per object being parsed
  std::vector<bool> open_lenient;                   // per object: duplicates allowed
  std::string last_key;
  auto on_event = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) {
      open_objects.emplace_back();
      open_lenient.push_back(!lenient.empty() && depth == 1 && last_key == lenient);
    } else if (event == Json::parse_event_t::object_end) {
      open_objects.pop_back();
      open_lenient.pop_back();
    } else if (event == Json::parse_event_t::key) {
      const auto& key = parsed.get_ref<const std::string&>();
      last_key = key;
      if (!open_objects.back().insert(key).second && !open_lenient.back())
        throw sim::ConfigError(std::string(source), key, "duplicate key in one object");
    }
    return true;
  };
  Json doc;
  try {
    doc = Json::parse(text.begin(), text.end(), on_event);
  } catch (const Json::parse_error& e) {
    // e.byte counts the characters read, the offending one included (1-based).
    const auto [line, column] = line_column(text, e.byte > 0 ? e.byte - 1 : 0);
    std::string reason = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: <reason>": keep <reason>.
    if (const size_t at = reason.find(": "); at != std::string::npos) reason.erase(0, at + 2);
    throw sim::ConfigError(std::string(source), std::string(kDocumentField),
                           "invalid JSON at line " + std::to_string(line) + " column " +
                               std::to_string(column) + ": " + reason);
  } catch (const Json::exception& e) {
    // Anything else the parser throws (found by fuzz/fuzz_config: a number beyond double's range,
    // "1.9e513", is out_of_range.406) is bad input too, never an escaping exception.
    std::string reason = e.what();
    if (const size_t at = reason.find("] "); at != std::string::npos) reason.erase(0, at + 2);
    throw sim::ConfigError(std::string(source), std::string(kDocumentField),
                           "invalid JSON: " + reason);
  }
  if (!doc.is_object())
    throw sim::ConfigError(
        std::string(source), std::string(kDocumentField),
        std::string("expected a JSON object at the top level, got ") + doc.type_name());
  return doc;
}

// Levenshtein distance, for "did you mean" suggestions on unknown keys.
inline size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

// Typed access to the members of one JSON object. Every failure is a ConfigError naming the
// source file and the key. In `kStrict` mode (actsim's own files) a null value is a type error;
// in `kNullIsAbsent` mode (HuggingFace configs, which write `"n_inner": null` for "default") a
// null member reads as absent.
class ObjectReader {
 public:
  enum class Nulls : uint8_t { kStrict, kNullIsAbsent };

  ObjectReader(const Json& object, std::string source, Nulls nulls)
      : object_(object), source_(std::move(source)), nulls_(nulls) {}

  const std::string& source() const { return source_; }
  const Json& json() const { return object_; }

  // Present (and, for kNullIsAbsent, not null).
  bool has(std::string_view key) const {
    const auto it = object_.find(key);
    return it != object_.end() && !(nulls_ == Nulls::kNullIsAbsent && it->is_null());
  }

  [[noreturn]] void fail(std::string_view key, const std::string& message) const {
    throw sim::ConfigError(source_, std::string(key), message);
  }

  // Required members: missing is an error naming the key.
  int64_t integer(std::string_view key) const { return to_integer(require(key), key); }
  double number(std::string_view key) const { return to_number(require(key), key); }
  bool boolean(std::string_view key) const { return to_boolean(require(key), key); }
  std::string string(std::string_view key) const { return to_string(require(key), key); }

  // Optional members: nullopt when absent.
  std::optional<int64_t> opt_integer(std::string_view key) const {
    return has(key) ? std::optional(to_integer(object_.at(key), key)) : std::nullopt;
  }
  std::optional<double> opt_number(std::string_view key) const {
    return has(key) ? std::optional(to_number(object_.at(key), key)) : std::nullopt;
  }
  std::optional<bool> opt_boolean(std::string_view key) const {
    return has(key) ? std::optional(to_boolean(object_.at(key), key)) : std::nullopt;
  }
  std::optional<std::string> opt_string(std::string_view key) const {
    return has(key) ? std::optional(to_string(object_.at(key), key)) : std::nullopt;
  }

  int64_t integer_or(std::string_view key, int64_t fallback) const {
    return opt_integer(key).value_or(fallback);
  }
  double number_or(std::string_view key, double fallback) const {
    return opt_number(key).value_or(fallback);
  }
  bool boolean_or(std::string_view key, bool fallback) const {
    return opt_boolean(key).value_or(fallback);
  }
  std::string string_or(std::string_view key, std::string_view fallback) const {
    return has(key) ? to_string(object_.at(key), key) : std::string(fallback);
  }

  // Throws for the first member (in file order) whose key is not in `known`, suggesting the
  // closest known key when it is a likely typo.
  void reject_unknown(std::initializer_list<std::string_view> known) const {
    for (const auto& [key, value] : object_.items()) {
      if (std::find(known.begin(), known.end(), key) != known.end()) continue;
      std::string_view best;
      size_t best_distance = std::numeric_limits<size_t>::max();
      for (std::string_view candidate : known) {
        const size_t d = edit_distance(key, candidate);
        if (d < best_distance) best_distance = d, best = candidate;
      }
      std::string message = "unknown key";
      if (best_distance <= std::max<size_t>(2, key.size() / 4))
        message += " (did you mean \"" + std::string(best) + "\"?)";
      fail(key, message);
    }
  }

 private:
  const Json& require(std::string_view key) const {
    if (!has(key)) fail(key, "missing (required)");
    return object_.at(key);
  }

  int64_t to_integer(const Json& v, std::string_view key) const {
    if (v.is_number_unsigned()) {
      const auto u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail(key, "integer " + v.dump() + " does not fit in 64-bit signed");
      return static_cast<int64_t>(u);
    }
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float()) {
      // Integers beyond 64 bits parse as floats: say so rather than "got 1e+20".
      const double d = v.get<double>();
      if (std::floor(d) == d && std::abs(d) >= 0x1p63)
        fail(key, "integer " + v.dump() + " does not fit in 64-bit signed");
      fail(key, "expected an integer, got " + v.dump());
    }
    fail(key, std::string("expected an integer, got ") + v.type_name());
  }

  double to_number(const Json& v, std::string_view key) const {
    if (!v.is_number()) fail(key, std::string("expected a number, got ") + v.type_name());
    return v.get<double>();
  }

  bool to_boolean(const Json& v, std::string_view key) const {
    if (!v.is_boolean()) fail(key, std::string("expected true or false, got ") + v.type_name());
    return v.get<bool>();
  }

  std::string to_string(const Json& v, std::string_view key) const {
    if (!v.is_string()) fail(key, std::string("expected a string, got ") + v.type_name());
    return v.get<std::string>();
  }

  const Json& object_;
  std::string source_;
  Nulls nulls_;
};

}  // namespace sim_io::detail
