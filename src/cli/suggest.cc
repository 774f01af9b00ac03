#include "cli/suggest.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace arbiter::cli {

namespace {

char Lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// The command path as typed: "arbiter jobs".
std::string CommandPath(const CLI::App* app) {
  std::string path;
  for (const CLI::App* a = app; a != nullptr; a = a->get_parent()) {
    path = a->get_parent() == nullptr ? fmt::format("arbiter{}", path)
                                      : fmt::format(" {}{}", a->get_name(), path);
  }
  return path;
}

// The deepest subcommand the command line chose.
CLI::App* ChosenCommand(CLI::App& app) {
  CLI::App* cur = &app;
  while (true) {
    const std::vector<CLI::App*> subs = cur->get_subcommands();
    if (subs.empty()) return cur;
    cur = subs.front();
  }
}

std::vector<std::string> CommandNames(const CLI::App* cmd) {
  std::vector<std::string> names;
  for (const CLI::App* s : cmd->get_subcommands([](const CLI::App*) { return true; })) {
    if (s->get_name().empty()) continue;  // option groups
    names.push_back(s->get_name());
    for (const std::string& a : s->get_aliases()) names.push_back(a);
  }
  return names;
}

}  // namespace

std::vector<std::string> FlagNames(const CLI::App* cmd) {
  std::vector<std::string> names;
  for (const CLI::Option* o : cmd->get_options()) {
    if (!o->nonpositional()) continue;
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
  }
  return names;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  // d[i][j]: the distance between a's first i characters and b's first j; three rows suffice.
  std::vector<size_t> prev2(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = Lower(a[i - 1]) == Lower(b[j - 1]) ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && Lower(a[i - 1]) == Lower(b[j - 2]) &&
          Lower(a[i - 2]) == Lower(b[j - 1])) {
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);  // adjacent transposition
      }
    }
    prev2.swap(prev);
    prev.swap(cur);
  }
  return prev[b.size()];
}

std::optional<std::string> Suggest(std::string_view typed,
                                   const std::vector<std::string>& candidates) {
  // Flags are compared without their dashes, so that "-queue" finds "--queue".
  auto bare = [](std::string_view s) {
    while (!s.empty() && s.front() == '-') s.remove_prefix(1);
    return s;
  };
  const std::string_view word = bare(typed);
  if (word.empty()) return std::nullopt;
  const size_t limit = std::max<size_t>(1, std::min<size_t>(3, word.size() / 3));
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (const std::string& c : candidates) {
    const size_t d = EditDistance(word, bare(c));
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  if (best) return best;
  std::optional<std::string> prefixed;  // the one candidate the word starts, if only one
  for (const std::string& c : candidates) {
    const std::string_view b = bare(c);
    if (word.size() < 2 || b.size() < word.size()) continue;
    if (EditDistance(word, b.substr(0, word.size())) != 0) continue;
    if (prefixed && *prefixed != c) return std::nullopt;
    prefixed = c;
  }
  return prefixed;
}

std::string DidYouMean(std::string_view typed, const std::vector<std::string>& candidates) {
  const auto s = Suggest(typed, candidates);
  return s ? fmt::format("; did you mean \"{}\"?", *s) : "";
}

int ReportParseError(CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == 0) return app.exit(e);  // --help
  const CLI::App* cmd = ChosenCommand(app);
  const std::vector<std::string> names = CommandNames(cmd);
  // The hint: the nearest known word, else where the known ones are listed.
  auto hint = [&](const std::string& word, const std::vector<std::string>& known) {
    const std::string near = DidYouMean(word, known);
    return near.empty() ? fmt::format("; see {} --help", CommandPath(cmd)) : near;
  };
  for (std::string word : cmd->remaining(false)) {
    if (word.size() > 2 && word[0] == '-') {
      word = word.substr(0, word.find('='));
      std::fprintf(stderr, "error: unknown flag \"%s\" for \"%s\"%s\n", word.c_str(),
                   CommandPath(cmd).c_str(), hint(word, FlagNames(cmd)).c_str());
      return 2;
    }
    if (word[0] != '-' && !names.empty() &&
        std::find(names.begin(), names.end(), word) == names.end()) {
      const std::string where =
          cmd->get_parent() == nullptr ? "" : fmt::format(" for \"{}\"", CommandPath(cmd));
      std::fprintf(stderr, "error: unknown command \"%s\"%s%s\n", word.c_str(), where.c_str(),
                   hint(word, names).c_str());
      return 2;
    }
  }
  app.exit(e);
  return 2;
}

}  // namespace arbiter::cli
