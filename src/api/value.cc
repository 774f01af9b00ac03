#include "api/value.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>

#include "model/resources.h"

namespace arbiter::api {

namespace {

constexpr size_t kMaxPathKey = 64;
constexpr size_t kMaxQuoted = 80;

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool IsSimpleKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxPathKey) return false;
  return std::all_of(key.begin(), key.end(),
                     [](char c) { return IsAlnum(c) || c == '_' || c == '-'; });
}

// Whether every character is allowed and the first one is alphanumeric (when `first_alnum`).
template <typename Pred>
bool CharsOk(std::string_view s, size_t max_len, bool allow_empty, bool first_alnum, Pred ok) {
  if (s.empty()) return allow_empty;
  if (s.size() > max_len) return false;
  if (first_alnum && !IsAlnum(s[0])) return false;
  return std::all_of(s.begin(), s.end(), ok);
}

// Number-like text shown as it is in messages; anything else is quoted.
bool LooksNumeric(std::string_view s) {
  if (s.empty() || s.size() > 40) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return IsDigit(c) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
  });
}

bool IsNumberKind(const Value& v) {
  return v.kind == Value::Kind::kNumber || v.kind == Value::Kind::kPlain;
}

}  // namespace

// ---- Value --------------------------------------------------------------------------------------

Value Value::Null() { return Value(); }

Value Value::Plain(std::string text) {
  Value v;
  v.kind = Kind::kPlain;
  v.text = std::move(text);
  return v;
}

Value Value::String(std::string text) {
  Value v;
  v.kind = Kind::kString;
  v.text = std::move(text);
  return v;
}

Value Value::Sequence() {
  Value v;
  v.kind = Kind::kSequence;
  return v;
}

Value Value::Mapping() {
  Value v;
  v.kind = Kind::kMapping;
  return v;
}

Value& Value::Add(Value v) {
  items.push_back(std::move(v));
  return items.back();
}

Value& Value::Set(std::string key, Value v) {
  members.push_back(Member{std::move(key), std::move(v)});
  return members.back().value;
}

const Value* Value::Find(std::string_view key) const {
  for (const auto& [k, v] : members) {
    if (k == key) return &v;
  }
  return nullptr;
}

size_t Value::CountValues() const {
  size_t n = 1;
  for (const Value& i : items) n += i.CountValues();
  for (const auto& m : members) n += m.value.CountValues();
  return n;
}

size_t Value::Height() const {
  size_t h = 0;
  for (const Value& i : items) h = std::max(h, i.Height() + 1);
  for (const auto& m : members) h = std::max(h, m.value.Height() + 1);
  return h;
}

// ---- Paths and messages -------------------------------------------------------------------------

std::string ChildPath(std::string_view path, std::string_view key) {
  if (IsSimpleKey(key)) {
    if (path.empty()) return std::string(key);
    return fmt::format("{}.{}", path, key);
  }
  return fmt::format("{}[{}]", path, Quote(key));
}

std::string IndexPath(std::string_view path, size_t index) {
  return fmt::format("{}[{}]", path, index);
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values above U+10FFFF are not UTF-8.
    constexpr uint32_t kMinForLen[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLen[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

std::string Quote(std::string_view text) {
  const bool utf8 = IsValidUtf8(text);
  std::string out = "\"";
  size_t i = 0;
  for (; i < text.size() && out.size() < kMaxQuoted; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f || (c >= 0x80 && !utf8)) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (i < text.size()) {
    // Do not cut a UTF-8 sequence in half.
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
    if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
    out += "...";
  }
  out += '"';
  return out;
}

std::string Describe(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kNull:
      return "null";
    case Value::Kind::kBool:
      return v.text;
    case Value::Kind::kNumber:
    case Value::Kind::kPlain:
      return LooksNumeric(v.text) ? v.text : Quote(v.text);
    case Value::Kind::kString:
      return "string " + Quote(v.text);
    case Value::Kind::kSequence:
      return "a list";
    case Value::Kind::kMapping:
      return "a mapping";
  }
  return "?";
}

Status ErrorAt(const Value& v, const std::string& path, const std::string& message) {
  if (v.line > 0) {
    return InvalidArgument(path, fmt::format("{} (line {}, column {})", message, v.line, v.column));
  }
  return InvalidArgument(path, message);
}

// ---- Names --------------------------------------------------------------------------------------

bool IsValidModelName(std::string_view s) {
  return CharsOk(s, 63, false, true,
                 [](char c) { return IsAlnum(c) || c == '.' || c == '_' || c == '-'; });
}

bool IsValidLabelKey(std::string_view s) {
  return CharsOk(s, 253, false, true,
                 [](char c) { return IsAlnum(c) || c == '.' || c == '_' || c == '-' || c == '/'; });
}

bool IsValidLabelValue(std::string_view s) {
  return CharsOk(s, 253, true, false,
                 [](char c) { return IsAlnum(c) || c == '.' || c == '_' || c == '-'; });
}

bool IsValidEnvName(std::string_view s) {
  if (s.empty() || s.size() > 255 || IsDigit(s[0])) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return IsAlnum(c) || c == '_'; });
}

bool IsValidUserName(std::string_view s) {
  return CharsOk(s, 253, false, true,
                 [](char c) { return IsAlnum(c) || c == '.' || c == '_' || c == '-' || c == '@'; });
}

// ---- Numbers ------------------------------------------------------------------------------------

bool ParseDecimalMilli(std::string_view text, int64_t* out, std::string* why) {
  constexpr int64_t kMaxWhole = std::numeric_limits<int64_t>::max() / 1000;
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) negative = text[i++] == '-';
  if (i == text.size() || !IsDigit(text[i])) {
    *why = "is not a decimal number";
    return false;
  }
  int64_t whole = 0;
  for (; i < text.size() && IsDigit(text[i]); ++i) {
    const int d = text[i] - '0';
    if (whole > (kMaxWhole - d) / 10) {
      *why = "is too large";
      return false;
    }
    whole = whole * 10 + d;
  }
  int64_t frac = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    if (i == text.size() || !IsDigit(text[i])) {
      *why = "is not a decimal number";
      return false;
    }
    int digits = 0;
    for (; i < text.size() && IsDigit(text[i]); ++i, ++digits) {
      if (digits < 3) {
        frac = frac * 10 + (text[i] - '0');
      } else if (text[i] != '0') {
        *why = "has more than 3 decimals";
        return false;
      }
    }
    for (; digits < 3; ++digits) frac *= 10;
  }
  if (i < text.size()) {
    *why = (text[i] == 'e' || text[i] == 'E') ? "must be written without an exponent"
                                              : "is not a decimal number";
    return false;
  }
  if (whole > (std::numeric_limits<int64_t>::max() - frac) / 1000) {
    *why = "is too large";
    return false;
  }
  const int64_t milli = whole * 1000 + frac;
  *out = negative ? -milli : milli;
  return true;
}

bool ParseMib(std::string_view text, int64_t* out, std::string* why) {
  // Multiplier to MiB as num / den: Ki = 1/1024, Mi = 1, Gi = 1024, ...
  struct Unit {
    std::string_view suffix;
    int64_t num;
    int64_t den;
  };
  constexpr Unit kUnits[] = {{"Ki", 1, 1024},
                             {"Mi", 1, 1},
                             {"Gi", 1024, 1},
                             {"Ti", int64_t{1} << 20, 1},
                             {"Pi", int64_t{1} << 30, 1}};
  Unit unit{"", 1, 1};
  std::string_view number = text;
  for (const Unit& u : kUnits) {
    if (text.size() > u.suffix.size() && text.substr(text.size() - u.suffix.size()) == u.suffix) {
      unit = u;
      number = text.substr(0, text.size() - u.suffix.size());
      break;
    }
  }
  if (!number.empty() && !IsDigit(number.back())) {
    *why = "has an unknown unit: use a number of MiB or the suffixes Ki, Mi, Gi, Ti, Pi";
    return false;
  }
  int64_t milli = 0;
  if (!ParseDecimalMilli(number, &milli, why)) return false;
  if (milli < 0) {
    *why = "must be >= 0";
    return false;
  }
  if (milli > std::numeric_limits<int64_t>::max() / unit.num) {
    *why = "is too large";
    return false;
  }
  // MiB = milli x num / (1000 x den), exactly.
  const int64_t scaled = milli * unit.num;
  const int64_t den = 1000 * unit.den;
  if (scaled % den != 0) {
    *why = "is not a whole number of MiB";
    return false;
  }
  *out = scaled / den;
  return true;
}

// ---- Typed reads --------------------------------------------------------------------------------

Status ReadString(const Value& v, const std::string& path, size_t max_len, std::string* out) {
  if (v.kind != Value::Kind::kString && v.kind != Value::Kind::kPlain) {
    return ErrorAt(v, path, fmt::format("must be a string, got {}", Describe(v)));
  }
  if (v.text.size() > max_len) {
    return ErrorAt(v, path,
                   fmt::format("must be at most {} characters, got {}", max_len, v.text.size()));
  }
  if (v.text.find('\0') != std::string::npos) {
    return ErrorAt(v, path, "must not contain NUL characters");
  }
  if (!IsValidUtf8(v.text)) return ErrorAt(v, path, "must be valid UTF-8");
  *out = v.text;
  return Status::Ok();
}

Status ReadBool(const Value& v, const std::string& path, bool* out) {
  const bool can = v.kind == Value::Kind::kBool || v.kind == Value::Kind::kPlain;
  if (can && (v.text == "true" || v.text == "True" || v.text == "TRUE")) {
    *out = true;
    return Status::Ok();
  }
  if (can && (v.text == "false" || v.text == "False" || v.text == "FALSE")) {
    *out = false;
    return Status::Ok();
  }
  return ErrorAt(v, path, fmt::format("must be true or false, got {}", Describe(v)));
}

Status ReadInt(const Value& v, const std::string& path, int64_t lo, int64_t hi, int64_t* out) {
  auto fail = [&] {
    return ErrorAt(
        v, path, fmt::format("must be an integer between {} and {}, got {}", lo, hi, Describe(v)));
  };
  if (!IsNumberKind(v)) return fail();
  std::string_view t = v.text;
  if (!t.empty() && t[0] == '+') t.remove_prefix(1);
  const size_t digits_from = (!t.empty() && t[0] == '-') ? 1 : 0;
  if (t.size() == digits_from ||
      !std::all_of(t.begin() + static_cast<std::ptrdiff_t>(digits_from), t.end(), IsDigit)) {
    return fail();
  }
  int64_t n = 0;
  const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
  if (ec != std::errc() || ptr != t.data() + t.size() || n < lo || n > hi) return fail();
  *out = n;
  return Status::Ok();
}

Status ReadInt32(const Value& v, const std::string& path, int32_t lo, int32_t hi, int32_t* out) {
  int64_t n = 0;
  ARBITER_RETURN_IF_ERROR(ReadInt(v, path, lo, hi, &n));
  *out = static_cast<int32_t>(n);
  return Status::Ok();
}

Status ReadMilli(const Value& v, const std::string& path, int64_t lo, int64_t hi, int64_t* out) {
  std::string why;
  int64_t milli = 0;
  if (!IsNumberKind(v) && v.kind != Value::Kind::kString) {
    why = "is not a number";
  } else if (ParseDecimalMilli(v.text, &milli, &why)) {
    if (milli >= lo && milli <= hi) {
      *out = milli;
      return Status::Ok();
    }
    why = "is out of range";
  }
  return ErrorAt(v, path,
                 fmt::format("must be a number between {} and {} with at most 3 decimals, got {} "
                             "({})",
                             FormatMilli(lo), FormatMilli(hi), Describe(v), why));
}

Status ReadMib(const Value& v, const std::string& path, int64_t hi, int64_t* out) {
  std::string why;
  int64_t mib = 0;
  if (!IsNumberKind(v) && v.kind != Value::Kind::kString) {
    why = "is not a size";
  } else if (ParseMib(v.text, &mib, &why)) {
    if (mib <= hi) {
      *out = mib;
      return Status::Ok();
    }
    why = "is too large";
  }
  return ErrorAt(v, path,
                 fmt::format("must be a whole number of MiB or a size like \"64Gi\" or \"512Mi\", "
                             "at most {} MiB, got {} ({})",
                             hi, Describe(v), why));
}

Status ExpectSequence(const Value& v, const std::string& path, size_t max_size) {
  if (v.kind != Value::Kind::kSequence) {
    return ErrorAt(v, path, fmt::format("must be a list, got {}", Describe(v)));
  }
  if (v.items.size() > max_size) {
    return ErrorAt(v, path,
                   fmt::format("must have at most {} items, got {}", max_size, v.items.size()));
  }
  return Status::Ok();
}

Status ExpectMapping(const Value& v, const std::string& path, size_t max_size) {
  if (v.kind != Value::Kind::kMapping) {
    return ErrorAt(v, path, fmt::format("must be a mapping, got {}", Describe(v)));
  }
  if (v.members.size() > max_size) {
    return ErrorAt(v, path,
                   fmt::format("must have at most {} entries, got {}", max_size, v.members.size()));
  }
  return Status::Ok();
}

// ---- MappingReader ------------------------------------------------------------------------------

Status MappingReader::Check(std::initializer_list<std::string_view> allowed) const {
  ARBITER_RETURN_IF_ERROR(ExpectMapping(v_, path_, std::numeric_limits<size_t>::max()));
  for (const auto& [key, value] : v_.members) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return ErrorAt(
          value, PathOf(key),
          fmt::format("unknown field {}; allowed here: {}", Quote(key), fmt::join(allowed, ", ")));
    }
  }
  return Status::Ok();
}

const Value* MappingReader::Get(std::string_view key) const {
  const Value* v = v_.Find(key);
  return (v == nullptr || v->is_null()) ? nullptr : v;
}

Status MappingReader::Require(std::string_view key) const {
  if (Get(key) != nullptr) return Status::Ok();
  return ErrorAt(v_, PathOf(key), "is required");
}

Status MappingReader::String(std::string_view key, size_t max_len, std::string* out) const {
  const Value* v = Get(key);
  return v == nullptr ? Status::Ok() : ReadString(*v, PathOf(key), max_len, out);
}

Status MappingReader::Bool(std::string_view key, bool* out) const {
  const Value* v = Get(key);
  return v == nullptr ? Status::Ok() : ReadBool(*v, PathOf(key), out);
}

Status MappingReader::Int(std::string_view key, int64_t lo, int64_t hi, int64_t* out) const {
  const Value* v = Get(key);
  return v == nullptr ? Status::Ok() : ReadInt(*v, PathOf(key), lo, hi, out);
}

Status MappingReader::Int32(std::string_view key, int32_t lo, int32_t hi, int32_t* out) const {
  const Value* v = Get(key);
  return v == nullptr ? Status::Ok() : ReadInt32(*v, PathOf(key), lo, hi, out);
}

Status MappingReader::Milli(std::string_view key, int64_t lo, int64_t hi, int64_t* out) const {
  const Value* v = Get(key);
  return v == nullptr ? Status::Ok() : ReadMilli(*v, PathOf(key), lo, hi, out);
}

Status MappingReader::Mib(std::string_view key, int64_t hi, int64_t* out) const {
  const Value* v = Get(key);
  return v == nullptr ? Status::Ok() : ReadMib(*v, PathOf(key), hi, out);
}

}  // namespace arbiter::api
