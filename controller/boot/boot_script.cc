#include "controller/boot/boot_script.h"

namespace kiln::boot {

BootChoice choose_boot(const Node& node) {
  const ProvisionState s = node.provision_state;
  const std::string who = node.name.empty() ? node.id : node.name;
  // A transient state boots what its agent flow's step says (controller/model/steps.h).
  const BootsInto b = boots_into(s, node.provision_step);
  if (b == BootsInto::kRamdisk) return {BootKind::kRamdisk, ""};
  if (b == BootsInto::kDisk || s == ProvisionState::kActive) return {BootKind::kLocalDisk, ""};
  if (on_demand_ramdisk(node)) return {BootKind::kRamdisk, ""};
  return {BootKind::kRetry, "node " + who + " is " + std::string(to_string(s)) + ": nothing to boot"};
}

std::string chain_script(std::string_view boot_url) {
  std::string u(boot_url);
  return "#!ipxe\n"
         "# kilnd: ask for this machine's own script (netX = the interface that booted)\n"
         "chain --autofree " + u + "/boot/${netX/mac}.ipxe || goto retry\n"
         "exit\n"
         ":retry\n"
         "echo kiln: cannot reach " + u + "; retrying in 10 s\n"
         "sleep 10\n"
         "chain --autofree " + u + "/boot/boot.ipxe\n";
}

std::string ramdisk_script(const RamdiskBoot& b) {
  const std::string img = b.boot_url + "/v1/images/" + b.image;
  std::string args = "initrd=initrd";
  if (!b.kernel_args.empty()) args += " " + b.kernel_args;
  args += " kiln.api=" + b.boot_url + " kiln.node=" + b.node_id + " kiln.token=" + b.token +
          " kiln.phase=ramdisk";
  if (!b.tls_sha256.empty()) args += " kiln.tls_sha256=" + b.tls_sha256;
  return "#!ipxe\n"
         "# kilnd: node " + b.node_id + ": deploy ramdisk\n"
         "kernel " + img + "/kernel " + args + " || goto retry\n"
         "initrd --name initrd " + img + "/content || goto retry\n"
         "boot || goto retry\n"
         ":retry\n"
         "echo kiln: loading the deploy ramdisk failed; retrying in 10 s\n"
         "sleep 10\n"
         "chain --autofree " + b.boot_url + "/boot/" + b.mac + ".ipxe\n";
}

std::string local_disk_script(std::string_view boot_mode) {
  if (boot_mode == "bios")
    return "#!ipxe\n"
           "# kilnd: boot from the local disk\n"
           "sanboot --no-describe --drive 0x80\n";
  return "#!ipxe\n"
         "# kilnd: boot from the local disk (the firmware's next boot entry)\n"
         "exit\n";
}

std::string nothing_to_boot_script(std::string_view boot_url, std::string_view mac) {
  return "#!ipxe\n"
         "echo kiln: nothing to boot for this machine now; asking again in 10 s\n"
         "sleep 10\n"
         "chain --autofree " + std::string(boot_url) + "/boot/" + std::string(mac) + ".ipxe\n";
}

}  // namespace kiln::boot
