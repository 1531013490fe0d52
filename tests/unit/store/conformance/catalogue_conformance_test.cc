// CatalogueStore conformance: images and hardware profiles, with default
// seeding and the races two kilnd sharing a database can run, on SQLite and
// PostgreSQL (backends.h). The profile cases began as SQLite-only checks in
// tests/unit/validation/store_test.cc.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "backends.h"
#include "common/ids.h"

using namespace kiln;
using namespace kiln::test;
using nlohmann::json;

namespace {

Image image(const std::string& name) {
  Image i;
  i.name = name;
  i.kind = "os";
  i.format = "raw";
  i.sha256 = std::string(64, 'e');
  i.size = 4096;
  i.source = "https://images.example/" + name + ".raw";
  i.state = "downloading";
  return i;
}

Profile profile(const std::string& name, json doc = json::object()) {
  Profile p;
  p.name = name;
  p.doc = std::move(doc);
  return p;
}

}  // namespace

TEMPLATE_TEST_CASE("conformance: images: create, read by id or name, list oldest first, refusals",
                   "[store][conformance][catalogue]", KILN_STORE_BACKENDS) {
  TestType b;
  CatalogueStore& s = b.catalogue();
  Image in = image("ubuntu");
  in.kernel_args = "console=ttyS0";
  in.ssh_user = "ubuntu";
  in.os_agent = false;  // a cloud image: the deploy waits for its phone-home
  auto created = s.create_image(in);
  REQUIRE(created);
  CHECK(is_uuid(created->id));
  CHECK(created->created_at == b.clock.now_ms());
  CHECK(created->updated_at == b.clock.now_ms());

  auto by_name = s.get_image("ubuntu");
  REQUIRE(by_name);
  CHECK(by_name->id == created->id);
  CHECK(by_name->kind == "os");
  CHECK(by_name->format == "raw");
  CHECK(by_name->sha256 == in.sha256);
  CHECK(by_name->size == 4096);
  CHECK(by_name->source == in.source);
  CHECK(by_name->state == "downloading");
  CHECK(by_name->kernel_args == "console=ttyS0");
  CHECK(by_name->ssh_user == "ubuntu");
  CHECK_FALSE(by_name->os_agent);
  CHECK(s.get_image(created->id)->os_agent == false);
  CHECK_FALSE(by_name->is_public);
  CHECK(by_name->created_at == created->created_at);
  auto by_id = s.get_image(upper(created->id));  // a UUID matches in any case
  REQUIRE(by_id);
  CHECK(by_id->name == "ubuntu");
  CHECK(s.get_image("debian").error().code == Code::kNotFound);
  CHECK(s.get_image("00000000-0000-4000-8000-000000000000").error().code == Code::kNotFound);

  // Refused, naming the field, and nothing written.
  auto dup = s.create_image(image("ubuntu"));
  REQUIRE_FALSE(dup);
  CHECK(dup.error().code == Code::kConflict);
  CHECK(dup.error().fields.at(0).field == "/name");
  Image same_id = image("other");
  same_id.id = created->id;
  auto dup_id = s.create_image(same_id);
  REQUIRE_FALSE(dup_id);
  CHECK(dup_id.error().code == Code::kConflict);
  CHECK(dup_id.error().fields.at(0).field == "/id");
  Image bad_id = image("bad");
  bad_id.id = "not-a-uuid";
  CHECK(s.create_image(bad_id).error().fields.at(0).field == "/id");
  auto unnamed = s.create_image(image(""));
  REQUIRE_FALSE(unnamed);
  CHECK(unnamed.error().code == Code::kInvalidArgument);
  CHECK(unnamed.error().fields.at(0).field == "/name");
  auto uuid_name = s.create_image(image("00000000-0000-4000-8000-00000000000a"));
  REQUIRE_FALSE(uuid_name);
  CHECK(uuid_name.error().code == Code::kInvalidArgument);
  CHECK(uuid_name.error().fields.at(0).field == "/name");

  // Oldest first; created_at given by the caller is kept; a tie goes by id.
  b.clock.advance_ms(10);
  Image older = image("older");
  older.created_at = 1000;
  REQUIRE(s.create_image(older));
  Image twin_a = image("twin-a");
  twin_a.id = "ffffffff-0000-4000-8000-000000000000";
  Image twin_b = image("twin-b");
  twin_b.id = "11111111-0000-4000-8000-000000000000";
  REQUIRE(s.create_image(twin_a));
  REQUIRE(s.create_image(twin_b));
  auto all = s.list_images();
  REQUIRE(all);
  std::vector<std::string> names;
  for (const Image& i : *all) names.push_back(i.name);
  CHECK(names == std::vector<std::string>{"older", "ubuntu", "twin-b", "twin-a"});
}

TEMPLATE_TEST_CASE("conformance: images: download outcome and listing are separate writes, delete",
                   "[store][conformance][catalogue]", KILN_STORE_BACKENDS) {
  TestType b;
  CatalogueStore& s = b.catalogue();
  auto img = s.create_image(image("rocky"));
  REQUIRE(img);

  b.clock.advance_ms(5);
  auto listed = s.set_image_public("rocky", true);
  REQUIRE(listed);
  CHECK(listed->is_public);
  CHECK(listed->updated_at == b.clock.now_ms());
  CHECK(listed->state == "downloading");

  // The download finishing does not undo the listing.
  b.clock.advance_ms(5);
  Image done = *img;
  done.state = "ready";
  done.path = "/var/lib/kiln/images/rocky.raw";
  done.last_error = "";
  done.is_public = false;  // not written by update_image
  done.name = "renamed";   // neither is this
  auto updated = s.update_image(done);
  REQUIRE(updated);
  CHECK(updated->state == "ready");
  CHECK(updated->path == "/var/lib/kiln/images/rocky.raw");
  CHECK(updated->is_public);
  CHECK(updated->name == "rocky");
  CHECK(updated->updated_at == b.clock.now_ms());
  CHECK(updated->created_at == img->created_at);
  auto again = s.get_image(img->id);
  REQUIRE(again);
  CHECK(again->state == "ready");
  CHECK(again->is_public);

  // Unlisting by id, in any case.
  auto unlisted = s.set_image_public(upper(img->id), false);
  REQUIRE(unlisted);
  CHECK_FALSE(unlisted->is_public);
  CHECK_FALSE(s.get_image("rocky")->is_public);

  Image ghost = image("ghost");
  ghost.id = "00000000-0000-4000-8000-000000000000";
  CHECK(s.update_image(ghost).error().code == Code::kNotFound);
  CHECK(s.set_image_public("ghost", true).error().code == Code::kNotFound);

  REQUIRE(s.create_image(image("alma")));
  CHECK(s.delete_image("alma"));
  CHECK(s.delete_image(upper(img->id)));
  CHECK(s.delete_image("alma").error().code == Code::kNotFound);
  CHECK(s.delete_image(img->id).error().code == Code::kNotFound);
  CHECK(s.list_images()->empty());
}

TEMPLATE_TEST_CASE("conformance: images: a qcow2's conversion outcome is stored and read back",
                   "[store][conformance][catalogue]", KILN_STORE_BACKENDS) {
  TestType b;
  CatalogueStore& s = b.catalogue();
  Image in = image("jammy");
  in.format = "qcow2";
  in.state = "converting";
  in.virtual_size = 123;  // what registration's inspection saw
  auto img = s.create_image(in);
  REQUIRE(img);
  CHECK(s.get_image("jammy")->virtual_size == 123);
  CHECK(s.get_image("jammy")->served_path.empty());

  Image done = *img;
  done.state = "ready";
  done.virtual_size = int64_t{3} << 32;  // past 32 bits: both dialects keep 64
  done.served_sha256 = std::string(64, 'a');
  done.served_size = int64_t{5} << 31;
  done.served_path = "/var/lib/kiln/images/qcow2-" + std::string(64, 'e') + ".raw.zst";
  auto updated = s.update_image(done);
  REQUIRE(updated);
  for (const Image& got : {*updated, *s.get_image(img->id), s.list_images()->at(0)}) {
    CHECK(got.state == "ready");
    CHECK(got.virtual_size == (int64_t{3} << 32));
    CHECK(got.served_sha256 == std::string(64, 'a'));
    CHECK(got.served_size == (int64_t{5} << 31));
    CHECK(got.served_path == done.served_path);
    CHECK(got.sha256 == std::string(64, 'e'));  // the source's, untouched
  }
  Image failed = *updated;
  failed.state = "failed";
  failed.last_error = "no space left on device";
  auto f = s.update_image(failed);
  REQUIRE(f);
  CHECK(f->state == "failed");
  CHECK(f->last_error == "no space left on device");
}

TEMPLATE_TEST_CASE("conformance: profiles: create, read, replace with a version check, delete unless used",
                   "[store][conformance][catalogue]", KILN_STORE_BACKENDS) {
  TestType b;
  CatalogueStore& s = b.catalogue();
  auto created = s.create_profile(profile("p1", {{"description", "one"}, {"name", "wrong"}}));
  REQUIRE(created);
  CHECK(created->version == 1);
  CHECK(created->doc["name"] == "p1");
  CHECK(created->created_at == b.clock.now_ms());
  CHECK(created->updated_at == b.clock.now_ms());
  auto dup = s.create_profile(profile("p1"));
  REQUIRE_FALSE(dup);
  CHECK(dup.error().code == Code::kConflict);
  CHECK(dup.error().fields.at(0).field == "/name");
  auto unnamed = s.create_profile(profile(""));
  REQUIRE_FALSE(unnamed);
  CHECK(unnamed.error().code == Code::kInvalidArgument);
  CHECK(unnamed.error().fields.at(0).field == "/name");

  auto got = s.get_profile("p1");
  REQUIRE(got);
  CHECK(got->doc["description"] == "one");
  CHECK(got->doc["name"] == "p1");
  CHECK(got->version == 1);
  CHECK(s.get_profile("nope").error().code == Code::kNotFound);

  b.clock.advance_ms(7);
  Profile next = profile("p1", {{"description", "two"}});
  auto stale = s.replace_profile(next, 7);
  REQUIRE_FALSE(stale);
  CHECK(stale.error().code == Code::kPreconditionFailed);
  CHECK_THAT(stale.error().message, Catch::Contains("version 1"));
  auto replaced = s.replace_profile(next, 1);
  REQUIRE(replaced);
  CHECK(replaced->version == 2);
  CHECK(replaced->doc["description"] == "two");
  CHECK(replaced->doc["name"] == "p1");
  CHECK(replaced->created_at == created->created_at);
  CHECK(replaced->updated_at == b.clock.now_ms());
  auto reread = s.get_profile("p1");
  REQUIRE(reread);
  CHECK(reread->version == 2);
  CHECK(reread->doc == replaced->doc);
  // Without If-Match the replace is unconditional; a document that is not an
  // object is stored as an empty one with its name.
  auto blind = s.replace_profile(profile("p1", json::array({1, 2})), std::nullopt);
  REQUIRE(blind);
  CHECK(blind->version == 3);
  CHECK(blind->doc == json{{"name", "p1"}});
  CHECK(s.get_profile("p1")->doc == json{{"name", "p1"}});
  CHECK(s.replace_profile(profile("ghost"), std::nullopt).error().code == Code::kNotFound);
  CHECK(s.replace_profile(profile("ghost"), 1).error().code == Code::kNotFound);

  // By name in byte order.
  REQUIRE(s.create_profile(profile("p0")));
  REQUIRE(s.create_profile(profile("P9")));
  auto all = s.list_profiles();
  REQUIRE(all);
  std::vector<std::string> names;
  for (const Profile& p : *all) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"P9", "p0", "p1"});

  Node n = make_node("n1");
  n.profile = "p1";
  REQUIRE(b.nodes().create_node(n, event("node.created")));
  Status used = s.delete_profile("p1");
  REQUIRE_FALSE(used);
  CHECK(used.error().code == Code::kConflict);
  CHECK_THAT(used.error().message, Catch::Contains("used by 1 node"));
  REQUIRE(s.get_profile("p1"));
  // Nodes may name a profile that has no row: still refused, as used.
  Node orphan = make_node("n2");
  orphan.profile = "gone";
  REQUIRE(b.nodes().create_node(orphan, event("node.created")));
  CHECK(s.delete_profile("gone").error().code == Code::kConflict);
  CHECK(s.delete_profile("p0"));
  CHECK(s.delete_profile("p0").error().code == Code::kNotFound);
  CHECK(s.get_profile("p0").error().code == Code::kNotFound);
}

TEMPLATE_TEST_CASE("conformance: seeding defaults: created once, edits kept, deletions respected",
                   "[store][conformance][catalogue]", KILN_STORE_BACKENDS) {
  TestType b;
  CatalogueStore& s = b.catalogue();
  std::vector<Profile> defaults = {profile("cpu-lab", {{"description", "lab"}}),
                                   profile("h100-sxm-8x", {{"description", "shipped"}}),
                                   profile("h100-vm-1x")};
  // An operator made one of the same name before it shipped: kept as it is.
  REQUIRE(s.create_profile(profile("h100-vm-1x", {{"description", "mine"}})));

  auto first = s.seed_profiles(defaults);
  REQUIRE(first);
  CHECK(*first == std::vector<std::string>{"cpu-lab", "h100-sxm-8x"});
  CHECK(s.get_profile("cpu-lab")->doc == json{{"name", "cpu-lab"}, {"description", "lab"}});
  CHECK(s.get_profile("cpu-lab")->version == 1);
  CHECK(s.get_profile("h100-vm-1x")->doc["description"] == "mine");

  // An operator edits one and deletes another.
  REQUIRE(s.replace_profile(profile("h100-sxm-8x", {{"description", "ours"}}), std::nullopt));
  REQUIRE(s.delete_profile("cpu-lab"));
  REQUIRE(s.delete_profile("h100-vm-1x"));
  auto again = s.seed_profiles(defaults);
  REQUIRE(again);
  CHECK(again->empty());
  CHECK(s.get_profile("h100-sxm-8x")->doc["description"] == "ours");
  CHECK(s.get_profile("cpu-lab").error().code == Code::kNotFound);
  CHECK(s.get_profile("h100-vm-1x").error().code == Code::kNotFound);  // it was marked seeded too

  // A new default shipped later is created.
  std::vector<Profile> more = defaults;
  more.push_back(profile("b200-8x"));
  auto later = s.seed_profiles(more);
  REQUIRE(later);
  CHECK(*later == std::vector<std::string>{"b200-8x"});
  CHECK(s.seed_profiles(more)->empty());
}

TEMPLATE_TEST_CASE("conformance: racing seeders on two store handles create each default once",
                   "[store][conformance][catalogue][concurrency]", KILN_STORE_BACKENDS) {
  TestType b;
  auto second = b.open_another();
  CatalogueStore* handles[2] = {&b.catalogue(), second.get()};
  std::vector<Profile> defaults;
  for (int i = 0; i < 12; ++i) defaults.push_back(profile("default-" + std::to_string(i)));
  constexpr int kSeeders = 6;
  std::mutex mu;
  std::vector<std::string> created, errors;
  std::vector<std::thread> seeders;
  for (int t = 0; t < kSeeders; ++t) {
    seeders.emplace_back([&, t] {
      auto r = handles[t % 2]->seed_profiles(defaults);
      std::lock_guard<std::mutex> l(mu);
      if (!r) {
        errors.push_back(r.error().message);
        return;
      }
      created.insert(created.end(), r->begin(), r->end());
    });
  }
  for (auto& t : seeders) t.join();
  INFO("first error: " << (errors.empty() ? "" : errors.front()));
  CHECK(errors.empty());
  std::sort(created.begin(), created.end());
  std::vector<std::string> want;
  for (const Profile& p : defaults) want.push_back(p.name);
  std::sort(want.begin(), want.end());
  CHECK(created == want);  // every default reported created once, by one seeder
  auto all = b.catalogue().list_profiles();
  REQUIRE(all);
  CHECK(all->size() == defaults.size());
}

TEMPLATE_TEST_CASE("conformance: two handles replacing a profile at one version: one wins",
                   "[store][conformance][catalogue][concurrency]", KILN_STORE_BACKENDS) {
  TestType b;
  auto second = b.open_another();
  CatalogueStore* handles[2] = {&b.catalogue(), second.get()};
  constexpr int kProfiles = 10, kRacers = 6;
  for (int i = 0; i < kProfiles; ++i) REQUIRE(b.catalogue().create_profile(profile("p" + std::to_string(i))));
  std::vector<std::vector<int>> winners(kProfiles);
  std::mutex mu;
  std::atomic<int> other_errors{0};
  std::vector<std::thread> racers;
  for (int r = 0; r < kRacers; ++r) {
    racers.emplace_back([&, r] {
      for (int i = 0; i < kProfiles; ++i) {
        auto got = handles[r % 2]->replace_profile(profile("p" + std::to_string(i), {{"by", r}}), 1);
        if (got) {
          std::lock_guard<std::mutex> l(mu);
          winners[i].push_back(r);
        } else if (got.error().code != Code::kPreconditionFailed) {
          ++other_errors;
        }
      }
    });
  }
  for (auto& t : racers) t.join();
  CHECK(other_errors == 0);
  for (int i = 0; i < kProfiles; ++i) {
    INFO("profile " << i);
    REQUIRE(winners[i].size() == 1);
    auto p = b.catalogue().get_profile("p" + std::to_string(i));
    REQUIRE(p);
    CHECK(p->version == 2);
    CHECK(p->doc["by"] == winners[i][0]);
  }
}
