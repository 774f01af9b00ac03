// "Did you mean": the nearest of the known words to a mistyped one, for unknown commands, flags
// and filter values.
//
// Distance is the optimal string alignment distance (Levenshtein with adjacent transpositions,
// so "sumbit" is 1 from "submit"), without case. A candidate is close enough when its distance is
// at most max(1, min(3, length / 3)) of the typed word, or when the typed word starts it and no
// other candidate does.
//
// Thread safety: pure functions.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace arbiter::cli {

// The optimal string alignment distance between `a` and `b`, ignoring ASCII case.
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate nearest to `typed` when one is close enough (ties: the first in `candidates`).
std::optional<std::string> Suggest(std::string_view typed,
                                   const std::vector<std::string>& candidates);

// The long flags of `cmd` ("--name"), for DidYouMean.
std::vector<std::string> FlagNames(const CLI::App* cmd);

// "; did you mean \"X\"?" for Suggest's answer, else "".
std::string DidYouMean(std::string_view typed, const std::vector<std::string>& candidates);

// Prints the error of a failed command line and returns its exit code: 0 for --help, else 2
// (docs/cli.md). An unknown command or flag is named with the nearest known one
// (`error: unknown command "sumbit"; did you mean "submit"?`); other errors as CLI11 words them.
int ReportParseError(CLI::App& app, const CLI::ParseError& e);

}  // namespace arbiter::cli
