#pragma once
// What an SSE stream route writes, captured in process: a StreamWriter that
// keeps the text (and can pretend the peer went away), and a parser of the
// complete frames. Used by the events tests and the isolation matrix.

#include <cstdint>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/unit/api/api_harness.h"

namespace kiln::test {

// Collects what a stream writes; can pretend the peer went away.
class CollectingWriter : public http::StreamWriter {
 public:
  asio::awaitable<bool> write(std::string_view data) override {
    std::lock_guard<std::mutex> lock(mu_);
    text_.append(data);
    co_return !gone_;
  }
  std::string text() const {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }
  void go_away() {
    std::lock_guard<std::mutex> lock(mu_);
    gone_ = true;
  }

 private:
  mutable std::mutex mu_;
  std::string text_;
  bool gone_ = false;
};

struct SseEvent {
  int64_t id = 0;
  std::string type;
  nlohmann::json data;
};

// Parses complete frames; counts keep-alive comments.
inline std::vector<SseEvent> parse_sse(const std::string& text, int* keepalives = nullptr) {
  std::vector<SseEvent> out;
  std::size_t pos = 0;
  while (true) {
    std::size_t end = text.find("\n\n", pos);
    if (end == std::string::npos) break;
    std::string frame = text.substr(pos, end - pos);
    pos = end + 2;
    if (frame.rfind(":", 0) == 0) {
      if (keepalives) ++*keepalives;
      continue;
    }
    SseEvent e;
    std::istringstream lines(frame);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind("id: ", 0) == 0) e.id = std::stoll(line.substr(4));
      else if (line.rfind("event: ", 0) == 0) e.type = line.substr(7);
      else if (line.rfind("data: ", 0) == 0) e.data = nlohmann::json::parse(line.substr(6));
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace kiln::test
