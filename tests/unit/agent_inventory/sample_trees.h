#pragma once
// Sample /sys and /proc trees for the inventory collectors, written into a
// TempTree the way the kernel lays them out (relative symlinks for device and
// driver links included), so every collector reads them through the same
// paths it reads on a real node.

#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/unit/agent_checks/temp_tree.h"

namespace kiln::test {

// root/rel becomes a symlink to `target` (relative to its directory).
inline void symlink_at(const TempTree& t, const std::string& rel, const std::string& target) {
  const std::filesystem::path p = std::filesystem::path(t.root()) / rel;
  std::filesystem::create_directories(p.parent_path());
  REQUIRE(::symlink(target.c_str(), p.c_str()) == 0);
}

// A PCI function directory under sys/devices with a driver link.
inline void pci_function(const TempTree& t, const std::string& devpath, const std::string& driver) {
  t.mkdir("sys/devices/" + devpath);
  if (!driver.empty())
    symlink_at(t, "sys/devices/" + devpath + "/driver",
               "../../../../bus/pci/drivers/" + driver);  // target need not exist; only its name is read
}

inline void block_disk(const TempTree& t, const std::string& name, unsigned long long sectors, const std::string& model,
                       const std::string& serial, const std::string& wwid, bool rotational, bool removable,
                       unsigned lbs, unsigned pbs) {
  const std::string d = "sys/block/" + name + "/";
  t.write(d + "size", std::to_string(sectors) + "\n");
  t.write(d + "removable", removable ? "1\n" : "0\n");
  t.write(d + "ro", "0\n");
  t.write(d + "queue/rotational", rotational ? "1\n" : "0\n");
  t.write(d + "queue/logical_block_size", std::to_string(lbs) + "\n");
  t.write(d + "queue/physical_block_size", std::to_string(pbs) + "\n");
  t.write(d + "queue/discard_max_bytes", rotational ? "0\n" : "2199023255040\n");
  if (!model.empty()) t.write(d + "device/model", model + "   \n");  // SCSI pads with spaces
  if (!serial.empty()) t.write(d + "device/serial", serial + "\n");
  if (!wwid.empty()) t.write(d + "wwid", wwid + "\n");
}

inline void write_server_tree(const TempTree& t) {
  // Two sockets, two cores each, two threads per core.
  std::string cpuinfo;
  for (int cpu = 0; cpu < 8; ++cpu) {
    cpuinfo += "processor\t: " + std::to_string(cpu) +
               "\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
               "physical id\t: " + std::to_string(cpu / 4) + "\ncore id\t\t: " + std::to_string(cpu % 2) +
               "\nflags\t\t: fpu vme sse4_2 avx avx2 avx512f avx512bw amx_tile amx_bf16 vmx aes pdpe1gb\n\n";
  }
  t.write("proc/cpuinfo", cpuinfo);
  t.write("proc/meminfo", "MemTotal:       2113929216 kB\nMemFree:        2000000000 kB\n");
  t.write("proc/sys/kernel/osrelease", "6.1.0-18-amd64\n");
  t.mkdir("sys/firmware/efi/efivars");

  // DMI identity and an SMBIOS table with two 1 TiB DIMMs (extended size) and
  // an empty slot, then the end-of-table marker.
  for (auto [k, v] : {std::pair{"sys_vendor", "Supermicro"}, {"product_name", "SYS-821GE-TNHR"},
                      {"product_serial", "S928374"}, {"product_uuid", "a0b1c2d3-0000-1111-2222-333344445555"},
                      {"board_vendor", "Supermicro"}, {"board_name", "X13DEG-OAD"}, {"bios_version", "2.1"}})
    t.write(std::string("sys/class/dmi/id/") + k, std::string(v) + "\n");
  std::string dmi;
  auto type17 = [&](unsigned size_field, unsigned extended_mb) {
    std::string s(0x28, '\0');
    s[0] = 17;
    s[1] = 0x28;
    s[0x0C] = static_cast<char>(size_field & 0xFF);
    s[0x0D] = static_cast<char>(size_field >> 8);
    for (int i = 0; i < 4; ++i) s[0x1C + i] = static_cast<char>((extended_mb >> (8 * i)) & 0xFF);
    s += "DIMM_A1";
    s += std::string(2, '\0');
    dmi += s;
  };
  type17(0x7FFF, 1024 * 1024);
  type17(0x7FFF, 1024 * 1024);
  type17(0, 0);
  dmi += std::string("\x7f\x04\x00\x00\x00\x00", 6);
  t.write("sys/firmware/dmi/tables/DMI", dmi);

  // Disks: two NVMe, one SATA SSD, and pseudo devices that must be skipped.
  block_disk(t, "nvme0n1", 7501476528ull, "SAMSUNG MZQL23T8HCLS-00A07", "S64HNE0T500001", "eui.36344630525000010025384500000001",
             false, false, 512, 4096);
  block_disk(t, "nvme1n1", 3750748848ull, "SAMSUNG MZQL21T9HCJR-00A07", "S64GNE0T400002", "eui.36344630525000020025384500000002",
             false, false, 512, 4096);
  block_disk(t, "sda", 937703088ull, "INTEL SSDSC2KB48", "", "", false, false, 512, 4096);
  t.write("sys/block/sda/device/wwid", "naa.55cd2e415125a4e1\n");
  t.write("sys/block/sda/device/vendor", "ATA     \n");
  t.write("sys/block/sda/device/vpd_pg80", std::string("\x00\x80\x00\x14", 4) + "  PHYS1234005Y480BGN");
  t.write("sys/block/sda/sda1/start", "2048\n");
  block_disk(t, "loop0", 1024, "", "", "", false, false, 512, 512);
  block_disk(t, "dm-0", 4096, "", "", "", false, false, 512, 512);
  block_disk(t, "sr0", 2048, "Virtual CDROM", "", "", true, true, 2048, 2048);
  block_disk(t, "zram0", 8192, "", "", "", false, false, 4096, 4096);
  pci_function(t, "pci0000:00/0000:00:1d.0/0000:3d:00.0", "nvme");

  // A 2-port ConnectX-7: Ethernet netdevs and mlx5 RDMA devices on the same
  // PCI functions; port 1 ACTIVE, port 2 DOWN. Plus an onboard 1 GbE, lo,
  // and virtual interfaces that must be skipped.
  pci_function(t, "pci0000:17/0000:17:00.0/0000:1a:00.0", "mlx5_core");
  pci_function(t, "pci0000:17/0000:17:00.0/0000:1a:00.1", "mlx5_core");
  pci_function(t, "pci0000:00/0000:00:1f.6", "igb");
  struct Nic { const char* name; const char* mac; const char* dev; const char* speed; const char* carrier; };
  for (const Nic& n : {Nic{"ens1f0np0", "B8:3F:D2:00:00:01", "pci0000:17/0000:17:00.0/0000:1a:00.0", "400000", "1"},
                       Nic{"ens1f1np1", "b8:3f:d2:00:00:02", "pci0000:17/0000:17:00.0/0000:1a:00.1", "-1", "0"},
                       Nic{"eno1", "3c:ec:ef:00:00:03", "pci0000:00/0000:00:1f.6", "1000", "1"}}) {
    const std::string d = std::string("sys/class/net/") + n.name + "/";
    t.write(d + "address", std::string(n.mac) + "\n");
    t.write(d + "speed", std::string(n.speed) + "\n");
    t.write(d + "carrier", std::string(n.carrier) + "\n");
    t.write(d + "type", "1\n");
    t.write(d + "mtu", "9000\n");
    symlink_at(t, d + "device", std::string("../../../devices/") + n.dev);
  }
  t.write("sys/class/net/lo/address", "00:00:00:00:00:00\n");
  t.write("sys/class/net/docker0/address", "02:42:ac:11:00:01\n");
  t.write("sys/class/net/bond0/address", "b8:3f:d2:00:00:01\n");
  for (auto [dev, pci, state, phys, rate] :
       {std::tuple{"mlx5_0", "0000:1a:00.0", "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)"},
        std::tuple{"mlx5_1", "0000:1a:00.1", "1: DOWN", "3: Disabled", "10 Gb/sec (4X SDR)"}}) {
    const std::string d = std::string("sys/class/infiniband/") + dev + "/";
    t.write(d + "node_guid", "b83f:d203:0000:0001\n");
    t.write(d + "fw_ver", "28.39.1002\n");
    t.write(d + "ports/1/state", std::string(state) + "\n");
    t.write(d + "ports/1/phys_state", std::string(phys) + "\n");
    t.write(d + "ports/1/rate", std::string(rate) + "\n");
    t.write(d + "ports/1/link_layer", "InfiniBand\n");
    symlink_at(t, d + "device", std::string("../../../devices/pci0000:17/0000:17:00.0/") + pci);
  }

  // Eight H100 SXM GPUs, four per NUMA node, and an NVSwitch (not a GPU).
  const char* gpus[] = {"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                        "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"};
  for (int i = 0; i < 8; ++i) {
    t.pci_device(gpus[i], "0x10de", "0x030200", "32.0 GT/s PCIe", "32.0 GT/s PCIe", "16", "16");
    t.write(std::string("sys/bus/pci/devices/") + gpus[i] + "/numa_node", i < 4 ? "0\n" : "1\n");
  }
  t.pci_device("0000:05:00.0", "0x10de", "0x068000");
  t.pci_device("0000:1a:00.0", "0x15b3", "0x020700");

  for (int node = 0; node < 2; ++node) {
    const std::string d = "sys/devices/system/node/node" + std::to_string(node) + "/";
    t.write(d + "cpulist", node == 0 ? "0-3\n" : "4-7\n");
    t.write(d + "meminfo", "Node " + std::to_string(node) + " MemTotal:       1056964608 kB\nNode " +
                               std::to_string(node) + " MemFree:  1000 kB\n");
  }
  t.write("sys/devices/system/node/possible", "0-1\n");
}

inline void write_vm_tree(const TempTree& t) {
  std::string cpuinfo;
  for (int cpu = 0; cpu < 4; ++cpu)
    cpuinfo += "processor\t: " + std::to_string(cpu) +
               "\nvendor_id\t: GenuineIntel\nmodel name\t: Intel Xeon Processor (Icelake)\n"
               "flags\t\t: fpu sse4_2 avx avx2 avx512f hypervisor\n\n";
  t.write("proc/cpuinfo", cpuinfo);
  t.write("proc/meminfo", "MemTotal:        8129812 kB\n");
  for (auto [k, v] : {std::pair{"sys_vendor", "QEMU"}, {"product_name", "Standard PC (Q35 + ICH9, 2009)"},
                      {"bios_vendor", "SeaBIOS"}, {"bios_version", "1.16.2-debian-1.16.2-1"}})
    t.write(std::string("sys/class/dmi/id/") + k, std::string(v) + "\n");

  pci_function(t, "pci0000:00/0000:00:05.0", "virtio-pci");
  t.mkdir("sys/devices/pci0000:00/0000:00:05.0/virtio2");
  block_disk(t, "vda", 41943040ull, "", "", "", true, false, 512, 512);
  t.write("sys/block/vda/serial", "kiln-vm-disk0\n");
  symlink_at(t, "sys/block/vda/device", "../../devices/pci0000:00/0000:00:05.0/virtio2");
  block_disk(t, "sr0", 0, "QEMU DVD-ROM", "", "", true, true, 2048, 2048);

  pci_function(t, "pci0000:00/0000:00:03.0", "virtio-pci");
  t.mkdir("sys/devices/pci0000:00/0000:00:03.0/virtio0");
  symlink_at(t, "sys/devices/pci0000:00/0000:00:03.0/virtio0/driver", "../../../../bus/virtio/drivers/virtio_net");
  t.write("sys/class/net/enp0s3/address", "52:54:00:12:34:56\n");
  t.write("sys/class/net/enp0s3/carrier", "1\n");
  t.write("sys/class/net/enp0s3/type", "1\n");
  // virtio_net reports no speed: reading it fails with EINVAL, modelled as absent.
  symlink_at(t, "sys/class/net/enp0s3/device", "../../../devices/pci0000:00/0000:00:03.0/virtio0");
  t.write("sys/class/net/lo/address", "00:00:00:00:00:00\n");
}

}  // namespace kiln::test
