#include "agent/validate/parsers/dcgm.h"

#include <string>
#include <vector>

#include "agent/validate/parsers/health.h"
#include "agent/validate/parsers/text_scan.h"

namespace kiln::agent {

using nlohmann::json;
namespace sc = scan;

namespace {

struct Row {
  std::string left;
  std::string right;  // the result cell without its leading space, padding kept
  bool bordered = true;
};

struct Message {
  std::string kind;
  std::vector<std::string> chunks;
};

struct Test {
  std::string category;
  std::string name;
  std::vector<std::string> result_chunks;
  std::vector<std::pair<std::string, std::string>> entities;
  std::vector<Message> messages;
};

// "Pass", "FAIL", "Not Run" at the start of a result text; empty if none.
std::string status_word(std::string_view t) {
  t = sc::trim(t);
  const std::string low = sc::to_lower(t.substr(0, 8));
  if (sc::starts_with(low, "not run")) return "Not Run";
  for (const char* w : {"pass", "fail", "skip", "warn"}) {
    if (sc::starts_with(low, w)) {
      const std::size_t n = std::string_view(w).size();
      if (t.size() == n || !std::isalpha(static_cast<unsigned char>(t[n]))) {
        std::string s(w);
        s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
        return s;
      }
    }
  }
  return {};
}

int severity(const std::string& s) {
  if (s == "Fail") return 4;
  if (s == "Warn") return 3;
  if (s == "Pass") return 2;
  if (s == "Skip") return 1;
  return 0;
}

// "GPU0: Pass" / "CPU1: Fail" (DCGM 4 per-entity rows).
bool entity_result(std::string_view t, std::string& entity, std::string& status) {
  t = sc::trim(t);
  const std::size_t colon = t.find(':');
  if (colon == std::string_view::npos || colon > 16) return false;
  const std::string_view ent = t.substr(0, colon);
  std::size_t d = 0;
  while (d < ent.size() && std::isalpha(static_cast<unsigned char>(ent[d]))) ++d;
  if (d == 0 || d == ent.size() || !sc::to_int(ent.substr(d))) return false;
  status = status_word(t.substr(colon + 1));
  if (status.empty()) return false;
  entity = std::string(ent);
  return true;
}

// "Pass - GPUs: 1, 2, 3" / "Fail - GPU: 0" / "Fail - GPU 3: text" / "Pass - All".
void result_entities(std::string_view text, Test& t, bool& all) {
  const std::string status = status_word(text);
  const std::size_t dash = text.find(" - ");
  if (status.empty() || dash == std::string_view::npos) return;
  std::string_view rest = sc::trim(text.substr(dash + 3));
  if (sc::starts_with(rest, "All")) {
    all = true;
    return;
  }
  for (std::string_view p : {"GPUs:", "GPU:", "GPUs", "GPU"}) {
    if (sc::starts_with(rest, p)) {
      rest = rest.substr(p.size());
      break;
    }
  }
  for (auto tok : sc::split_ws(rest)) {
    bool stop = false;
    while (!tok.empty() && (tok.back() == ',' || tok.back() == ':')) {
      stop = stop || tok.back() == ':';
      tok.remove_suffix(1);
    }
    auto id = sc::to_int(tok);
    if (!id) break;
    t.entities.emplace_back("GPU" + std::to_string(*id), status);
    if (stop) break;
  }
}

bool is_message_kind(std::string_view left, std::string& kind) {
  const std::string low = sc::to_lower(left);
  for (const char* k : {"warning", "error", "info", "note"}) {
    if (low == k) {
      kind = std::string(left);
      kind[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(kind[0])));
      for (std::size_t i = 1; i < kind.size(); ++i)
        kind[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(kind[i])));
      return true;
    }
  }
  return false;
}

// Joins wrapped chunks: a chunk that filled the column continues straight
// into the next one; whitespace runs collapse.
std::string join_chunks(const std::vector<std::string>& chunks, std::size_t width) {
  std::string s;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    std::string c = chunks[i];
    if (i + 1 < chunks.size() && width > 0) {
      if (c.size() > width) c.resize(width);
      if (sc::rtrim(c).size() < width && !c.empty()) c = std::string(sc::rtrim(c)) + " ";
    }
    s += c;
  }
  return sc::collapse_ws(s);
}

}  // namespace

Result<json> parse_dcgm(std::string_view text) {
  bool completed = false, table = false, dcgm_mention = false;
  std::vector<std::string> errors;
  std::vector<std::string> categories;
  std::string category;
  std::vector<Test> tests;
  struct CatMessage {
    std::string category;
    Message msg;
  };
  std::vector<CatMessage> cat_messages;
  json metadata = json::object();
  std::string last_meta_key;
  Message* open_msg = nullptr;  // points into tests or cat_messages; reset on every push
  Test* cur = nullptr;
  std::vector<Row> rows;
  std::size_t width = 0;

  // Pass 1: split table rows into cells and find the wrap width.
  struct Item {
    bool is_row;
    Row row;
    std::string section;
  };
  std::vector<Item> items;
  for (const std::string& raw : sc::lines(text)) {
    const std::string_view l = sc::ltrim(raw);
    const std::string_view t = sc::trim(raw);
    if (t.empty()) continue;
    if (sc::icontains(t, "dcgm") || sc::icontains(t, "diagnostic")) dcgm_mention = true;
    if (l[0] == '+' || sc::starts_with(l, "|-") || sc::starts_with(l, "|=")) {
      table = true;
      // Section name: the text between the dashes of the first cell.
      std::size_t sep = l.find('+', 1);
      std::string_view first = l.substr(1, sep == std::string_view::npos ? l.size() - 1 : sep - 1);
      std::string name;
      for (char c : first)
        if (c != '-' && c != '=' && c != '+' && c != '|') name.push_back(c);
      name = sc::collapse_ws(name);
      items.push_back({false, {}, name});
      continue;
    }
    if (l[0] == '|') {
      table = true;
      const std::size_t sep = l.find('|', 1);
      Row r;
      if (sep == std::string_view::npos) {
        r.left = std::string(sc::trim(l.substr(1)));
        r.bordered = false;
      } else {
        r.left = std::string(sc::trim(l.substr(1, sep - 1)));
        std::string_view right = l.substr(sep + 1);
        const std::string_view rt = sc::rtrim(right);
        if (!rt.empty() && rt.back() == '|') {
          right = rt.substr(0, rt.size() - 1);
        } else {
          r.bordered = false;
        }
        if (!right.empty() && right[0] == ' ') right.remove_prefix(1);
        r.right = std::string(right);
        if (r.bordered) width = std::max(width, sc::rtrim(right).size());
      }
      items.push_back({true, std::move(r), {}});
      continue;
    }
    if (sc::starts_with(t, "Successfully ran diagnostic")) {
      completed = true;
    } else if (sc::starts_with(sc::to_lower(t), "error")) {
      errors.emplace_back(t);
    }
  }

  // Pass 2: build tests and messages.
  for (auto& it : items) {
    if (!it.is_row) {
      if (!it.section.empty()) {
        category = it.section;
        categories.push_back(category);
        cur = nullptr;
        open_msg = nullptr;
      }
      continue;
    }
    Row& r = it.row;
    const std::string_view rtext = sc::trim(r.right);
    const bool meta = sc::icontains(category, "metadata");
    if (!r.left.empty()) {
      std::string kind;
      if (r.left == "Diagnostic" && sc::to_lower(rtext) == "result") continue;  // header row
      if (meta) {
        metadata[r.left] = std::string(rtext);
        last_meta_key = r.left;
        continue;
      }
      if (is_message_kind(r.left, kind)) {
        if (cur) {
          cur->messages.push_back({kind, {r.right}});
          open_msg = &cur->messages.back();
        } else {
          cat_messages.push_back({category, {kind, {r.right}}});
          open_msg = &cat_messages.back().msg;
          // cat_messages may reallocate: only the last element is ever open.
        }
        continue;
      }
      tests.push_back({category, r.left, {r.right}, {}, {}});
      cur = &tests.back();
      open_msg = nullptr;
      continue;
    }
    // Continuation row.
    std::string ent, st;
    if (entity_result(rtext, ent, st) && cur) {
      cur->entities.emplace_back(ent, st);
      open_msg = nullptr;
    } else if (open_msg) {
      open_msg->chunks.push_back(r.right);
    } else if (meta && !last_meta_key.empty()) {
      metadata[last_meta_key] = metadata[last_meta_key].get<std::string>() + " " + std::string(rtext);
    } else if (cur) {
      cur->result_chunks.push_back(r.right);
    }
  }
  (void)rows;

  if (!table && !completed && !(dcgm_mention && !errors.empty()))
    return Error(Code::kInvalidArgument,
                 "not dcgmi diag output: no diagnostic table, status line or DCGM error line found");

  json out;
  out["format"] = "dcgm";
  out["completed"] = completed;
  out["metadata"] = metadata;
  out["dcgm_version"] = metadata.contains("DCGM Version") ? metadata["DCGM Version"] : json(nullptr);
  out["driver_version"] =
      metadata.contains("Driver Version Detected") ? metadata["Driver Version Detected"] : json(nullptr);
  json ids = json::array();
  if (metadata.contains("GPU Device IDs Detected")) {
    const std::string list = metadata["GPU Device IDs Detected"].get<std::string>();
    for (auto id : sc::split_on(list, ','))
      if (!sc::trim(id).empty()) ids.push_back(std::string(sc::trim(id)));
  }
  out["gpu_device_ids"] = ids;
  out["categories"] = categories;

  Health h;
  json jtests = json::array();
  int worst = 0;
  int level = 0;
  for (auto& t : tests) {
    // Later result lines ("Fail - GPU: 0" under "Pass - GPUs: 1, 2") name more GPUs.
    bool all = false;
    std::string summary;
    for (const auto& chunk : t.result_chunks) {
      const std::string s = status_word(chunk);
      if (!s.empty() && severity(s) > severity(summary)) summary = s;
      result_entities(sc::trim(chunk), t, all);
    }
    std::string result = summary;
    for (const auto& [e, s] : t.entities)
      if (severity(s) > severity(result)) result = s;
    json msgs = json::array();
    for (const auto& m : t.messages) {
      msgs.push_back({{"kind", m.kind}, {"text", join_chunks(m.chunks, width)}});
      if (m.kind == "Error" && severity(result) < 4) result = "Fail";
    }
    json ents = json::array();
    for (const auto& [e, s] : t.entities) ents.push_back({{"entity", e}, {"result", s}});
    std::string result_text;
    for (const auto& c : t.result_chunks) result_text += (result_text.empty() ? "" : "; ") + sc::collapse_ws(c);
    worst = std::max(worst, severity(result));
    if (result == "Fail") {
      std::string reason = t.category + "/" + t.name + ": " + result_text;
      for (const auto& m : msgs) reason += " | " + m["kind"].get<std::string>() + ": " + m["text"].get<std::string>();
      h.fail(reason);
    } else if (result == "Warn") {
      h.warn(t.category + "/" + t.name + ": " + result_text);
    }
    std::string key = sc::to_lower(t.name);
    for (char& c : key)
      if (c == ' ') c = '_';
    if (key == "memtest" || key == "pulse_test" || key == "eud" || key == "cpu_eud") level = std::max(level, 4);
    else if (key == "diagnostic" || key == "targeted_stress" || key == "targeted_power" || key == "sm_stress" ||
             key == "memory_bandwidth")
      level = std::max(level, 3);
    else if (key == "pcie" || key == "gpu_memory" || key == "memory" || key == "nvlink")
      level = std::max(level, 2);
    else if (result != "Not Run")
      level = std::max(level, 1);
    jtests.push_back({{"category", t.category}, {"name", t.name}, {"result", result.empty() ? json(nullptr) : json(result)},
                      {"result_text", result_text}, {"all_gpus", all}, {"entities", ents}, {"messages", msgs}});
  }
  json jcat = json::array();
  for (const auto& cm : cat_messages) {
    const std::string text = join_chunks(cm.msg.chunks, width);
    jcat.push_back({{"category", cm.category}, {"kind", cm.msg.kind}, {"text", text}});
    if (cm.msg.kind == "Error") {
      h.fail(cm.category + ": Error: " + text);
      worst = std::max(worst, 4);
    } else if (cm.msg.kind == "Warning") {
      h.warn(cm.category + ": Warning: " + text);
    }
  }
  for (const auto& e : errors) {
    h.fail(e);
    worst = std::max(worst, 4);
  }
  if (tests.empty() && jcat.empty() && errors.empty()) h.fail("the diagnostic table holds no test results");
  out["run_level"] = level == 0 ? json(nullptr) : json(level);
  out["tests"] = jtests;
  out["category_messages"] = jcat;
  out["errors"] = errors;
  std::string overall = "fail";
  if (!h.failed()) {
    if (worst == 3) overall = "warn";
    else if (worst == 2) overall = "pass";
    else if (worst == 1) overall = "skip";
  }
  out["overall"] = overall;
  out["health"] = h.to_json();
  return out;
}

}  // namespace kiln::agent
