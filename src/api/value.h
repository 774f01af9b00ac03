// The parse tree shared by the API's JSON and YAML front ends, and typed reads from it whose errors
// name the field.
//
// Both front ends (parse_tree.h) turn their input into a `Value`: mappings keep document order and
// unique keys, scalars keep their source text (numbers are never converted through double), and
// every value remembers where it came from. The codecs (job_codec.h, config_codec.h) then read
// typed fields with the functions below; each error is an InvalidArgument whose field() is the
// dotted path ("tenants[0].queues[1].guaranteed.gpu") and whose message says what is allowed.
//
// Null means absent: a member whose value is null reads as if it were not there.
//
// Internal to src/api; the server uses the codecs, not these.
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace arbiter::api {

struct Member;

struct Value {
  enum class Kind {
    kNull,
    kBool,      // JSON true/false; text "true"/"false"
    kNumber,    // JSON number; text as written
    kPlain,     // YAML plain (unquoted) scalar: untyped until read
    kString,    // JSON string or quoted YAML scalar
    kSequence,  // items
    kMapping,   // members
  };

  Kind kind = Kind::kNull;
  std::string text;
  std::vector<Value> items;
  std::vector<Member> members;  // document order, keys unique
  int line = 0;                 // 1-based source position; 0 for values built in code
  int column = 0;

  static Value Null();
  static Value Plain(std::string text);  // numbers and booleans built by the dumpers
  static Value String(std::string text);
  static Value Sequence();
  static Value Mapping();

  bool is_null() const { return kind == Kind::kNull; }
  bool is_scalar() const {
    return kind != Kind::kNull && kind != Kind::kSequence && kind != Kind::kMapping;
  }
  // Appends to a sequence / a mapping (the caller keeps keys unique). Returns the new element.
  Value& Add(Value v);
  Value& Set(std::string key, Value v);
  // A mapping's member, or nullptr.
  const Value* Find(std::string_view key) const;
  // Values in this subtree, itself included, and its height (a scalar has height 0).
  size_t CountValues() const;
  size_t Height() const;
};

// One entry of a mapping.
struct Member {
  std::string key;
  Value value;
};

// ---- Paths --------------------------------------------------------------------------------------

// "resources" + "gpus" -> "resources.gpus"; keys other than [A-Za-z0-9_-]+ are bracketed and
// quoted: labels["topology.kubernetes.io/zone"]. Long keys are shortened.
std::string ChildPath(std::string_view path, std::string_view key);
// "command" + 3 -> "command[3]".
std::string IndexPath(std::string_view path, size_t index);
// For messages: the text in double quotes, control characters escaped, shortened to about 80.
std::string Quote(std::string_view text);
// For messages: "string \"4\"", "4.5", "true", "null", "a list", "a mapping".
std::string Describe(const Value& v);
bool IsValidUtf8(std::string_view s);

// ---- Names --------------------------------------------------------------------------------------

// GPU models: [A-Za-z0-9][A-Za-z0-9._-]*, at most 63 characters ("A100-80G").
bool IsValidModelName(std::string_view s);
// Label and taint keys: [A-Za-z0-9][A-Za-z0-9._/-]*, at most 253 ("topology.example.com/zone").
bool IsValidLabelKey(std::string_view s);
// Label and taint values: [A-Za-z0-9._-]*, at most 253 (may be empty).
bool IsValidLabelValue(std::string_view s);
// Environment variable names: [A-Za-z_][A-Za-z0-9_]*, at most 255.
bool IsValidEnvName(std::string_view s);
// User names: [A-Za-z0-9][A-Za-z0-9._@-]*, at most 253 ("alice", "alice@example.com").
bool IsValidUserName(std::string_view s);

// ---- Numbers ------------------------------------------------------------------------------------

// Exact decimal to thousandths: "2.5" -> 2500, "8" -> 8000, "-0.125" -> -125. Digits with an
// optional sign and fraction; at most 3 decimals (more are allowed only when they are zeros). No
// exponent. On failure returns false and says why in `why` ("has more than 3 decimals").
bool ParseDecimalMilli(std::string_view text, int64_t* out, std::string* why);
// Memory in MiB: an integer ("65536"), or a decimal with a binary suffix Ki, Mi, Gi, Ti, Pi
// ("512Mi", "64Gi", "1.5Ti") that comes to a whole number of MiB.
bool ParseMib(std::string_view text, int64_t* out, std::string* why);

// ---- Typed reads --------------------------------------------------------------------------------
// Each checks the kind and the range and on failure returns InvalidArgument(path, message).
// Strings may be JSON strings or YAML scalars (quoted or not); numbers and booleans may be JSON
// numbers/booleans or YAML plain scalars, never strings ("4" is not a number).

Status ReadString(const Value& v, const std::string& path, size_t max_len, std::string* out);
Status ReadBool(const Value& v, const std::string& path, bool* out);
Status ReadInt(const Value& v, const std::string& path, int64_t lo, int64_t hi, int64_t* out);
Status ReadInt32(const Value& v, const std::string& path, int32_t lo, int32_t hi, int32_t* out);
// A decimal number of units converted to milli-units; a number or a string ("0.5", 2.5).
Status ReadMilli(const Value& v, const std::string& path, int64_t lo, int64_t hi, int64_t* out);
// MiB: an integer or a string with a binary suffix ("64Gi").
Status ReadMib(const Value& v, const std::string& path, int64_t hi, int64_t* out);
// Kind checks; `max_size` bounds the items or members.
Status ExpectSequence(const Value& v, const std::string& path, size_t max_size);
Status ExpectMapping(const Value& v, const std::string& path, size_t max_size);

// An error about `v` at `path`; appends the source position when `v` has one.
Status ErrorAt(const Value& v, const std::string& path, const std::string& message);

// Reads the members of one mapping. Check() first: it verifies that the value is a mapping and
// that every key is allowed (an unknown key is an error naming it and listing the allowed ones).
// The typed getters leave *out unchanged when the member is absent or null.
class MappingReader {
 public:
  MappingReader(const Value& v, std::string path) : v_(v), path_(std::move(path)) {}

  Status Check(std::initializer_list<std::string_view> allowed) const;

  const std::string& path() const { return path_; }
  std::string PathOf(std::string_view key) const { return ChildPath(path_, key); }
  // The member, or nullptr when absent or null.
  const Value* Get(std::string_view key) const;
  // An error when the member is absent or null.
  Status Require(std::string_view key) const;

  Status String(std::string_view key, size_t max_len, std::string* out) const;
  Status Bool(std::string_view key, bool* out) const;
  Status Int(std::string_view key, int64_t lo, int64_t hi, int64_t* out) const;
  Status Int32(std::string_view key, int32_t lo, int32_t hi, int32_t* out) const;
  Status Milli(std::string_view key, int64_t lo, int64_t hi, int64_t* out) const;
  Status Mib(std::string_view key, int64_t hi, int64_t* out) const;

 private:
  const Value& v_;
  std::string path_;
};

}  // namespace arbiter::api
