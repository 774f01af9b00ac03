#include "cli/slurm_format.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "cli/slurm.h"
#include "cli/suggest.h"

namespace arbiter::cli {

namespace {

// Code points in UTF-8 text.
size_t Width(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

// The first `n` code points of `s`.
std::string Cut(std::string_view s, size_t n) {
  size_t i = 0;
  for (size_t seen = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && seen++ == n) break;
  }
  return std::string(s.substr(0, i));
}

// `s` cut or padded to `width` columns.
std::string Justify(std::string_view s, size_t width, bool right) {
  std::string v = Cut(s, width);
  const std::string pad(width - Width(v), ' ');
  return right ? pad + v : v + pad;
}

}  // namespace

Result<PercentFormat> ParsePercentFormat(std::string_view text, std::string_view letters,
                                         std::string_view flag) {
  PercentFormat f;
  std::string* literal = &f.prefix;
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '%') {
      *literal += text[i++];
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '%') {
      *literal += '%';
      i += 2;
      continue;
    }
    PercentField field;
    ++i;
    if (i < text.size() && (text[i] == '.' || text[i] == '#')) {
      field.right = text[i] == '.';
      field.fit = text[i] == '#';
      ++i;
    }
    size_t digits = 0;
    while (i + digits < text.size() && std::isdigit(static_cast<unsigned char>(text[i + digits]))) {
      ++digits;
    }
    if (digits > 3) return InvalidArgument(std::string(flag), "a field width is at most 999");
    field.width = digits > 0 ? std::atoi(std::string(text.substr(i, digits)).c_str()) : 0;
    i += digits;
    if (i >= text.size()) {
      return InvalidArgument(std::string(flag),
                             fmt::format("'{}' ends inside a field (%[.]WIDTH LETTER)", text));
    }
    field.letter = text[i++];
    if (letters.find(field.letter) == std::string_view::npos) {
      return InvalidArgument(std::string(flag),
                             fmt::format("unknown field '%{}' in '{}'; fields: %{}", field.letter,
                                         text, fmt::join(letters, " %")));
    }
    f.fields.push_back(std::move(field));
    literal = &f.fields.back().suffix;
  }
  if (f.fields.empty()) {
    return InvalidArgument(std::string(flag), fmt::format("'{}' has no field (%i, %j, ...)", text));
  }
  return f;
}

std::string RenderPercent(const PercentFormat& f, const std::vector<std::string>& headers,
                          const std::vector<std::vector<std::string>>& rows, bool header) {
  std::vector<size_t> width(f.fields.size());
  for (size_t c = 0; c < f.fields.size(); ++c) {
    width[c] = static_cast<size_t>(f.fields[c].width);
    if (!f.fields[c].fit) continue;
    width[c] = std::max(width[c], header && c < headers.size() ? Width(headers[c]) : 0);
    for (const auto& row : rows) width[c] = std::max(width[c], c < row.size() ? Width(row[c]) : 0);
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& values) {
    out += f.prefix;
    for (size_t c = 0; c < f.fields.size(); ++c) {
      const std::string& v = c < values.size() ? values[c] : std::string();
      out += width[c] == 0 ? v : Justify(v, width[c], f.fields[c].right);
      out += f.fields[c].suffix;
    }
    out += '\n';
  };
  if (header) line(headers);
  for (const auto& row : rows) line(row);
  return out;
}

Result<std::vector<SacctField>> ParseSacctFields(std::string_view list,
                                                 const std::vector<SacctField>& known,
                                                 std::string_view flag) {
  std::vector<SacctField> out;
  std::vector<std::string> names;
  for (const SacctField& k : known) names.push_back(k.name);
  for (const std::string& item : SplitCommas(list)) {
    const size_t pct = item.find('%');
    const std::string name = item.substr(0, pct);
    auto it = std::find_if(known.begin(), known.end(), [&](const SacctField& k) {
      return k.name.size() == name.size() && EditDistance(k.name, name) == 0;
    });
    if (it == known.end()) {
      return InvalidArgument(std::string(flag),
                             fmt::format("unknown field '{}'{}; fields: {}", name,
                                         DidYouMean(name, names), fmt::join(names, ", ")));
    }
    SacctField field = *it;
    if (pct != std::string::npos) {
      const std::string w = item.substr(pct + 1);
      char* end = nullptr;
      const long n = std::strtol(w.c_str(), &end, 10);
      if (w.empty() || *end != '\0' || n == 0 || n > 999 || n < -999) {
        return InvalidArgument(std::string(flag),
                               fmt::format("'{}': the width after % must be a number from 1 to 999 "
                                           "(negative: left-justified)",
                                           item));
      }
      field.width = static_cast<int>(std::abs(n));
      if (n < 0) field.right = false;
    }
    out.push_back(std::move(field));
  }
  if (out.empty()) return InvalidArgument(std::string(flag), "needs at least one field");
  return out;
}

std::string RenderSacct(const std::vector<SacctField>& fields,
                        const std::vector<std::vector<std::string>>& rows, bool header,
                        SacctStyle style) {
  std::string out;
  auto line = [&](const std::vector<std::string>& values, bool cut_with_plus) {
    for (size_t c = 0; c < fields.size(); ++c) {
      std::string v = c < values.size() ? values[c] : std::string();
      if (style != SacctStyle::kTable) {
        out += v;
        if (style == SacctStyle::kParsable || c + 1 < fields.size()) out += '|';
        continue;
      }
      const size_t w = static_cast<size_t>(fields[c].width);
      if (cut_with_plus && Width(v) > w) v = Cut(v, w - 1) + "+";
      out += Justify(v, w, fields[c].right) + " ";
    }
    out += '\n';
  };
  if (header) {
    std::vector<std::string> names;
    for (const SacctField& f : fields) names.push_back(f.name);
    line(names, false);
    if (style == SacctStyle::kTable) {
      for (const SacctField& f : fields)
        out += std::string(static_cast<size_t>(f.width), '-') + " ";
      out += '\n';
    }
  }
  for (const auto& row : rows) line(row, true);
  return out;
}

}  // namespace arbiter::cli
