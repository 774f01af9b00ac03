// The two front ends of the API codecs: JSON (nlohmann's SAX parser) and YAML (yaml-cpp's event
// parser) into a `Value` tree (value.h), under limits.
//
// Neither builds the library's own DOM: the tree is built from events with an explicit stack, so
// nesting depth, value count and duplicate keys are checked while parsing and a hostile input
// (10,000 nested arrays, a billion-laughs alias bomb, a 1 MiB object of distinct keys) is refused
// early and in bounded time and memory. Library exceptions never escape.
//
// Internal to src/api. Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string_view>

#include "api/value.h"
#include "common/result.h"

namespace arbiter::api {

struct TreeLimits {
  size_t max_bytes = 1 << 20;   // the input
  size_t max_depth = 64;        // open mappings and sequences at once
  size_t max_values = 1 << 16;  // values in the tree, aliases expanded
  // YAML: the values aliases may add in all, per byte of the input, beyond a small allowance
  // (kAliasAllowance). Without aliases a value takes at least two bytes of text, so this bounds
  // the tree, and the memory of a parse, by a small multiple of the input (an alias bomb of a
  // few hundred bytes is refused at once instead of filling max_values).
  size_t alias_values_per_byte = 2;
};

inline constexpr size_t kAliasAllowance = 4096;

// Strict JSON (RFC 8259): one value, valid UTF-8, no duplicate keys. Numbers keep their text.
// `what` names the input in messages ("request body").
Result<Value> ParseJsonTree(std::string_view json, const TreeLimits& limits, std::string_view what);

// One YAML 1.2 document (JSON is YAML). Quoted scalars become kString, plain ones kPlain; `~`,
// `null` and empty values kNull. Aliases are expanded (counted against max_values); tags other
// than !!str, !!map and !!seq, alias keys and non-scalar keys are refused. Values carry their line
// and column.
Result<Value> ParseYamlTree(std::string_view yaml, const TreeLimits& limits, std::string_view what);

}  // namespace arbiter::api
