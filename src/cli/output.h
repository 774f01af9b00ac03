// How the `arbiter` client commands print: aligned tables for people, JSON and YAML for scripts.
//
//   -o table (default)  aligned columns, states coloured when stdout is a terminal
//   -o wide             the table with more columns
//   -o json             the server's objects as JSON (indented)
//   -o yaml             the same as YAML
//
// Colours are used only when stdout is a terminal, NO_COLOR is not set and TERM is not "dumb".
//
// Thread safety: plain functions and values; a Table is used by one thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace YAML {
class Node;
}

namespace arbiter::cli {

// A YAML node as JSON: plain scalars that look like numbers, booleans or null become those;
// quoted scalars stay strings.
nlohmann::json YamlToJson(const YAML::Node& n);

enum class OutputFormat { kTable, kWide, kJson, kYaml };

// "table", "wide", "json", "yaml" (and "" for table).
Result<OutputFormat> ParseOutputFormat(std::string_view s);
inline bool IsStructured(OutputFormat f) {
  return f == OutputFormat::kJson || f == OutputFormat::kYaml;
}

enum class Color { kNone, kGreen, kYellow, kRed, kBlue, kCyan, kMagenta, kGrey, kBold };

// Whether stdout gets colours (a terminal, NO_COLOR unset, TERM not dumb). Computed once.
bool StdoutColors();
// `text` wrapped in the escape codes of `c` when `enabled`.
std::string Paint(std::string_view text, Color c, bool enabled);
// The colour of a job state ("running" -> blue) or a node state ("ready" -> green).
Color StateColor(std::string_view state);

struct Cell {
  std::string text;
  Color color = Color::kNone;
  Cell(std::string t, Color c = Color::kNone)  // NOLINT(google-explicit-constructor)
      : text(std::move(t)), color(c) {}
  Cell(const char* t) : text(t) {}  // NOLINT(google-explicit-constructor)
};

// Columns left-aligned, two spaces apart, widths by the longest cell (counted in UTF-8 code
// points); the last column is not padded.
class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void AddRow(std::vector<Cell> cells) { rows_.push_back(std::move(cells)); }
  size_t rows() const { return rows_.size(); }
  std::string Render(bool colors) const;
  void Print(std::FILE* out, bool colors) const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<Cell>> rows_;
};

// The document as YAML (block style; empty maps and lists as {} and []; strings quoted where a
// plain scalar would read back as another type).
std::string ToYaml(const nlohmann::json& doc);
// Prints `doc` as JSON (2-space indent) or YAML, with a final newline.
void PrintStructured(const nlohmann::json& doc, OutputFormat f);

// "3s", "5m", "2h10m", "3d4h": a short duration for tables.
std::string ShortDuration(int64_t seconds);
// Seconds since an ISO 8601 UTC time ("2024-05-01T12:00:00.123Z"); nullopt when unparsable.
std::optional<int64_t> SecondsSince(const std::string& iso8601);
// The age of an ISO 8601 time as ShortDuration, or "-" when absent or unparsable.
std::string Age(const nlohmann::json& iso8601);
// A JSON number of GPUs or CPUs as a short decimal ("2", "0.5", "12.25").
std::string Amount(const nlohmann::json& v);
// MiB as "512Mi", "64Gi", "1.5Ti".
std::string Mebibytes(int64_t mib);
// A text bar of `width` cells filled to used/total ("[####....]").
std::string Bar(double used, double total, int width, bool unicode);

// Appends `item` to `*out`, after `sep` unless `*out` is empty.
inline void AppendTo(std::string* out, std::string_view sep, std::string_view item) {
  if (!out->empty()) out->append(sep);
  out->append(item);
}

// Prints "warning: MESSAGE" / "note: MESSAGE" to stderr.
void Warn(std::string_view message);
void Note(std::string_view message);

}  // namespace arbiter::cli
