// JSON text written straight into a string, for the records and answers on the submission path:
// building an nlohmann::json tree (a std::map per object) and dumping it cost more than parsing
// the request. Only what those documents hold: objects, arrays, strings, integers, booleans,
// null. The output is compact, in the order written; parse it with nlohmann::json for a tree.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace arbiter::api {

class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : out_(out) {}

  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);   // inside an object, before each value
  JsonWriter& String(std::string_view s);  // escaped; bytes of 0x80 and above pass as UTF-8
  JsonWriter& Int(int64_t v);
  JsonWriter& Uint(uint64_t v);
  JsonWriter& Bool(bool v);
  JsonWriter& Null();

  // Shorthands: a key and its value.
  JsonWriter& Field(std::string_view key, std::string_view v) { return Key(key).String(v); }
  JsonWriter& Field(std::string_view key, const char* v) { return Key(key).String(v); }
  JsonWriter& Field(std::string_view key, const std::string& v) { return Key(key).String(v); }
  JsonWriter& Field(std::string_view key, bool v) { return Key(key).Bool(v); }
  JsonWriter& Field(std::string_view key, int32_t v) { return Key(key).Int(v); }
  JsonWriter& Field(std::string_view key, int64_t v) { return Key(key).Int(v); }
  JsonWriter& Field(std::string_view key, uint64_t v) { return Key(key).Uint(v); }
  template <typename T>
  JsonWriter& Field(std::string_view key, const std::vector<T>& v) {
    Key(key).BeginArray();
    for (const T& e : v) Value(e);
    return EndArray();
  }

  // An already serialised JSON value, written as is (the caller vouches for it).
  JsonWriter& Raw(std::string_view json);

 private:
  void Value(const std::string& v) { String(v); }
  void Value(int32_t v) { Int(v); }
  void Value(int64_t v) { Int(v); }
  void Value(uint64_t v) { Uint(v); }
  void Separate();  // a comma before every element but the first of its container

  std::string* out_;
  std::vector<bool> first_;  // per open container: no element yet
  bool after_key_ = false;
};

}  // namespace arbiter::api
