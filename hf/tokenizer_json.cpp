#include "hf/tokenizer_json.h"

#include <fmt/format.h>

namespace saccade::hf::tokjson {

json parse(const std::string& text, const std::string& file) {
  try {
    return json::parse(text, [&](int depth, json::parse_event_t, json&) {
      if (depth > 64) throw Error(fmt::format("hf::BPE: '{}': JSON nested deeper than 64", file));
      return true;
    });
  } catch (const json::exception& e) {
    throw Error(fmt::format("hf::BPE: '{}': not JSON: {}", file, e.what()));
  }
}

Error fail(const std::string& file, const std::string& key, const std::string& what) {
  if (key.empty()) return Error(fmt::format("hf::BPE: '{}': {}", file, what));
  return Error(fmt::format("hf::BPE: '{}': \"{}\": {}", file, key, what));
}

const json* get(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

bool flag(const json& j, const char* key, const std::string& file, const std::string& where, bool fallback) {
  const json* v = get(j, key);
  if (!v) return fallback;
  if (!v->is_boolean())
    throw fail(file, where + "." + key, fmt::format("{} is not true or false", v->dump()));
  return v->get<bool>();
}

std::string text(const json& j, const char* key, const std::string& file, const std::string& where) {
  const json* v = get(j, key);
  if (!v || !v->is_string()) throw fail(file, where + "." + key, "missing or not a string");
  return v->get<std::string>();
}

int64_t count(const json& j, const char* key, int64_t max, const std::string& file,
              const std::string& where) {
  const json* v = get(j, key);
  if (!v || !v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > max)
    throw fail(file, where + "." + key, fmt::format("missing or not an integer in [0, {}]", max));
  return v->get<int64_t>();
}

std::string type_of(const json& j, const std::string& file, const std::string& where) {
  if (!j.is_object()) throw fail(file, where, fmt::format("not an object but {}", j.type_name()));
  return text(j, "type", file, where);
}

std::unique_ptr<Regex> pattern(const json& j, const char* key, const std::string& file,
                               const std::string& where) {
  const json* p = get(j, key);
  const std::string at = where + "." + key;
  if (!p || !p->is_object() || p->size() != 1 || !p->begin()->is_string() ||
      (p->begin().key() != "Regex" && p->begin().key() != "String"))
    throw fail(file, at, "not {\"Regex\": ...} or {\"String\": ...}");
  return std::make_unique<Regex>(p->begin()->get<std::string>(), fmt::format("hf::BPE '{}' {}", file, at),
                                 p->begin().key() == "String");
}

const json& list(const json& j, const char* key, const std::string& file, const char* where) {
  const json* v = get(j, key);
  if (!v || !v->is_array()) throw fail(file, std::string(where) + "." + key, "missing or not a list");
  return *v;
}

}  // namespace saccade::hf::tokjson
