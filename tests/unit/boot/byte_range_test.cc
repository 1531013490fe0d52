#include <catch2/catch.hpp>

#include "common/http/byte_range.h"

using namespace kiln::http;
using K = RangeRequest::Kind;

TEST_CASE("Range: single ranges in every form") {
  RangeRequest r = parse_range("bytes=0-99", 1000);
  REQUIRE(r.kind == K::kPartial);
  CHECK(r.range.first == 0);
  CHECK(r.range.last == 99);
  CHECK(r.range.length() == 100);

  r = parse_range("bytes=500-", 1000);
  REQUIRE(r.kind == K::kPartial);
  CHECK(r.range.first == 500);
  CHECK(r.range.last == 999);

  r = parse_range("bytes=-10", 1000);
  REQUIRE(r.kind == K::kPartial);
  CHECK(r.range.first == 990);
  CHECK(r.range.last == 999);

  r = parse_range("bytes=-5000", 1000);  // larger than the body: all of it
  REQUIRE(r.kind == K::kPartial);
  CHECK(r.range.first == 0);
  CHECK(r.range.last == 999);

  r = parse_range("bytes=900-5000", 1000);  // end clamped
  REQUIRE(r.kind == K::kPartial);
  CHECK(r.range.last == 999);

  r = parse_range("  Bytes=1-1 ", 1000);
  REQUIRE(r.kind == K::kPartial);
  CHECK(r.range.length() == 1);
  CHECK(content_range(r.range, 1000) == "bytes 1-1/1000");
}

TEST_CASE("Range: unsatisfiable ranges") {
  CHECK(parse_range("bytes=1000-", 1000).kind == K::kUnsatisfiable);
  CHECK(parse_range("bytes=5000-6000", 1000).kind == K::kUnsatisfiable);
  CHECK(parse_range("bytes=-0", 1000).kind == K::kUnsatisfiable);
  CHECK(parse_range("bytes=0-", 0).kind == K::kUnsatisfiable);
  CHECK(unsatisfied_range(1000) == "bytes */1000");
}

TEST_CASE("Range: ignored headers mean the whole body") {
  for (const char* h : {"", "items=0-1", "bytes=", "bytes=abc-", "bytes=5-2", "bytes=0-1,5-9", "bytes=1",
                        "bytes=--1", "bytes=99999999999999999999999-"}) {
    INFO(h);
    CHECK(parse_range(h, 1000).kind == K::kWhole);
  }
}
