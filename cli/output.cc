#include "cli/output.h"

#include <algorithm>
#include <ostream>

#include <yaml-cpp/yaml.h>

#include "cli/duration.h"
#include "common/clock.h"

namespace kiln::cli {

namespace {

std::string upper(std::string s) {
  for (char& c : s) c = c == '_' ? ' ' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::vector<Column> chosen_columns(const std::vector<Column>& defaults, const std::vector<Column>& wide,
                                   const OutputOptions& o) {
  if (o.columns.empty()) return o.long_view && !wide.empty() ? wide : defaults;
  std::vector<Column> out;
  for (const std::string& name : o.columns) {
    auto match = [&](const Column& c) { return c.name == name; };
    if (auto it = std::find_if(wide.begin(), wide.end(), match); it != wide.end()) out.push_back(*it);
    else if (auto d = std::find_if(defaults.begin(), defaults.end(), match); d != defaults.end()) out.push_back(*d);
    else out.push_back({name, "/" + name, name.size() > 3 && name.compare(name.size() - 3, 3, "_at") == 0});
  }
  return out;
}

nlohmann::json at(const nlohmann::json& item, const std::string& pointer) {
  try {
    nlohmann::json::json_pointer p(pointer);
    return item.contains(p) ? item.at(p) : nlohmann::json();
  } catch (const nlohmann::json::exception&) {
    return nlohmann::json();
  }
}

// Cuts `s` to `width` characters (bytes; the API's names are ASCII), marking the cut.
std::string fit(const std::string& s, std::size_t width) {
  if (s.size() <= width) return s;
  if (width <= 1) return s.substr(0, width);
  return s.substr(0, width - 1) + "~";
}

void print_table(std::ostream& out, const std::vector<std::string>& headers,
                 const std::vector<std::vector<std::string>>& rows, int term_width) {
  std::vector<std::size_t> w(headers.size());
  for (std::size_t c = 0; c < headers.size(); ++c) w[c] = headers[c].size();
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size(); ++c) w[c] = std::max(w[c], r[c].size());
  if (term_width > 0) {
    // Shrink the widest column, one character at a time, until the row fits
    // (two spaces between columns); a column never goes below its header or 6.
    auto total = [&] {
      std::size_t t = 0;
      for (std::size_t x : w) t += x + 2;
      return t;
    };
    auto floor = [&](std::size_t c) { return std::max<std::size_t>(6, headers[c].size()); };
    while (total() > static_cast<std::size_t>(term_width)) {
      std::size_t widest = w.size();  // the widest column that may still shrink
      for (std::size_t c = 0; c < w.size(); ++c)
        if (w[c] > floor(c) && (widest == w.size() || w[c] > w[widest])) widest = c;
      if (widest == w.size()) break;  // every column at its floor: let the terminal wrap
      --w[widest];
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      std::string cell = fit(cells[c], w[c]);
      s += cell;
      if (c + 1 < cells.size()) s += std::string(w[c] - cell.size() + 2, ' ');
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    out << s << "\n";
  };
  line(headers);
  for (const auto& r : rows) line(r);
}

void emit(YAML::Emitter& e, const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object:
      e << YAML::BeginMap;
      for (auto it = j.begin(); it != j.end(); ++it) {
        e << YAML::Key << it.key() << YAML::Value;
        emit(e, it.value());
      }
      e << YAML::EndMap;
      return;
    case nlohmann::json::value_t::array:
      e << YAML::BeginSeq;
      for (const auto& v : j) emit(e, v);
      e << YAML::EndSeq;
      return;
    case nlohmann::json::value_t::null:
      e << YAML::Null;
      return;
    case nlohmann::json::value_t::string: {
      // Quote strings that YAML would read as something else (true, 12, ~).
      const std::string s = j.get<std::string>();
      YAML::Node probe;
      bool plain_ok = !s.empty();
      if (plain_ok) {
        try {
          probe = YAML::Load(s);
          plain_ok = probe.IsScalar() && probe.Scalar() == s && probe.Tag() == "?";
          if (plain_ok) {
            nlohmann::json reread = nlohmann::json::parse(s, nullptr, false);
            plain_ok = reread.is_discarded() || reread.is_string();
            if (s == "~" || s == "null" || s == "Null" || s == "NULL" || s == "yes" || s == "no" || s == "on" ||
                s == "off" || s == "True" || s == "False")
              plain_ok = false;
          }
        } catch (const YAML::Exception&) {
          plain_ok = false;
        }
      }
      if (!plain_ok) e << YAML::DoubleQuoted;
      e << s;
      return;
    }
    default:
      e << j.dump();
      return;
  }
}

// Times come as RFC 3339 text from most routes and as integer milliseconds
// since the epoch from a few (images, tenants); tables show both as "3m ago".
std::string time_cell(const nlohmann::json& v, int64_t now) {
  if (v.is_string()) return relative_time(v.get<std::string>(), now);
  if (v.is_number_integer() && v.get<int64_t>() > 1'000'000'000'000) return relative_time(format_rfc3339(v.get<int64_t>()), now);
  return cell_text(v);
}

}  // namespace

Result<Format> parse_format(const std::string& text) {
  if (text == "table") return Format::kTable;
  if (text == "json") return Format::kJson;
  if (text == "yaml") return Format::kYaml;
  if (text == "value") return Format::kValue;
  return Error::invalid("-o", "must be one of table, json, yaml, value (got " + text + ")");
}

std::string to_yaml(const nlohmann::json& value) {
  YAML::Emitter e;
  emit(e, value);
  std::string s = e.c_str();
  if (s.empty() || s.back() != '\n') s += "\n";
  return s;
}

std::string cell_text(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::string s;
    for (const auto& x : v) {
      if (!x.is_primitive()) return v.dump();
      if (!s.empty()) s += ",";
      s += x.is_string() ? x.get<std::string>() : x.dump();
    }
    return s;
  }
  return v.dump();
}

void print_items(std::ostream& out, const nlohmann::json& items, const std::vector<Column>& defaults,
                 const std::vector<Column>& wide, const OutputOptions& o) {
  if (o.format == Format::kJson) {
    out << items.dump(2) << "\n";
    return;
  }
  if (o.format == Format::kYaml) {
    out << to_yaml(items);
    return;
  }
  const std::vector<Column> cols = chosen_columns(defaults, wide, o);
  const int64_t now = SystemClock().now_ms();
  std::vector<std::vector<std::string>> rows;
  for (const auto& item : items) {
    std::vector<std::string> r;
    for (const Column& c : cols) {
      nlohmann::json v = at(item, c.pointer);
      std::string text = cell_text(v);
      if (o.format == Format::kTable && c.time) text = time_cell(v, now);
      r.push_back(std::move(text));
    }
    rows.push_back(std::move(r));
  }
  if (o.format == Format::kValue) {
    for (const auto& r : rows) {
      std::string s;
      for (std::size_t i = 0; i < r.size(); ++i) s += (i ? "\t" : "") + r[i];
      out << s << "\n";
    }
    return;
  }
  std::vector<std::string> headers;
  for (const Column& c : cols) headers.push_back(upper(c.name));
  print_table(out, headers, rows, o.width);
}

void print_one(std::ostream& out, const nlohmann::json& item, const OutputOptions& o) {
  if (o.format == Format::kJson) {
    out << item.dump(2) << "\n";
    return;
  }
  if (o.format == Format::kYaml) {
    out << to_yaml(item);
    return;
  }
  std::vector<std::string> fields = o.columns;
  if (fields.empty())
    for (auto it = item.begin(); it != item.end(); ++it) fields.push_back(it.key());
  if (o.format == Format::kValue) {
    for (const std::string& f : fields) out << cell_text(item.contains(f) ? item[f] : nlohmann::json()) << "\n";
    return;
  }
  const int64_t now = SystemClock().now_ms();
  std::vector<std::vector<std::string>> rows;
  for (const std::string& f : fields) {
    nlohmann::json v = item.contains(f) ? item[f] : nlohmann::json();
    std::string text = cell_text(v);
    if (f.size() > 3 && f.compare(f.size() - 3, 3, "_at") == 0) text = time_cell(v, now);
    rows.push_back({f, text});
  }
  print_table(out, {"FIELD", "VALUE"}, rows, o.width);
}

}  // namespace kiln::cli
