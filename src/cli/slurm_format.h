// The output formats of squeue, sinfo and sacct, so that scripts which parse them keep working.
//
// squeue and sinfo (-o/--format): "%.18i %.9P %8j %R". Each %-field is [.|#][width]letter:
// left-justified in `width` columns, right-justified after a '.', as wide as its longest value
// after a '#'; a value longer than its width is cut to it; no width: the value as it is. Text
// between fields is printed as it is ("%i|%t" for a parsable line); "%%" is a '%'.
//
// sacct (-o/--format): "JobID,JobName%30,State". Fields by name (any case), each with its own
// width and justification (Slurm's), "%N" to change the width (a negative N left-justifies).
// Table: each value justified in its width and followed by a space, a value too long cut and
// ended with '+'; a header line and a line of dashes. -p/--parsable: every value followed by '|';
// -P/--parsable2: values separated by '|'. Parsable output is never cut nor padded.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace arbiter::cli {

struct PercentField {
  char letter = 0;
  int width = 0;       // 0: the value's own width
  bool right = false;  // '.': right-justified
  bool fit = false;    // '#': the width of the column's longest value (and its header)
  std::string suffix;  // the text after the field, up to the next one
};

struct PercentFormat {
  std::string prefix;  // the text before the first field
  std::vector<PercentField> fields;
};

// Parses a %-format whose letters must be among `letters`; errors name `flag` and the letter.
Result<PercentFormat> ParsePercentFormat(std::string_view text, std::string_view letters,
                                         std::string_view flag);

// The lines of a %-format table: the header (when `header`), then one line per row; a row holds
// a value per field, `headers` a title per field.
std::string RenderPercent(const PercentFormat& f, const std::vector<std::string>& headers,
                          const std::vector<std::vector<std::string>>& rows, bool header);

// A sacct field: its name as Slurm writes it, width and justification.
struct SacctField {
  std::string name;
  int width = 10;
  bool right = true;
};

// Parses "JobID,JobName%30": names matched without case against `known` (which gives each its
// default width and justification). Unknown names are an InvalidArgument naming `flag`, with the
// nearest known name.
Result<std::vector<SacctField>> ParseSacctFields(std::string_view list,
                                                 const std::vector<SacctField>& known,
                                                 std::string_view flag);

enum class SacctStyle { kTable, kParsable, kParsable2 };

std::string RenderSacct(const std::vector<SacctField>& fields,
                        const std::vector<std::vector<std::string>>& rows, bool header,
                        SacctStyle style);

}  // namespace arbiter::cli
