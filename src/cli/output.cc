#include "cli/output.h"

#include <fmt/format.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <regex>

#include "common/time.h"

namespace arbiter::cli {

using nlohmann::json;

Result<OutputFormat> ParseOutputFormat(std::string_view s) {
  if (s.empty() || s == "table") return OutputFormat::kTable;
  if (s == "wide") return OutputFormat::kWide;
  if (s == "json") return OutputFormat::kJson;
  if (s == "yaml") return OutputFormat::kYaml;
  return InvalidArgument("output", fmt::format("unknown output format '{}'; use table, wide, "
                                               "json or yaml",
                                               s));
}

bool StdoutColors() {
  static const bool enabled = [] {
    if (isatty(STDOUT_FILENO) == 0) return false;
    const char* no_color = std::getenv("NO_COLOR");
    if (no_color != nullptr && no_color[0] != '\0') return false;
    const char* term = std::getenv("TERM");
    return term == nullptr || std::string_view(term) != "dumb";
  }();
  return enabled;
}

std::string Paint(std::string_view text, Color c, bool enabled) {
  if (!enabled || c == Color::kNone) return std::string(text);
  const char* code = "";
  switch (c) {
    case Color::kGreen:
      code = "32";
      break;
    case Color::kYellow:
      code = "33";
      break;
    case Color::kRed:
      code = "31";
      break;
    case Color::kBlue:
      code = "34";
      break;
    case Color::kCyan:
      code = "36";
      break;
    case Color::kMagenta:
      code = "35";
      break;
    case Color::kGrey:
      code = "90";
      break;
    case Color::kBold:
      code = "1";
      break;
    case Color::kNone:
      break;
  }
  return fmt::format("\033[{}m{}\033[0m", code, text);
}

Color StateColor(std::string_view s) {
  if (s == "succeeded" || s == "ready") return Color::kGreen;
  if (s == "running" || s == "starting" || s == "admitted") return Color::kBlue;
  if (s == "pending" || s == "retry-wait" || s == "cordoned" || s == "draining") {
    return Color::kYellow;
  }
  if (s == "failed" || s == "timed-out" || s == "lost" || s == "down") return Color::kRed;
  if (s == "preempting" || s == "preempted" || s == "suspended") return Color::kMagenta;
  if (s == "cancelled") return Color::kGrey;
  return Color::kNone;
}

namespace {

// Code points in UTF-8 text (continuation bytes do not count).
size_t DisplayWidth(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

}  // namespace

std::string Table::Render(bool colors) const {
  std::vector<size_t> width(headers_.size(), 0);
  for (size_t i = 0; i < headers_.size(); ++i) width[i] = DisplayWidth(headers_[i]);
  for (const auto& row : rows_) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], DisplayWidth(row[i].text));
    }
  }
  std::string out;
  auto line = [&](const std::vector<Cell>& cells) {
    std::string l;
    for (size_t i = 0; i < width.size(); ++i) {
      const std::string text = i < cells.size() ? cells[i].text : "";
      const Color color = i < cells.size() ? cells[i].color : Color::kNone;
      l += Paint(text, color, colors);
      if (i + 1 < width.size()) l += std::string(width[i] - DisplayWidth(text) + 2, ' ');
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  std::vector<Cell> header;
  for (const std::string& h : headers_) header.emplace_back(h);
  line(header);
  for (const auto& row : rows_) line(row);
  return out;
}

void Table::Print(std::FILE* out, bool colors) const {
  const std::string s = Render(colors);
  std::fwrite(s.data(), 1, s.size(), out);
}

namespace {

// Plain scalars that a YAML reader would take for something other than a string.
bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  static const std::regex kAmbiguous(
      R"(^(true|false|yes|no|on|off|y|n|null|~|True|False|Yes|No|On|Off|Y|N|Null|NULL|TRUE|FALSE|YES|NO|ON|OFF)$|^[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?$|^0x[0-9a-fA-F]+$|^0o[0-7]+$|^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$)");
  if (std::regex_match(s, kAmbiguous)) return true;
  return s.front() == ' ' || s.back() == ' ';
}

void Emit(YAML::Emitter& e, const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      if (v.empty()) {
        e << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        return;
      }
      e << YAML::BeginMap;
      for (const auto& [k, item] : v.items()) {
        e << YAML::Key;
        if (NeedsQuotes(k)) e << YAML::DoubleQuoted;
        e << k << YAML::Value;
        Emit(e, item);
      }
      e << YAML::EndMap;
      return;
    case json::value_t::array:
      if (v.empty()) {
        e << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        return;
      }
      e << YAML::BeginSeq;
      for (const json& item : v) Emit(e, item);
      e << YAML::EndSeq;
      return;
    case json::value_t::string: {
      const std::string& s = v.get_ref<const std::string&>();
      if (s.find('\n') != std::string::npos) {
        e << YAML::Literal << s;
      } else if (NeedsQuotes(s)) {
        e << YAML::DoubleQuoted << s;
      } else {
        e << s;
      }
      return;
    }
    case json::value_t::null:
      e << YAML::Null;
      return;
    case json::value_t::boolean:
      e << (v.get<bool>() ? "true" : "false");
      return;
    default:
      e << v.dump();  // numbers, in JSON's shortest form
      return;
  }
}

}  // namespace

std::string ToYaml(const json& doc) {
  YAML::Emitter e;
  e.SetIndent(2);
  Emit(e, doc);
  std::string out = e.c_str();
  if (out.empty() || out.back() != '\n') out += '\n';
  return out;
}

void PrintStructured(const json& doc, OutputFormat f) {
  const std::string s = f == OutputFormat::kYaml
                            ? ToYaml(doc)
                            : doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  std::fwrite(s.data(), 1, s.size(), stdout);
}

std::string ShortDuration(int64_t s) {
  if (s < 0) s = 0;
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m", s / 60);
  if (s < 86400) {
    return s % 3600 / 60 == 0 ? fmt::format("{}h", s / 3600)
                              : fmt::format("{}h{}m", s / 3600, s % 3600 / 60);
  }
  return s % 86400 / 3600 == 0 ? fmt::format("{}d", s / 86400)
                               : fmt::format("{}d{}h", s / 86400, s % 86400 / 3600);
}

std::optional<int64_t> SecondsSince(const std::string& iso) {
  const std::optional<int64_t> ms = ParseRfc3339Ms(iso);
  if (!ms) return std::nullopt;
  return static_cast<int64_t>(std::time(nullptr)) - *ms / 1000;
}

std::string Age(const json& v) {
  if (!v.is_string()) return "-";
  const auto s = SecondsSince(v.get<std::string>());
  return s ? ShortDuration(*s) : "-";
}

std::string Amount(const json& v) {
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (!v.is_number()) return "-";
  const double d = v.get<double>();
  std::string s = fmt::format("{:.3f}", d);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

std::string Mebibytes(int64_t mib) {
  auto dec = [](double v, const char* unit) {
    std::string s = fmt::format("{:.1f}", v);
    if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
    return s + unit;
  };
  if (mib < 1024) return fmt::format("{}Mi", mib);
  if (mib < int64_t{1024} * 1024) return dec(static_cast<double>(mib) / 1024, "Gi");
  return dec(static_cast<double>(mib) / (1024.0 * 1024.0), "Ti");
}

std::string Bar(double used, double total, int width, bool unicode) {
  const double share = total > 0 ? std::clamp(used / total, 0.0, 1.0) : 0.0;
  const int full = static_cast<int>(std::lround(share * width));
  std::string out = "[";
  for (int i = 0; i < width; ++i) {
    if (unicode) {
      out += i < full ? "\u2588" : "\u00b7";
    } else {
      out += i < full ? '#' : '.';
    }
  }
  return out + "]";
}

void Warn(std::string_view message) {
  std::fprintf(stderr, "warning: %.*s\n", static_cast<int>(message.size()), message.data());
}

void Note(std::string_view message) {
  std::fprintf(stderr, "note: %.*s\n", static_cast<int>(message.size()), message.data());
}

// A YAML node as JSON: plain scalars that look like numbers, booleans or null become those.
nlohmann::json YamlToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& kv : n) out[kv.first.as<std::string>()] = YamlToJson(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& item : n) out.push_back(YamlToJson(item));
      return out;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted
      if (s == "true" || s == "True" || s == "TRUE") return true;
      if (s == "false" || s == "False" || s == "FALSE") return false;
      if (s == "null" || s == "~" || s == "Null" || s == "NULL") return nullptr;
      nlohmann::json num = nlohmann::json::parse(s, nullptr, /*allow_exceptions=*/false);
      if (num.is_number()) return num;
      return s;
    }
    default:
      return nullptr;
  }
}

}  // namespace arbiter::cli
