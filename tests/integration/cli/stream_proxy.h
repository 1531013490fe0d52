#pragma once
// StreamProxy: a TCP proxy in front of kilnd that can cut the event streams
// passing through it, the way a load balancer or a flaky network does, and
// remembers the first bytes of every request so a test can see what a
// client sent when it reconnected (Last-Event-ID). Test code only; its own
// threads, stopped by the destructor.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kiln::testing {

class StreamProxy {
 public:
  explicit StreamProxy(uint16_t upstream_port);
  ~StreamProxy();

  uint16_t port() const { return port_; }
  // Closes every connection whose request was GET /v1/events/stream.
  // Returns how many it closed.
  int drop_streams();
  // The opening bytes (request line and headers) of each event-stream request so far.
  std::vector<std::string> stream_requests() const;
  // How many SSE events ("id:" fields) have reached clients over event streams
  // so far: a test cuts a stream only once it has carried one, so that the
  // client has an id to resume from.
  int stream_events() const;

 private:
  struct Link {
    int client = -1;
    int upstream = -1;
    std::string head;
    bool stream = false;
    std::string tail;  // the last bytes sent to the client, for an "id:" split across reads
  };
  void accept_loop();
  void pump(Link* link);

  uint16_t upstream_;
  uint16_t port_ = 0;
  int listener_ = -1;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::vector<Link*> links_;
  int stream_events_ = 0;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

}  // namespace kiln::testing
