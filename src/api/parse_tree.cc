#include "api/parse_tree.h"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <exception>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "common/check.h"

namespace arbiter::api {

namespace {

bool IsBlank(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; });
}

Status TooLarge(std::string_view what, size_t size, size_t max) {
  return InvalidArgument(
      "", fmt::format("{} is {} bytes; at most {} bytes are allowed", what, size, max));
}

// Builds a Value tree from parse events with an explicit stack (no recursion), checking the
// limits and refusing duplicate keys. Every method returns false (or nullptr) once it failed; the
// first error is kept.
class TreeBuilder {
 public:
  explicit TreeBuilder(const TreeLimits& limits) : limits_(limits) {}

  bool failed() const { return !error_.ok(); }
  const Status& error() const { return error_; }
  void Fail(std::string path, std::string message) {
    if (!failed()) error_ = InvalidArgument(std::move(path), std::move(message));
  }

  // The path of the value that comes next.
  std::string NextPath() const {
    if (stack_.empty()) return "";
    const Frame& f = stack_.back();
    if (f.node->kind == Value::Kind::kSequence) return IndexPath(f.path, f.node->items.size());
    return f.has_key ? ChildPath(f.path, f.key) : f.path;
  }

  bool AwaitingKey() const {
    return !stack_.empty() && stack_.back().node->kind == Value::Kind::kMapping &&
           !stack_.back().has_key;
  }
  bool has_root() const { return has_root_; }

  bool Key(std::string key) {
    if (failed()) return false;
    Frame& f = stack_.back();
    if (!f.keys.insert(key).second) {
      Fail(ChildPath(f.path, key), "duplicate key");
      return false;
    }
    f.key = std::move(key);
    f.has_key = true;
    return true;
  }

  // Adds a scalar or a finished subtree (an expanded alias). Returns it, valid until the next
  // call, or nullptr on failure.
  Value* Add(Value v) {
    if (failed()) return nullptr;
    const size_t n =
        v.kind == Value::Kind::kSequence || v.kind == Value::Kind::kMapping ? v.CountValues() : 1;
    if (count_ + n > limits_.max_values) {
      Fail(NextPath(), fmt::format("the input has more than {} values", limits_.max_values));
      return nullptr;
    }
    if (n > 1 && stack_.size() + v.Height() > limits_.max_depth) {
      Fail(NextPath(), fmt::format("nesting is deeper than {} levels", limits_.max_depth));
      return nullptr;
    }
    count_ += n;
    if (stack_.empty()) {
      ARBITER_CHECK(!has_root_, "a second root value");
      root_ = std::move(v);
      has_root_ = true;
      return &root_;
    }
    Frame& f = stack_.back();
    if (f.node->kind == Value::Kind::kSequence) return &f.node->Add(std::move(v));
    ARBITER_CHECK(f.has_key, "a mapping value without a key");
    f.has_key = false;
    return &f.node->Set(std::move(f.key), std::move(v));
  }

  // Opens a sequence or mapping. Its pointer stays valid while it is open: only the innermost
  // open container grows.
  bool Begin(Value container) {
    if (failed()) return false;
    if (stack_.size() >= limits_.max_depth) {
      Fail(NextPath(), fmt::format("nesting is deeper than {} levels", limits_.max_depth));
      return false;
    }
    std::string path = NextPath();
    Value* v = Add(std::move(container));
    if (v == nullptr) return false;
    stack_.push_back(Frame{v, std::move(path), {}, false, {}});
    return true;
  }

  // Closes the innermost container and returns it (valid until the next call).
  Value* End() {
    ARBITER_CHECK(!stack_.empty(), "End() without Begin()");
    Value* v = stack_.back().node;
    stack_.pop_back();
    return v;
  }

  Value TakeRoot() { return std::move(root_); }

 private:
  struct Frame {
    Value* node;
    std::string path;
    std::string key;  // the current key of a mapping
    bool has_key;
    std::unordered_set<std::string> keys;
  };

  TreeLimits limits_;
  std::vector<Frame> stack_;
  Value root_;
  bool has_root_ = false;
  size_t count_ = 0;
  Status error_;
};

// ---- JSON ---------------------------------------------------------------------------------------

using Json = nlohmann::json;

std::string WithoutExceptionId(std::string_view what) {
  // "[json.exception.parse_error.101] parse error at line 1, ..." -> "parse error at line 1, ..."
  if (!what.empty() && what[0] == '[') {
    const size_t end = what.find("] ");
    if (end != std::string_view::npos) what.remove_prefix(end + 2);
  }
  return std::string(what);
}

class JsonHandler final : public nlohmann::json_sax<Json> {
 public:
  JsonHandler(TreeBuilder* b, std::string_view what) : b_(b), what_(what) {}

  bool null() override { return b_->Add(Value::Null()) != nullptr; }
  bool boolean(bool v) override {
    Value x;
    x.kind = Value::Kind::kBool;
    x.text = v ? "true" : "false";
    return b_->Add(std::move(x)) != nullptr;
  }
  bool number_integer(number_integer_t v) override { return Number(fmt::format("{}", v)); }
  bool number_unsigned(number_unsigned_t v) override { return Number(fmt::format("{}", v)); }
  bool number_float(number_float_t /*v*/, const string_t& raw) override { return Number(raw); }
  bool string(string_t& s) override { return b_->Add(Value::String(std::move(s))) != nullptr; }
  bool binary(binary_t& /*b*/) override { return false; }  // not part of JSON
  bool start_object(std::size_t /*n*/) override { return b_->Begin(Value::Mapping()); }
  bool key(string_t& k) override { return b_->Key(std::move(k)); }
  bool end_object() override { return b_->End() != nullptr; }
  bool start_array(std::size_t /*n*/) override { return b_->Begin(Value::Sequence()); }
  bool end_array() override { return b_->End() != nullptr; }
  bool parse_error(std::size_t /*pos*/, const std::string& token,
                   const nlohmann::detail::exception& ex) override {
    if (ex.id == 406) {  // out_of_range.406: a number too large for a double
      b_->Fail(b_->NextPath(), fmt::format("number {} is out of range", Quote(token)));
    } else {
      b_->Fail("", fmt::format("{} is not valid JSON: {}", what_, WithoutExceptionId(ex.what())));
    }
    return false;
  }

 private:
  bool Number(std::string text) {
    Value x;
    x.kind = Value::Kind::kNumber;
    x.text = std::move(text);
    return b_->Add(std::move(x)) != nullptr;
  }

  TreeBuilder* b_;
  std::string_view what_;
};

// ---- YAML ---------------------------------------------------------------------------------------

// Thrown from the event handlers to stop yaml-cpp once the builder has failed.
struct Abort {};

constexpr std::string_view kTagStr = "tag:yaml.org,2002:str";
constexpr std::string_view kTagSeq = "tag:yaml.org,2002:seq";
constexpr std::string_view kTagMap = "tag:yaml.org,2002:map";

class YamlHandler final : public YAML::EventHandler {
 public:
  YamlHandler(TreeBuilder* b, const TreeLimits& limits, size_t input_bytes)
      : b_(b),
        limits_(limits),
        input_bytes_(input_bytes),
        alias_budget_(std::min(limits.max_values,
                               kAliasAllowance + limits.alias_values_per_byte * input_bytes)) {}

  void OnDocumentStart(const YAML::Mark& /*mark*/) override {}
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (b_->AwaitingKey()) Fail(mark, "a mapping key must not be null");
    AddScalar(At(Value::Null(), mark), anchor);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (b_->AwaitingKey()) Fail(mark, "an alias cannot be a mapping key");
    const auto it = anchors_.find(anchor);
    if (it == anchors_.end()) Fail(mark, "an alias must not refer to a node that contains it");
    // alias values <= allowance + per_byte x input bytes: the tree stays a small multiple of
    // the input, whatever the aliases' nesting.
    alias_values_ += it->second.CountValues();
    if (alias_values_ > alias_budget_) {
      Fail(mark, fmt::format("aliases expand to more than {} values ({} bytes of input); write "
                             "the values out or use fewer aliases",
                             alias_budget_, input_bytes_));
    }
    if (b_->Add(it->second) == nullptr) throw Abort{};
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    Value v;
    if (tag == "?") {
      v.kind = Value::Kind::kPlain;
    } else if (tag == "!" || tag == kTagStr) {
      v.kind = Value::Kind::kString;
    } else {
      Fail(mark, fmt::format("the YAML tag {} is not supported", Quote(tag)));
    }
    if (!IsValidUtf8(value)) Fail(mark, "is not valid UTF-8");
    v.text = value;
    if (b_->AwaitingKey()) {
      if (!b_->Key(value)) throw Abort{};
      if (anchor != YAML::NullAnchor) Remember(anchor, v);
      return;
    }
    AddScalar(At(std::move(v), mark), anchor);
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value /*style*/) override {
    BeginContainer(mark, tag, kTagSeq, Value::Sequence(), anchor);
  }
  void OnSequenceEnd() override { EndContainer(); }

  void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value /*style*/) override {
    BeginContainer(mark, tag, kTagMap, Value::Mapping(), anchor);
  }
  void OnMapEnd() override { EndContainer(); }

 private:
  static Value At(Value v, const YAML::Mark& mark) {
    v.line = mark.line >= 0 ? mark.line + 1 : 0;
    v.column = mark.column >= 0 ? mark.column + 1 : 0;
    return v;
  }

  [[noreturn]] void Fail(const YAML::Mark& mark, const std::string& message) {
    if (mark.line >= 0) {
      b_->Fail(b_->NextPath(),
               fmt::format("{} (line {}, column {})", message, mark.line + 1, mark.column + 1));
    } else {
      b_->Fail(b_->NextPath(), message);
    }
    throw Abort{};
  }

  void AddScalar(Value v, YAML::anchor_t anchor) {
    Value* added = b_->Add(std::move(v));
    if (added == nullptr) throw Abort{};
    if (anchor != YAML::NullAnchor) Remember(anchor, *added);
  }

  void BeginContainer(const YAML::Mark& mark, const std::string& tag, std::string_view full_tag,
                      Value container, YAML::anchor_t anchor) {
    if (tag != "?" && tag != "!" && tag != full_tag) {
      Fail(mark, fmt::format("the YAML tag {} is not supported", Quote(tag)));
    }
    if (b_->AwaitingKey()) Fail(mark, "a mapping key must be a scalar");
    if (!b_->Begin(At(std::move(container), mark))) throw Abort{};
    open_anchors_.push_back(anchor);
  }

  void EndContainer() {
    const Value* done = b_->End();
    const YAML::anchor_t anchor = open_anchors_.back();
    open_anchors_.pop_back();
    if (anchor != YAML::NullAnchor) Remember(anchor, *done);
  }

  // Keeps a copy of an anchored node for its aliases; the copies are bounded like the tree.
  void Remember(YAML::anchor_t anchor, const Value& v) {
    anchored_values_ += v.CountValues();
    if (anchored_values_ > limits_.max_values) {
      b_->Fail(b_->NextPath(),
               fmt::format("anchors hold more than {} values in all", limits_.max_values));
      throw Abort{};
    }
    anchors_[anchor] = v;
  }

  TreeBuilder* b_;
  TreeLimits limits_;
  std::vector<YAML::anchor_t> open_anchors_;  // one per open container, NullAnchor when none
  std::unordered_map<YAML::anchor_t, Value> anchors_;
  size_t anchored_values_ = 0;
  size_t input_bytes_;
  size_t alias_budget_;      // the most values aliases may add in all
  size_t alias_values_ = 0;  // values added by aliases so far
};

// Stops at the start of a second document.
struct SecondDocument {};
class DocumentCounter final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& /*mark*/) override { throw SecondDocument{}; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& /*m*/, YAML::anchor_t /*a*/) override {}
  void OnAlias(const YAML::Mark& /*m*/, YAML::anchor_t /*a*/) override {}
  void OnScalar(const YAML::Mark& /*m*/, const std::string& /*t*/, YAML::anchor_t /*a*/,
                const std::string& /*v*/) override {}
  void OnSequenceStart(const YAML::Mark& /*m*/, const std::string& /*t*/, YAML::anchor_t /*a*/,
                       YAML::EmitterStyle::value /*s*/) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& /*m*/, const std::string& /*t*/, YAML::anchor_t /*a*/,
                  YAML::EmitterStyle::value /*s*/) override {}
  void OnMapEnd() override {}
};

}  // namespace

Result<Value> ParseJsonTree(std::string_view json, const TreeLimits& limits,
                            std::string_view what) {
  if (json.size() > limits.max_bytes) return TooLarge(what, json.size(), limits.max_bytes);
  if (IsBlank(json)) return InvalidArgument("", fmt::format("{} is empty", what));
  TreeBuilder builder(limits);
  JsonHandler handler(&builder, what);
  try {
    const bool ok = Json::sax_parse(json.begin(), json.end(), &handler, Json::input_format_t::json,
                                    /*strict=*/true, /*ignore_comments=*/false);
    if (builder.failed()) return builder.error();
    if (!ok || !builder.has_root()) {
      return InvalidArgument("", fmt::format("{} is not valid JSON", what));
    }
  } catch (const std::exception& e) {
    if (builder.failed()) return builder.error();
    return InvalidArgument(
        "", fmt::format("{} is not valid JSON: {}", what, WithoutExceptionId(e.what())));
  }
  return builder.TakeRoot();
}

Result<Value> ParseYamlTree(std::string_view yaml, const TreeLimits& limits,
                            std::string_view what) {
  if (yaml.size() > limits.max_bytes) return TooLarge(what, yaml.size(), limits.max_bytes);
  TreeBuilder builder(limits);
  try {
    std::istringstream in{std::string(yaml)};
    YAML::Parser parser(in);
    YamlHandler handler(&builder, limits, yaml.size());
    if (!parser.HandleNextDocument(handler) || !builder.has_root()) {
      return InvalidArgument("", fmt::format("{} is empty", what));
    }
    DocumentCounter counter;
    if (parser.HandleNextDocument(counter)) {
      return InvalidArgument("", fmt::format("{} must be one YAML document", what));
    }
  } catch (const Abort&) {
    return builder.error();
  } catch (const SecondDocument&) {
    return InvalidArgument("", fmt::format("{} must be one YAML document, found more", what));
  } catch (const YAML::Exception& e) {
    std::string msg = e.msg;
    if (e.mark.line >= 0) {
      msg += fmt::format(" (line {}, column {})", e.mark.line + 1, e.mark.column + 1);
    }
    return InvalidArgument("", fmt::format("{} is not valid YAML: {}", what, msg));
  } catch (const std::exception& e) {
    return InvalidArgument("", fmt::format("{} could not be read: {}", what, e.what()));
  }
  return builder.TakeRoot();
}

}  // namespace arbiter::api
