#pragma once
// The fake driver: a node that exists only in kilnd's memory.
//
// It makes the lifecycle engine fully exercisable without hardware: power
// actions take a configurable time and can be made to fail, inspection,
// cleaning, deploy and validation succeed instantly (or after a delay, or fail
// on request). Per-node knobs come from the node's bmc.options:
//
//   power_delay_ms   int >= 0   time a power action takes (default 0)
//   step_delay_ms    int >= 0   time verify/inspect/clean/deploy/validate take (default 0)
//   hold_until_file  string     an absolute path: those steps then also wait
//                               (polling every 50 ms) until that file exists,
//                               so a test can hold any number of operations
//                               mid-step however slowly it starts them, and
//                               release them all at once
//   fail             [string]   steps that fail: verify, power, boot_device,
//                               inspect, clean, deploy, undeploy, validate
//   validation       "pass"|"fail"   the validation report's result (default pass)
//   validation_script [entry]  the report of each validate call in turn, the
//                               last repeating: "pass", "fail" (a non-numeric
//                               fake_check), "numeric_miss" (nccl_allreduce
//                               under its floor), "xid", "missing_gpu", or a
//                               whole report object {"checks": [...]}
//
// Power state and boot device live in memory per node id and start "off" /
// "disk"; a kilnd restart forgets them, as a lab reset would.
//
// Not a stub: it is the driver of the demo lab and of the engine's tests. The
// real drivers (redfish, ipmi, libvirt) implement the same interfaces.

#include <memory>

#include <boost/asio/any_io_executor.hpp>

#include "drivers/driver.h"

namespace kiln {

std::unique_ptr<Driver> make_fake_driver(asio::any_io_executor ex);

}  // namespace kiln
