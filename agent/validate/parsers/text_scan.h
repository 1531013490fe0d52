#pragma once
// Tokenising shared by the tool-output parsers.
//
// Captured tool output arrives with terminal noise: ANSI escape sequences
// (nvidia-smi underlines headers, cyclictest moves the cursor), CRLF line ends,
// tabs mixed with runs of spaces, and Open MPI output tags ("[1,3]<stdout>:").
// These helpers normalise that once so each parser reads plain lines. All of
// them are pure functions over their arguments; none allocate more than the
// returned value and none throw.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::agent::scan {

// Removes ANSI/VT100 escape sequences (CSI "ESC [ ... final", OSC "ESC ] ... BEL",
// two-byte "ESC x") and carriage returns. A truncated sequence at the end is dropped.
std::string strip_ansi(std::string_view text);

// strip_ansi(), then split on '\n'. A trailing newline does not add an empty line.
std::vector<std::string> lines(std::string_view text);

// Removes an Open MPI `--tag-output` prefix ("[1,12]<stdout>:" / "<stderr>:").
// Returns the rest of the line; `rank` (when not null) receives the rank or -1.
std::string_view strip_mpi_tag(std::string_view line, int* rank = nullptr);

std::string_view trim(std::string_view s);
std::string_view ltrim(std::string_view s);
std::string_view rtrim(std::string_view s);

// Splits on runs of spaces and tabs; no empty tokens.
std::vector<std::string_view> split_ws(std::string_view s);
// Splits on every `sep`; keeps empty fields (so "a\t\tb" has three).
std::vector<std::string_view> split_on(std::string_view s, char sep);
// Splits on tabs and on runs of two or more spaces (column layouts that pad
// with spaces but use single spaces inside labels such as "BW peak[Gb/sec]").
std::vector<std::string_view> split_columns(std::string_view s);

// Replaces every run of whitespace with one space and trims.
std::string collapse_ws(std::string_view s);

bool starts_with(std::string_view s, std::string_view prefix);
bool ends_with(std::string_view s, std::string_view suffix);
bool contains(std::string_view s, std::string_view needle);
// ASCII case-insensitive substring test.
bool icontains(std::string_view s, std::string_view needle);
std::string to_lower(std::string_view s);

// Whole-token numeric parses: the token (after trim) must be a number and
// nothing else. Leading zeros are allowed ("000123"); a leading '+' is not.
std::optional<std::int64_t> to_int(std::string_view s);
std::optional<double> to_double(std::string_view s);
// The first number at the start of `s` ("72.02 W" -> 72.02, "16x" -> 16).
std::optional<double> leading_double(std::string_view s);

// Text after the first occurrence of `marker` (empty optional when absent).
std::optional<std::string_view> after(std::string_view s, std::string_view marker);

}  // namespace kiln::agent::scan
