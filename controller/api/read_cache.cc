#include "controller/api/read_cache.h"

namespace kiln::api {
namespace {

bool same_members(const RingView* a, const RingView* b) {
  if (a == b) return true;
  if (a == nullptr || b == nullptr) return false;
  return a->ring().members() == b->ring().members();
}

void append_field(std::string& out, std::string_view v) {
  // Length-prefixed, so no value can be made to look like the next one.
  out.append(std::to_string(v.size())).push_back(':');
  out.append(v);
}

}  // namespace

std::string ReadCache::key(const http::Request& req, const http::RequestInfo& info, const Principal& who) {
  std::string k;
  k.reserve(128 + req.target().size());
  append_field(k, req.method_string());
  append_field(k, req.target());
  append_field(k, to_string(who.role));
  append_field(k, who.tenant);
  auto host = req.find(bhttp::field::host);
  append_field(k, host == req.end() ? std::string_view() : std::string_view(host->value()));
  k.push_back(info.tls ? 's' : 'p');
  return k;
}

std::optional<ReadCache::Kept> ReadCache::find(const std::string& key, const WriteGeneration& generation,
                                               const RingView* ring) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    ++misses_;
    return std::nullopt;
  }
  if (it->second.generation != generation || !same_members(it->second.ring.get(), ring)) {
    erase_locked(it);
    ++misses_;
    return std::nullopt;
  }
  ++hits_;
  return it->second.kept;
}

void ReadCache::put(std::string key, WriteGeneration generation, std::shared_ptr<const RingView> ring,
                    http::Response response) {
  const std::size_t size = response.body().size() + key.size();
  if (size > kMaxBytes / 4) return;  // one answer may not push out everything else
  auto body = std::make_shared<const std::string>(std::move(response.body()));
  response.body().clear();
  Kept stored{std::make_shared<const http::Response>(std::move(response)), std::move(body)};
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = entries_.find(key); it != entries_.end()) {
    if (it->second.generation.order > generation.order) return;  // a later read got there first
    erase_locked(it);
  }
  if (entries_.size() + 1 > kMaxEntries || bytes_ + size > kMaxBytes) {
    entries_.clear();
    bytes_ = 0;
  }
  bytes_ += size;
  entries_.emplace(std::move(key), Entry{std::move(generation), std::move(ring), std::move(stored)});
}

void ReadCache::erase_locked(std::unordered_map<std::string, Entry>::iterator it) {
  bytes_ -= it->second.kept.body->size() + it->first.size();
  entries_.erase(it);
}

ReadCache::Counts ReadCache::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Counts{hits_, misses_, entries_.size(), bytes_};
}

}  // namespace kiln::api
