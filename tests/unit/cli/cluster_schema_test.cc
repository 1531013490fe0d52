// The C++ cluster-spec checker (cli/cluster_spec.cc) and the JSON Schema
// (schemas/cluster.schema.json) state one contract twice, so they can drift
// apart silently. Two holds on them:
//
// - Cases made from the schema itself: every property, required field, enum
//   value, bound and additionalProperties of each object it describes, each
//   turned into a spec that must pass or fail, and a failure that must name
//   that field. A property the schema gains and the checker does not know
//   (or the reverse for required fields, enums and bounds) fails here with no
//   tool beyond the compiler.
// - Those cases and the fixtures in cluster_spec_cases.json run through both
//   the checker and an independent validator (python3-jsonschema), which must
//   give each the same verdict; fixtures marked schema_valid are the
//   cross-field rules (duplicate group names, the allocation name's length)
//   that JSON Schema cannot say, refused by the checker alone.

#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "cli/cluster_spec.h"
#include "tests/support/cli_run.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/skip.h"

using namespace kiln::cli;
using nlohmann::json;

namespace {

struct Case {
  std::string why;
  json spec;
  bool valid = false;         // the checker's verdict
  bool schema_valid = false;  // the schema's (the same but for cross-field rules)
  std::string field;          // for a generated refusal: the field it must name
};

json load(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return json::parse(in);
}

json schema() { return load(KILN_SOURCE_DIR "/schemas/cluster.schema.json"); }

// Every property of the schema present, with a value it allows.
json full_spec() {
  return json::parse(R"({"name": "ci-smoke", "lease_seconds": 3600, "ssh_keys": ["ssh-ed25519 AAAA ci@example"],
    "user_data": "#cloud-config\nruncmd: [[touch, /etc/ci-ready]]\n",
    "groups": [{"name": "workers", "profile": "cpu-lab", "kind": "baremetal", "count": 2, "image": "ubuntu-22.04",
                "traits": ["nvlink"]}]})");
}

void add(std::vector<Case>& out, std::string why, json spec, bool valid, std::string field = "") {
  out.push_back({std::move(why), std::move(spec), valid, valid, std::move(field)});
}

// The cases one object of the schema implies. `at` points at that object in
// full_spec(); `prefix` is how the checker names its fields ("groups[0].").
void cases_for_object(std::vector<Case>& out, const json& object_schema, const std::string& at,
                      const std::string& prefix) {
  const json::json_pointer where(at);
  std::vector<std::string> required = object_schema.value("required", std::vector<std::string>());
  REQUIRE(object_schema.value("additionalProperties", true) == false);
  {
    json d = full_spec();
    d[where]["zz_unknown"] = 1;
    add(out, prefix + "zz_unknown: an unknown field", d, false, prefix + "zz_unknown");
  }
  for (const auto& [key, sub] : object_schema["properties"].items()) {
    const std::string field = prefix + key;
    const json::json_pointer p = where / key;
    REQUIRE(full_spec().contains(p));  // full_spec() must hold every property to test it
    const bool is_required = std::find(required.begin(), required.end(), key) != required.end();
    json d = full_spec();
    d[where].erase(key);
    add(out, field + ": left out", d, !is_required, is_required ? field : "");
    d = full_spec();
    d[p] = json{{"an", "object"}};  // the wrong type for every property of this schema
    add(out, field + ": an object", d, false, field);
    if (sub.contains("enum")) {
      for (const json& v : sub["enum"]) {
        d = full_spec();
        d[p] = v;
        add(out, field + ": " + v.dump(), d, true);
        d[p] = v.get<std::string>() + "x";
        add(out, field + ": " + v.get<std::string>() + "x", d, false, field);
      }
    }
    if (sub.value("type", "") == "integer") {
      for (const char* bound : {"minimum", "maximum"}) {
        if (!sub.contains(bound)) continue;
        const int64_t edge = sub[bound].get<int64_t>();
        const int64_t past = std::string(bound) == "minimum" ? edge - 1 : edge + 1;
        d = full_spec();
        d[p] = edge;
        add(out, field + ": " + std::to_string(edge), d, true);
        d[p] = past;
        add(out, field + ": " + std::to_string(past), d, false, field);
      }
    }
    if (sub.value("type", "") == "string") {
      if (sub.value("minLength", 0) == 1) {
        d = full_spec();
        d[p] = "";
        add(out, field + ": empty", d, false, field);
      }
      if (sub.contains("maxLength")) {
        d = full_spec();
        d[p] = std::string(sub["maxLength"].get<std::size_t>() + 1, 'a');
        add(out, field + ": longer than maxLength", d, false, field);
      }
    }
    if (sub.value("type", "") == "array") {
      if (sub.value("minItems", 0) == 1) {
        d = full_spec();
        d[p] = json::array();
        add(out, field + ": empty list", d, false, field);
      }
      if (sub.contains("items") && sub["items"].value("minLength", 0) == 1) {
        d = full_spec();
        d[p] = json::array({""});
        add(out, field + "[0]: empty", d, false, field + "[0]");
      }
    }
  }
}

std::vector<Case> schema_cases() {
  const json s = schema();
  std::vector<Case> out;
  add(out, "every property set", full_spec(), true);
  cases_for_object(out, s, "", "");
  REQUIRE(s["properties"]["groups"]["items"]["$ref"] == "#/$defs/group");
  cases_for_object(out, s["$defs"]["group"], "/groups/0", "groups[0].");
  return out;
}

std::vector<Case> fixture_cases() {
  std::vector<Case> out;
  for (const json& c : load(KILN_SOURCE_DIR "/tests/unit/cli/cluster_spec_cases.json")) {
    const bool valid = c.at("valid").get<bool>();
    out.push_back({c.at("why"), c.at("spec"), valid, c.value("schema_valid", valid), ""});
  }
  return out;
}

void check_with_checker(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    INFO(c.why << ": " << c.spec.dump());
    kiln::Result<ClusterSpec> r = parse_cluster_spec(c.spec);
    CHECK(r.ok() == c.valid);
    if (r.ok() || c.field.empty()) continue;
    bool named = false;
    for (const kiln::FieldError& f : r.error().fields) named = named || f.field == c.field;
    INFO("the refusal: " << r.error().message);
    CHECK(named);
  }
}

}  // namespace

TEST_CASE("cluster schema: every property, required field, enum and bound of the schema is known to the C++ checker") {
  std::vector<Case> cases = schema_cases();
  // 1 + top level (1 unknown + 4 properties' own cases) + group level: enough
  // that an empty walk of the schema cannot pass for a check.
  REQUIRE(cases.size() > 40);
  check_with_checker(cases);
}

TEST_CASE("cluster schema: the C++ checker gives each fixture spec its expected verdict") {
  std::vector<Case> cases = fixture_cases();
  REQUIRE(cases.size() > 30);
  check_with_checker(cases);
}

TEST_CASE("cluster schema: python3-jsonschema gives every case the verdict the C++ checker gives") {
  if (kiln::test::run_command("python3 -c 'import jsonschema' 2>/dev/null").status != 0)
    KILN_SKIP("python3 with jsonschema is needed to validate against schemas/cluster.schema.json");
  std::vector<Case> cases = schema_cases();
  for (Case& c : fixture_cases()) cases.push_back(std::move(c));
  json docs = json::array();
  for (const Case& c : cases) docs.push_back(c.spec);
  kiln::testing::ScratchDir dir;
  const std::string docs_path = dir.write("docs.json", docs.dump());
  kiln::test::CommandRun run = kiln::test::run_command(
      std::string("python3 '") + KILN_SOURCE_DIR + "/tests/unit/cli/schema_verdicts.py' '" + KILN_SOURCE_DIR +
      "/schemas/cluster.schema.json' '" + docs_path + "'");
  REQUIRE(run.status == 0);
  std::vector<std::string> verdicts;
  std::size_t start = 0;
  for (std::size_t nl; (nl = run.out.find('\n', start)) != std::string::npos; start = nl + 1)
    verdicts.push_back(run.out.substr(start, nl - start));
  REQUIRE(verdicts.size() == cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    INFO(cases[i].why << ": " << cases[i].spec.dump());
    CHECK((verdicts[i] == "valid") == cases[i].schema_valid);
    CHECK(parse_cluster_spec(cases[i].spec).ok() == cases[i].valid);
  }
}
