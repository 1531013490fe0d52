#pragma once
// ReadCache: the answers of GET routes declared Caching::kUntilWrite
// (route_table.h), kept until the store's next write, so a poller or a
// dashboard asking for the same page again is answered from memory, with no
// store call and no render (bench/read_path.py measures it against nginx).
//
// Each answer is tagged with the store's write generation (NodeStore::
// write_generation, database_generation; controller/store/store.h) read
// before its handler read the store, and served only while the generation
// is still that one: it is then at least as new as the last write whose
// call has returned, whichever process made it. The request reads the
// generation once, before its token lookup (auth.h) and its route, and both
// use that one value. On SQLite it is a counter in memory (no pool hop, no
// allocation); on PostgreSQL it is the database's snapshot, one round trip
// in place of the handler's reads, asked only for the routes kept here, and
// any commit of any instance (heartbeats included) ends what is kept. Where
// the store has neither, or reading the snapshot failed, nothing is kept.
//
// The key is everything else the answer depends on: the method and target
// (path and query as sent), the caller's role and tenant (so one tenant's
// answer can never reach another, nor a tenant a staff view), the Host
// header and TLS (the absolute `next` link of a list), and the conductors
// on the ring (node views name their owner) — compared as the ring's
// members, since the ring view object is rebuilt at every heartbeat.
//
// Bounded: at most kMaxEntries answers and kMaxBytes of bodies; an insert
// that would pass either empties the cache first (the next requests rebuild
// what is asked for; a client walking unique URLs only costs itself hits).
//
// Thread-safe: one mutex, held for map operations only; a hit hands out
// shared_ptrs to the stored header and body, which the server sends from in
// place (http::Reply::shared_body).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/http/server.h"
#include "controller/api/auth.h"
#include "controller/conductor/membership.h"
#include "controller/store/store.h"

namespace kiln::api {

class ReadCache {
 public:
  static constexpr std::size_t kMaxEntries = 4096;
  static constexpr std::size_t kMaxBytes = std::size_t{64} << 20;

  // The key of `req` as `who` asks it.
  static std::string key(const http::Request& req, const http::RequestInfo& info, const Principal& who);

  // A kept answer: its status and headers (Content-Length included, the body
  // left out), and its body, shared by every request it answers.
  struct Kept {
    std::shared_ptr<const http::Response> head;
    std::shared_ptr<const std::string> body;
  };

  // The answer stored under `key` at `generation` (the same value: order and
  // snapshot) with the same ring members as `ring` (null: no membership), or
  // nullopt. A stale entry is dropped.
  std::optional<Kept> find(const std::string& key, const WriteGeneration& generation, const RingView* ring);

  // Stores `response` (a complete 200, its payload prepared) under `key`,
  // read at `generation` with `ring`; an entry read at a later generation
  // (a higher order) is kept instead.
  void put(std::string key, WriteGeneration generation, std::shared_ptr<const RingView> ring,
           http::Response response);

  struct Counts {
    uint64_t hits = 0;
    uint64_t misses = 0;
    std::size_t entries = 0;
    std::size_t bytes = 0;
  };
  Counts counts() const;

 private:
  struct Entry {
    WriteGeneration generation;
    std::shared_ptr<const RingView> ring;
    Kept kept;
  };
  void erase_locked(std::unordered_map<std::string, Entry>::iterator it);

  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  std::size_t bytes_ = 0;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

}  // namespace kiln::api
