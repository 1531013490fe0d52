#include "agent/deploy/wipe.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "agent/inventory/block_devices.h"

namespace kiln::agent {

namespace {

using Extent = std::pair<std::uint64_t, std::uint64_t>;

std::uint64_t le(const char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(p[i]);
  return v;
}

// The regions to zero and verify: disk edges plus every old partition's edges,
// clamped to the device and merged.
std::vector<Extent> wipe_regions(std::uint64_t size, std::uint64_t edge, const std::vector<Extent>& partitions) {
  std::vector<Extent> r;
  auto add_edges = [&](std::uint64_t start, std::uint64_t end) {
    if (end > size) end = size;
    if (start >= end) return;
    const std::uint64_t e = std::min(edge, end - start);
    r.emplace_back(start, start + e);
    r.emplace_back(end - e, end);
  };
  add_edges(0, size);
  for (const auto& [s, e] : partitions) add_edges(s, e);
  std::sort(r.begin(), r.end());
  std::vector<Extent> merged;
  for (const auto& x : r) {
    if (!merged.empty() && x.first <= merged.back().second) merged.back().second = std::max(merged.back().second, x.second);
    else merged.push_back(x);
  }
  return merged;
}

Status verify_zero(BlockDevice& dev, std::uint64_t start, std::uint64_t end) {
  static constexpr std::size_t kChunk = 1024 * 1024;
  AlignedBuffer buf(kChunk);
  for (std::uint64_t off = start; off < end;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, end - off));
    if (auto s = dev.read_at(off, buf.data(), n); !s) return s;
    for (std::size_t i = 0; i < n; ++i)
      if (buf.data()[i] != 0)
        return Error(Code::kInternal, "byte at offset " + std::to_string(off + i) + " is not zero after wipe");
    off += n;
  }
  return ok_status();
}

}  // namespace

nlohmann::json to_json(const DiskWipeReport& r) {
  nlohmann::json j = {{"name", r.name},           {"path", r.path},
                      {"size_bytes", r.size_bytes}, {"discarded", r.discarded},
                      {"overwritten", r.overwritten}, {"verified", r.verified},
                      {"partitions", r.partitions}};
  if (!r.error.empty()) j["error"] = r.error;
  return j;
}

std::vector<Extent> partition_extents(BlockDevice& dev) {
  std::vector<Extent> out;
  const std::size_t head_len = static_cast<std::size_t>(std::min<std::uint64_t>(dev.size(), 1024 * 1024));
  if (head_len < 1024) return out;
  AlignedBuffer head(head_len);
  if (!dev.read_at(0, head.data(), head_len)) return out;
  const char* h = head.data();
  for (std::uint64_t ss : {512u, 4096u}) {
    if (ss + 92 > head_len || std::memcmp(h + ss, "EFI PART", 8) != 0) continue;
    const std::uint64_t entries_lba = le(h + ss + 72, 8);
    const std::uint64_t count = le(h + ss + 80, 4);
    const std::uint64_t entry_size = le(h + ss + 84, 4);
    if (entry_size < 128 || count > 4096) continue;
    for (std::uint64_t i = 0; i < count; ++i) {
      const std::uint64_t at = entries_lba * ss + i * entry_size;
      if (at + 128 > head_len) break;
      bool used = false;
      for (int b = 0; b < 16; ++b) used |= h[at + b] != 0;  // type GUID zero: unused slot
      if (!used) continue;
      const std::uint64_t first = le(h + at + 32, 8), last = le(h + at + 40, 8);
      if (last >= first) out.emplace_back(first * ss, (last + 1) * ss);
    }
    return out;
  }
  if (static_cast<unsigned char>(h[510]) == 0x55 && static_cast<unsigned char>(h[511]) == 0xAA) {
    for (int i = 0; i < 4; ++i) {
      const char* e = h + 446 + 16 * i;
      const unsigned type = static_cast<unsigned char>(e[4]);
      const std::uint64_t start = le(e + 8, 4), sectors = le(e + 12, 4);
      if (type == 0 || type == 0xEE || sectors == 0) continue;
      out.emplace_back(start * 512, (start + sectors) * 512);
    }
  }
  return out;
}

Status zero_edges(BlockDevice& dev, std::uint64_t bytes) {
  for (const auto& [s, e] : wipe_regions(dev.size(), bytes, {}))
    if (auto st = dev.zero_range(s, e - s); !st) return st;
  return dev.sync();
}

DiskWipeReport wipe_device(const std::string& path, const WipeOptions& options, const Logger& log) {
  DiskWipeReport r;
  r.path = path;
  r.name = std::filesystem::path(path).filename().string();
  auto opened = BlockDevice::open(path);
  if (!opened) {
    r.error = opened.error().message;
    return r;
  }
  BlockDevice& dev = *opened;
  r.size_bytes = dev.size();
  const auto started = std::chrono::steady_clock::now();
  const auto partitions = partition_extents(dev);
  r.partitions = partitions.size();
  const auto regions = wipe_regions(dev.size(), std::max<std::uint64_t>(options.edge_bytes, 1024 * 1024), partitions);

  auto fail = [&](const Status& s) {
    r.error = s.error().message;
    log.error("wipe failed", {{"device", path}, {"error", r.error}});
    return r;
  };
  if (options.discard) {
    auto d = dev.discard(0, dev.size());
    if (!d) log.warn("discard failed; zeroing anyway", {{"device", path}, {"error", d.error().message}});
    else r.discarded = *d;
  }
  for (const auto& [s, e] : regions)
    if (auto st = dev.zero_range(s, e - s); !st) return fail(st);
  if (options.full_overwrite) {
    if (auto st = dev.zero_range(0, dev.size()); !st) return fail(st);
    r.overwritten = true;
  }
  if (auto st = dev.sync(); !st) return fail(st);
  dev.drop_cache();
  std::vector<Extent> checks = regions;
  if (options.full_overwrite) {
    // Sample 16 MiB-sized windows spread over the disk as well as the edges.
    const std::uint64_t window = std::min<std::uint64_t>(1024 * 1024, dev.size());
    for (int i = 1; i < 16 && dev.size() > window; ++i) {
      std::uint64_t at = dev.size() / 16 * i;
      at -= at % 4096;
      checks.emplace_back(at, std::min(dev.size(), at + window));
    }
  }
  for (const auto& [s, e] : checks)
    if (auto st = verify_zero(dev, s, e); !st) return fail(st);
  r.verified = true;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  log.info("wiped disk", {{"device", path},
                          {"size_bytes", std::to_string(r.size_bytes)},
                          {"partitions", std::to_string(r.partitions)},
                          {"discarded", r.discarded ? "true" : "false"},
                          {"overwritten", r.overwritten ? "true" : "false"},
                          {"seconds", std::to_string(secs)}});
  return r;
}

WipeAllResult wipe_all_disks(const std::string& root, const WipeOptions& options, const Logger& log) {
  WipeAllResult out;
  out.result["disks"] = nlohmann::json::array();
  for (const auto& d : list_disks(root)) {
    if (d.removable || d.read_only || d.size_bytes == 0) {
      log.info("wipe skips disk", {{"device", d.path}, {"reason", d.removable ? "removable" : d.read_only ? "read-only" : "empty"}});
      continue;
    }
    auto r = wipe_device(d.path, options, log);
    r.name = d.name;
    if (!r.error.empty()) out.error += (out.error.empty() ? "wipe failed: " : "; ") + d.name + ": " + r.error;
    out.result["disks"].push_back(to_json(r));
  }
  return out;
}

}  // namespace kiln::agent
