// Placement arithmetic (pure): what fits, what is short, NUMA locality.
#include <catch2/catch.hpp>

#include "controller/hosts/placement.h"

using namespace kiln;

namespace {

Host two_cell_host() {
  Host h;
  h.id = "h1";
  h.name = "hv1";
  h.status = "ready";
  h.capacity.cpus = 8;
  h.capacity.memory_mib = 8192;
  NumaCell c0{0, 4096, {0, 1, 2, 3}, 1024};
  NumaCell c1{1, 4096, {4, 5, 6, 7}, 0};
  h.capacity.cells = {c0, c1};
  HostGpu g0;
  g0.address = "0000:3b:00.0";
  g0.numa_node = 1;
  h.capacity.gpus = {g0};
  return h;
}

std::vector<HostReservation> book(std::vector<HostReservation> rows, const PlacementPlan& p) {
  rows.insert(rows.end(), p.rows.begin(), p.rows.end());
  return rows;
}

}  // namespace

TEST_CASE("placement: unpinned guests fill vCPUs and memory, then 409 names what is short") {
  Host h = two_cell_host();
  Flavour f;
  f.vcpus = 4;
  f.memory_mib = 3072;
  std::vector<HostReservation> rows;
  auto a = plan_placement(h, rows, f, "n1");
  REQUIRE(a);
  rows = book(rows, *a);
  auto b = plan_placement(h, rows, f, "n2");
  REQUIRE(b);
  rows = book(rows, *b);
  auto c = plan_placement(h, rows, f, "n3");
  REQUIRE_FALSE(c);
  CHECK(c.error().code == Code::kConflict);
  CHECK(c.error().message == "host hv1: needs 3072 MiB memory, 2048 free; needs 4 vcpus, 0 free");
  nlohmann::json free = free_capacity(h, rows);
  CHECK(free["vcpus"] == 0);
  CHECK(free["memory_mib"] == 2048);
}

TEST_CASE("placement: numa_pin takes CPUs of one cell with the GPU's locality") {
  Host h = two_cell_host();
  Flavour f;
  f.vcpus = 2;
  f.memory_mib = 1024;
  f.gpus = 1;
  f.numa_pin = true;
  auto p = plan_placement(h, {}, f, "n1");
  REQUIRE(p);
  CHECK(p->placement.numa_cell == 1);  // the GPU is in cell 1
  CHECK(p->placement.cpus == std::vector<int>{4, 5});
  CHECK(p->placement.gpus == std::vector<std::string>{"0000:3b:00.0"});
  // The GPU is booked: a second GPU guest does not fit, and says why.
  auto q = plan_placement(h, p->rows, f, "n2");
  REQUIRE_FALSE(q);
  CHECK(q.error().message.find("needs 1 gpu, 0 free") != std::string::npos);
}

TEST_CASE("placement: hugepages and unreachable hosts") {
  Host h = two_cell_host();
  Flavour f;
  f.vcpus = 1;
  f.memory_mib = 4096;
  f.hugepages = true;
  auto p = plan_placement(h, {}, f, "n1");
  REQUIRE_FALSE(p);
  CHECK(p.error().message.find("needs 2048 2 MiB hugepages, 1024 free") != std::string::npos);
  h.status = "unreachable";
  h.status_reason = "Cannot recv data: Connection reset by peer";
  Flavour small;
  auto u = plan_placement(h, {}, small, "n1");
  REQUIRE_FALSE(u);
  CHECK(u.error().message == "host hv1: is unreachable (Cannot recv data: Connection reset by peer)");
}

TEST_CASE("placement: a profile without a virtual block is refused naming /profile") {
  nlohmann::json doc = {{"name", "bm"}};
  auto f = flavour_of_profile(doc, "bm");
  REQUIRE_FALSE(f);
  CHECK(f.error().fields.at(0).field == "/profile");
  doc["virtual"] = {{"vcpus", 2}, {"memory_mib", 2048}, {"gpus", 0}, {"disk_gib", 10}, {"hugepages", false},
                    {"numa_pin", false}};
  auto g = flavour_of_profile(doc, "cpu");
  REQUIRE(g);
  CHECK(g->vcpus == 2);
}
