#pragma once
// What the validation suites build their cases from: a profile from JSON text,
// plan options confined to a TempTree, and one check's entry in a report.
// Each REQUIREs / FAILs in the calling test case.

#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "agent/validate/checks/plan.h"
#include "agent/validate/checks/profile.h"
#include "tests/unit/agent_checks/temp_tree.h"

namespace kiln::test {

inline agent::ValidationProfile profile_from(const std::string& json) {
  auto p = agent::ValidationProfile::from_json(nlohmann::json::parse(json));
  REQUIRE(p);
  return *p;
}

// A node tree with nothing in it and an empty tool directory, so nothing
// from the machine running the test leaks into the report.
inline agent::PlanOptions hermetic(const TempTree& t) {
  t.mkdir("sys/bus/pci/devices");
  t.mkdir("bin");
  t.write("kmsg", "");
  agent::PlanOptions o;
  o.paths.sys = t.path("sys");
  o.paths.proc = t.path("proc");
  o.paths.kmsg = t.path("kmsg");
  o.paths.dmesg_fallback = false;
  o.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  o.agent_dir = t.path("agent");  // no kiln-gpucheck there
  o.search_path = t.path("bin");
  return o;
}

// The check called `name` in a validation report; fails the test case when
// there is none.
inline const nlohmann::json& check(const nlohmann::json& report, const std::string& name) {
  for (const auto& c : report["checks"])
    if (c["name"] == name) return c;
  FAIL("no check " << name << " in " << report.dump());
  static const nlohmann::json none;
  return none;
}

}  // namespace kiln::test
