#include <catch2/catch.hpp>

#include "cli/sse.h"

using kiln::cli::SseEvent;
using kiln::cli::SseParser;

TEST_CASE("sse parser: events split anywhere with comments and CRLF and multi-line data") {
  const std::string stream =
      ": keepalive\n\n"
      "id: 7\nevent: node.transition\ndata: {\"seq\":7}\n\n"
      "id: 8\r\nevent: x\r\ndata: a\r\ndata: b\r\n\r\n"
      "data:no-space\n\n";
  // Fed one byte at a time and all at once, the events are the same.
  for (std::size_t piece : {std::size_t{1}, std::size_t{3}, stream.size()}) {
    SseParser p;
    std::vector<SseEvent> out;
    for (std::size_t i = 0; i < stream.size(); i += piece) p.feed(std::string_view(stream).substr(i, piece), out);
    REQUIRE(out.size() == 3);
    CHECK(out[0].id == "7");
    CHECK(out[0].type == "node.transition");
    CHECK(out[0].data == "{\"seq\":7}");
    CHECK(out[1].id == "8");
    CHECK(out[1].data == "a\nb");
    CHECK(out[2].type == "message");
    CHECK(out[2].data == "no-space");
  }
}

TEST_CASE("sse parser: an unfinished event is held until its blank line") {
  SseParser p;
  std::vector<SseEvent> out;
  p.feed("id: 1\ndata: x\n", out);
  CHECK(out.empty());
  p.feed("\n", out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].data == "x");
}
