#pragma once
// Soak: one chaos soak of kilnd, from setting up to the report.
//
//   set up    kiln-vbmc's BMC fleet, kilnd (one on SQLite, or three on one
//             PostgreSQL), the world of world.h
//   chaos     for --duration: every ~0.3 s a random user action
//             (workload.h); every ~45 s kill -9 of kilnd (on PostgreSQL of
//             one of the three) and a restart 0-3 s later; every ~30 s every
//             BMC paused 2-6 s; the pool repaired every 10 s
//   watching  all along: the event log every second (events gap-free, the
//             operation ledger, ownership and quota at every claim), the
//             nodes every 2 s (deadlines), quotas every 5 s, one tenant's
//             isolation every 4 s, kilnd's RSS and descriptors every 2 s
//   settling  the chaos stops, every allocation is released, and everything
//             must come to rest (no operation, no transient state, every
//             allocation released) within the longest timeout plus two minutes
//   at the end  every operation ended once, the bill against the
//             allocations' history, every tenant's isolation, the whole
//             event log again, every process's footprint
//
// run() returns the exit status (soak_options.h) and writes the report.
// Set-up failures throw std::runtime_error (exit 3 in main).

#include <memory>

#include <nlohmann/json.hpp>

#include "bench/soak/soak_options.h"

namespace kiln::soak {

int run_soak(const SoakOptions& options);

}  // namespace kiln::soak
