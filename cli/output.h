#pragma once
// Printing what the API answered: -o table|json|yaml|value, -c COLUMN
// (repeatable), --long.
//
// JSON is the API's own JSON, unchanged and pretty-printed (scripts rely on
// it). YAML is the same document in YAML. A table shows the resource's
// default columns (its wide set with --long, or exactly the -c ones), times
// as "3m ago", and on a terminal shrinks the widest columns to fit its width;
// `value` prints the same columns' raw values tab-separated, no header, one
// line per item (for shell loops). Writes to the given stream; any thread.

#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::cli {

enum class Format { kTable, kJson, kYaml, kValue };

struct Column {
  std::string name;     // what -c takes and the header shows (upper-cased)
  std::string pointer;  // JSON pointer into the item ("/bmc/driver")
  bool time = false;    // RFC 3339: "3m ago" in tables
};

struct OutputOptions {
  Format format = Format::kTable;
  std::vector<std::string> columns;  // -c; empty: the defaults
  bool long_view = false;            // --long
  int width = 0;                     // terminal columns; 0: not a terminal, no fitting
};

// Errors: kInvalidArgument naming -o for an unknown format.
Result<Format> parse_format(const std::string& text);

// Prints a list of items (`items` is a JSON array). `defaults` and `wide`
// are the table's columns without and with --long. A -c name that is no
// column is looked up as a top-level field of the items.
void print_items(std::ostream& out, const nlohmann::json& items, const std::vector<Column>& defaults,
                 const std::vector<Column>& wide, const OutputOptions& options);

// Prints one resource: JSON/YAML as is; a table is FIELD/VALUE rows of its
// top-level fields (or the -c ones); value prints the -c fields' values.
void print_one(std::ostream& out, const nlohmann::json& item, const OutputOptions& options);

// JSON as YAML text (block style; strings quoted only where YAML needs it).
std::string to_yaml(const nlohmann::json& value);

// A cell's text: strings bare, null empty, arrays of scalars comma-joined,
// anything else compact JSON.
std::string cell_text(const nlohmann::json& value);

}  // namespace kiln::cli
