// Pattern: nlohmann::json built with initializer lists in a coroutine body and
// inside a `co_await` argument. GCC 12 mishandled the initializer-list
// temporaries (docs/coroutines.md, history).

#include "tests/unit/coroutines/harness.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace kiln::coro_test {
namespace {

asio::awaitable<std::string> dump(nlohmann::json j) {
  co_await hop();
  co_return j.dump();
}

asio::awaitable<std::string> build_json(int i) {
  std::string serial = long_text("serial" + std::to_string(i));
  nlohmann::json inventory = {
      {"source", "fake"},
      {"system", {{"manufacturer", "Kiln"}, {"serial", serial}}},
      {"cpus", {{"count", 2}, {"cores", 64}}},
      {"nics", {{{"mac", long_text("aa")}, {"speed_mbps", 100000}}}},
  };
  co_await hop();
  std::string a = co_await dump(inventory);
  std::string b = co_await dump({{"node", serial}, {"ok", true}, {"steps", {"a", "b", long_text("c")}}});
  co_return a + "\n" + b;
}

TEST_CASE("JSON initializer lists in a coroutine body and in co_await", "[coroutines]") {
  auto got = run_all<std::string>(32, [](int i) { return build_json(i); });
  for (int i = 0; i < 32; ++i) {
    std::string serial = long_text("serial" + std::to_string(i));
    nlohmann::json inventory;
    inventory["source"] = "fake";
    inventory["system"]["manufacturer"] = "Kiln";
    inventory["system"]["serial"] = serial;
    inventory["cpus"]["count"] = 2;
    inventory["cpus"]["cores"] = 64;
    nlohmann::json nic;
    nic["mac"] = long_text("aa");
    nic["speed_mbps"] = 100000;
    inventory["nics"] = nlohmann::json::array();
    inventory["nics"].push_back(nic);
    nlohmann::json second;
    second["node"] = serial;
    second["ok"] = true;
    second["steps"] = nlohmann::json::array();
    second["steps"].push_back("a");
    second["steps"].push_back("b");
    second["steps"].push_back(long_text("c"));
    CHECK(got[i] == inventory.dump() + "\n" + second.dump());
  }
}

}  // namespace
}  // namespace kiln::coro_test
