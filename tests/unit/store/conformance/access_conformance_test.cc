// AccessStore conformance: API tokens on SQLite and PostgreSQL (backends.h).
#include <catch2/catch.hpp>

#include "backends.h"
#include "common/ids.h"

using namespace kiln;
using namespace kiln::test;

TEMPLATE_TEST_CASE("conformance: tokens: create, find by hash, list, delete, role check", "[store][conformance]",
                   KILN_STORE_BACKENDS) {
  TestType b;
  AccessStore& s = b.access();
  CHECK_FALSE(*s.has_token_with_role("admin"));

  TokenRecord admin{"", "bootstrap", "admin", "", std::string(64, 'a'), 0, 0};
  auto a = s.create_token(admin);
  REQUIRE(a);
  CHECK(is_uuid(a->id));
  CHECK(a->created_at == b.clock.now_ms());
  CHECK(*s.has_token_with_role("admin"));

  TokenRecord dup{"", "again", "operator", "", std::string(64, 'a'), 0, 0};
  auto d = s.create_token(dup);
  REQUIRE_FALSE(d);
  CHECK(d.error().code == Code::kConflict);
  CHECK(d.error().message.find(std::string(64, 'a')) == std::string::npos);  // never echo a hash

  b.clock.advance_ms(1);
  TokenRecord tenant{"", "acme-ci", "tenant", "acme", std::string(64, 'b'), 0, b.clock.now_ms() + 1000};
  REQUIRE(s.create_token(tenant));
  CHECK(*s.has_token_with_role("tenant"));
  b.clock.advance_ms(2000);
  CHECK_FALSE(*s.has_token_with_role("tenant"));  // expired ones do not count

  auto found = s.find_token_by_hash(std::string(64, 'b'));
  REQUIRE(found);
  CHECK(found->name == "acme-ci");
  CHECK(found->tenant == "acme");
  CHECK(found->expires_at > 0);
  CHECK(s.find_token_by_hash(std::string(64, 'c')).error().code == Code::kNotFound);

  auto list = s.list_tokens();
  REQUIRE(list);
  REQUIRE(list->size() == 2);
  CHECK(list->at(0).name == "bootstrap");

  REQUIRE(s.delete_token(a->id));
  CHECK_FALSE(*s.has_token_with_role("admin"));
  CHECK(s.delete_token(a->id).error().code == Code::kNotFound);
  CHECK(s.list_tokens()->size() == 1);
}

TEMPLATE_TEST_CASE("conformance: key check: the first value stored is the one every later caller reads",
                   "[store][conformance]", KILN_STORE_BACKENDS) {
  TestType b;
  AccessStore& s = b.access();
  auto first = s.key_check("sealed-by-the-first-key");
  REQUIRE(first);
  CHECK(*first == "sealed-by-the-first-key");
  auto second = s.key_check("sealed-by-another-key");
  REQUIRE(second);
  CHECK(*second == "sealed-by-the-first-key");
}
