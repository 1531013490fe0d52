#include <catch2/catch.hpp>

#include "controller/boot/boot_script.h"

using namespace kiln;
using namespace kiln::boot;

namespace {
Node node_in(ProvisionState s, std::string step = "") {
  Node n;
  n.id = "0b7c5a10-1111-4222-8333-444455556666";
  n.name = "gpu-01";
  n.provision_state = s;
  n.provision_step = std::move(step);
  return n;
}
}  // namespace

TEST_CASE("boot choice follows the contract's table") {
  using P = ProvisionState;
  for (P s : {P::kInspecting, P::kCleaning, P::kBurningIn}) CHECK(choose_boot(node_in(s)).kind == BootKind::kRamdisk);
  CHECK(choose_boot(node_in(P::kDeploying, "write_image")).kind == BootKind::kRamdisk);
  CHECK(choose_boot(node_in(P::kDeploying, "")).kind == BootKind::kRamdisk);
  for (const char* step : {"set_boot_disk", "reboot", "wait_boot"})
    CHECK(choose_boot(node_in(P::kDeploying, step)).kind == BootKind::kLocalDisk);
  CHECK(choose_boot(node_in(P::kValidating)).kind == BootKind::kLocalDisk);
  CHECK(choose_boot(node_in(P::kActive)).kind == BootKind::kLocalDisk);
  for (P s : {P::kEnroll, P::kManageable, P::kAvailable, P::kDeployFailed, P::kQuarantined}) {
    BootChoice c = choose_boot(node_in(s));
    CHECK(c.kind == BootKind::kRetry);
    CHECK(c.reason.find("gpu-01") != std::string::npos);
    CHECK(c.reason.find(std::string(to_string(s))) != std::string::npos);
  }
}

TEST_CASE("ramdisk script: kernel with the contract's arguments, named initrd, retry on failure") {
  RamdiskBoot b;
  b.boot_url = "http://10.77.0.1:8080";
  b.image = "9f0e";
  b.kernel_args = "console=ttyS0 quiet";
  b.node_id = "node-uuid";
  b.token = "tok123";
  b.mac = "52:54:00:12:34:56";
  std::string s = ramdisk_script(b);
  CHECK(s.rfind("#!ipxe\n", 0) == 0);
  CHECK(s.find("kernel http://10.77.0.1:8080/v1/images/9f0e/kernel initrd=initrd console=ttyS0 quiet "
               "kiln.api=http://10.77.0.1:8080 kiln.node=node-uuid kiln.token=tok123 kiln.phase=ramdisk") !=
        std::string::npos);
  CHECK(s.find("initrd --name initrd http://10.77.0.1:8080/v1/images/9f0e/content") != std::string::npos);
  CHECK(s.find("\nboot ") != std::string::npos);
  CHECK(s.find("chain --autofree http://10.77.0.1:8080/boot/52:54:00:12:34:56.ipxe") != std::string::npos);
}

TEST_CASE("local disk, nothing-to-boot and chain scripts") {
  CHECK(local_disk_script("bios").find("sanboot --no-describe --drive 0x80") != std::string::npos);
  CHECK(local_disk_script("uefi").find("\nexit\n") != std::string::npos);
  std::string r = nothing_to_boot_script("http://k:1", "52:54:00:00:00:01");
  // Names nothing about any node: the same text for every caller of this MAC.
  CHECK(r == "#!ipxe\necho kiln: nothing to boot for this machine now; asking again in 10 s\nsleep 10\n"
             "chain --autofree http://k:1/boot/52:54:00:00:00:01.ipxe\n");
  CHECK(r.find("chain --autofree http://k:1/boot/52:54:00:00:00:01.ipxe") != std::string::npos);
  std::string c = chain_script("http://k:1");
  CHECK(c.find("chain --autofree http://k:1/boot/${netX/mac}.ipxe") != std::string::npos);
}
