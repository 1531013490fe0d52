#pragma once
// AgentLoop: the agent's conversation with kilnd (docs/agent-protocol.md).
//
//   lookup ──200──▶ heartbeat every heartbeat_interval_s ──▶ command? run it on
//     ▲                 │ 401                                   the worker thread
//     └─────────────────┘                                    result ──▶ POST /results
//
// The loop thread (run()) does all HTTP; commands run one at a time on a
// worker thread so heartbeats continue (reporting `busy`) during a long
// write_image. Each command id runs once: kilnd repeats a command until its
// result is posted, and the ids already started are remembered. Finished
// results queue until posted: network errors and 5xx retry with backoff, 409
// drops the result (kilnd is not waiting for it), 401 keeps it and goes back
// to lookup. A 401 heartbeat sends the OS-phase agent back to lookup; the
// ramdisk's one-time token is spent by then, so there it retries slowly and
// logs why. The loop never exits on its own; stop() ends it.
//
// Logs one line per event. Never logs the boot token or the session.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "agent/net/http_client.h"
#include "agent/runtime/agent_config.h"
#include "agent/runtime/commands.h"
#include "common/log.h"

namespace kiln::agent {

class AgentLoop {
 public:
  AgentLoop(AgentConfig config, CommandRunner& runner, Logger log, HttpClientOptions http = {});
  // Stops the loop if running and waits for a running command to finish.
  ~AgentLoop();
  AgentLoop(const AgentLoop&) = delete;
  AgentLoop& operator=(const AgentLoop&) = delete;

  // Runs until stop(). Blocking; call it from one thread.
  void run();
  // Asks run() to return at its next wait; safe from any thread (and from a
  // signal-handling thread).
  void stop();

 private:
  enum class Reply { kOk, kUnauthorized, kConflict, kRetry };
  struct Pending {
    std::string id;
    CommandOutcome outcome;
  };

  std::string url(const char* path) const;
  HttpHeaders auth_headers() const;
  Reply lookup();
  Reply heartbeat();
  Reply post_results();
  void start_command(const std::string& id, const std::string& name, const nlohmann::json& args);
  // Takes kilnd's heartbeat_interval_s, clamped to the configured bounds.
  void set_interval(std::optional<double> seconds);
  // Sleeps up to `d`; returns early on stop() or when a command finishes.
  void wait(std::chrono::milliseconds d);
  void backoff(const std::string& why);

  AgentConfig config_;
  CommandRunner& runner_;
  Logger log_;
  HttpClient http_;

  // Loop thread only.
  std::string session_;
  std::string node_id_;
  std::chrono::milliseconds interval_{2000};
  std::chrono::milliseconds backoff_{0};
  std::set<std::string> started_;
  std::thread worker_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool had_session_ = false;  // a lookup succeeded once (os phase: 409 afterwards = handed over)
  bool wake_ = false;
  std::string running_;          // id of the command on the worker, "" when idle
  std::deque<Pending> results_;  // finished, not yet posted
};

}  // namespace kiln::agent
