#pragma once
// Reading a tokenizer.json (Hugging Face tokenizers' format), internal to hf/: the parse and the lookups,
// each naming the file and the key in its errors ("hf::BPE: 'dir/tokenizer.json': "decoder.type": ...").
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "hf/pretokenizer.h"

namespace saccade::hf::tokjson {

using nlohmann::json;

/// nlohmann's parse of `text`, with `file` named in errors and nesting bounded to 64 (its values are freed
/// recursively). Throws saccade::Error for JSON that does not parse or nests deeper.
json parse(const std::string& text, const std::string& file);

/// The Error for `key` of `file` (no key: the file as a whole).
Error fail(const std::string& file, const std::string& key, const std::string& what);

/// j[key], or nullptr when it is absent or null.
const json* get(const json& j, const char* key);

/// The boolean j[key] (`fallback` when absent). Throws fail(file, where.key) for a value of another type.
bool flag(const json& j, const char* key, const std::string& file, const std::string& where, bool fallback);

/// The string j[key]. Throws fail(file, where.key) when it is absent or not a string.
std::string text(const json& j, const char* key, const std::string& file, const std::string& where);

/// The integer j[key] in [0, max]. Throws fail(file, where.key) when it is absent, not an integer or out of
/// range.
int64_t count(const json& j, const char* key, int64_t max, const std::string& file, const std::string& where);

/// j["type"] of the object j. Throws fail(file, where) for a non-object, fail(file, where.type) for a
/// missing or non-string type.
std::string type_of(const json& j, const std::string& file, const std::string& where);

/// The pattern j[key]: {"Regex": "..."} or {"String": "..."} (literal). Throws fail(file, where.key) for
/// another shape, and Regex's error for a regex that does not compile.
std::unique_ptr<Regex> pattern(const json& j, const char* key, const std::string& file,
                               const std::string& where);

/// The list j[key] of a Sequence. Throws fail(file, where.key) when it is absent or not a list. (`where` is a
/// C string: a std::string temporary there makes g++ 13 warn of a dangling reference to the result.)
const json& list(const json& j, const char* key, const std::string& file, const char* where);

}  // namespace saccade::hf::tokjson
