// Domain XML generation, one check per flavour option; capabilities and node
// device parsing on captured XML.
#include <catch2/catch.hpp>

#include "drivers/libvirt/domain_xml.h"
#include "drivers/libvirt/host_facts.h"

using namespace kiln;
using namespace kiln::libvirt;

namespace {

DomainSpec base() {
  DomainSpec s;
  s.name = "kiln-n1";
  s.domain_type = "qemu";
  s.vcpus = 2;
  s.memory_mib = 2048;
  s.uefi = false;
  s.disk_path = "/pool/kiln-n1.qcow2";
  s.mac = "52:54:00:01:02:03";
  s.network = "default";
  s.console_log = "/var/log/kiln/kiln-n1.log";
  return s;
}

bool has(const std::string& x, const std::string& what) { return x.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("domain XML: the plain flavour") {
  std::string x = domain_xml(base());
  CHECK(has(x, "<domain type='qemu'>"));
  CHECK(has(x, "<memory unit='MiB'>2048</memory>"));
  CHECK(has(x, "<vcpu placement='static'>2</vcpu>"));
  CHECK(has(x, "<features>\n    <acpi/>"));
  CHECK(has(x, "<target dev='vda' bus='virtio'/>"));
  CHECK(has(x, "<source file='/pool/kiln-n1.qcow2'/>"));
  CHECK(has(x, "<source network='default'/>"));
  CHECK(has(x, "<mac address='52:54:00:01:02:03'/>"));
  CHECK(has(x, "<model type='virtio'/>"));
  CHECK(has(x, "<log file='/var/log/kiln/kiln-n1.log' append='on'/>"));
  CHECK_FALSE(has(x, "<loader"));
  CHECK_FALSE(has(x, "<hugepages"));
  CHECK_FALSE(has(x, "<cputune>"));
  CHECK_FALSE(has(x, "<hostdev"));
  CHECK_FALSE(has(x, "host-passthrough"));  // TCG: no host CPU model
}

TEST_CASE("domain XML: UEFI with per-domain NVRAM") {
  DomainSpec s = base();
  s.uefi = true;
  s.ovmf_code = "/usr/share/OVMF/OVMF_CODE_4M.fd";
  s.ovmf_vars = "/usr/share/OVMF/OVMF_VARS_4M.fd";
  s.nvram = "/pool/kiln-n1_VARS.fd";
  std::string x = domain_xml(s);
  CHECK(has(x, "<loader readonly='yes' secure='no' type='pflash'>/usr/share/OVMF/OVMF_CODE_4M.fd</loader>"));
  CHECK(has(x, "<nvram template='/usr/share/OVMF/OVMF_VARS_4M.fd'>/pool/kiln-n1_VARS.fd</nvram>"));
}

TEST_CASE("domain XML: kvm gets the host CPU, machine type") {
  DomainSpec s = base();
  s.domain_type = "kvm";
  s.machine = "q35";
  std::string x = domain_xml(s);
  CHECK(has(x, "<domain type='kvm'>"));
  CHECK(has(x, "machine='q35'>hvm</type>"));
  CHECK(has(x, "<cpu mode='host-passthrough'"));
}

TEST_CASE("domain XML: NUMA pinning") {
  DomainSpec s = base();
  s.pinned_cpus = {8, 9};
  s.numa_cell = 1;
  std::string x = domain_xml(s);
  CHECK(has(x, "<vcpupin vcpu='0' cpuset='8'/>"));
  CHECK(has(x, "<vcpupin vcpu='1' cpuset='9'/>"));
  CHECK(has(x, "<memory mode='strict' nodeset='1'/>"));
}

TEST_CASE("domain XML: hugepages") {
  DomainSpec s = base();
  s.hugepages = true;
  CHECK(has(domain_xml(s), "<memoryBacking>\n    <hugepages/>\n  </memoryBacking>"));
}

TEST_CASE("domain XML: GPU passthrough and mdev") {
  DomainSpec s = base();
  s.gpus = {"0000:3b:00.0", "0000:af:01.1", "garbage"};
  s.mdevs = {"4b20d080-1b54-4048-85b3-a6a62d165c01"};
  std::string x = domain_xml(s);
  CHECK(has(x, "<hostdev mode='subsystem' type='pci' managed='yes'>"));
  CHECK(has(x, "<address domain='0x0000' bus='0x3b' slot='0x00' function='0x0'/>"));
  CHECK(has(x, "<address domain='0x0000' bus='0xaf' slot='0x01' function='0x1'/>"));
  CHECK(has(x, "<hostdev mode='subsystem' type='mdev' model='vfio-pci'>"));
  CHECK(has(x, "<address uuid='4b20d080-1b54-4048-85b3-a6a62d165c01'/>"));
  std::size_t n = 0;
  for (std::size_t p = x.find("type='pci' managed"); p != std::string::npos; p = x.find("type='pci' managed", p + 1)) ++n;
  CHECK(n == 2);  // the malformed address is dropped
}

TEST_CASE("domain XML: bridge instead of network, NoCloud serial, escaping") {
  DomainSpec s = base();
  s.bridge = "kilnbr0";
  s.smbios_serial = "ds=nocloud-net;s=http://10.77.0.1:8080/v1/nocloud/n1/";
  s.name = "a<b&'c";
  std::string x = domain_xml(s);
  CHECK(has(x, "<interface type='bridge'>\n      <source bridge='kilnbr0'/>"));
  CHECK_FALSE(has(x, "<source network="));
  CHECK(has(x, "<entry name='serial'>ds=nocloud-net;s=http://10.77.0.1:8080/v1/nocloud/n1/</entry>"));
  CHECK(has(x, "<smbios mode='sysinfo'/>"));
  CHECK(has(x, "<name>a&lt;b&amp;&apos;c</name>"));
}

TEST_CASE("domain type: kvm only when offered and not forced to TCG") {
  HostCapacity c;
  c.domain_types = {"qemu", "kvm"};
  CHECK(choose_domain_type(c, false) == "kvm");
  CHECK(choose_domain_type(c, true) == "qemu");
  c.domain_types = {"qemu"};
  CHECK(choose_domain_type(c, false) == "qemu");
  c.domain_types = {"test"};
  CHECK(choose_domain_type(c, false) == "test");
  c.domain_types = {};
  CHECK(choose_domain_type(c, false) == "qemu");
}

TEST_CASE("MACs are stable per node and in QEMU's range") {
  CHECK(mac_for("node-a") == mac_for("node-a"));
  CHECK(mac_for("node-a") != mac_for("node-b"));
  CHECK(mac_for("x").rfind("52:54:00:", 0) == 0);
  CHECK(mac_for("x").size() == 17);
}

TEST_CASE("volume XML: qcow2 backed by the image") {
  std::string v = volume_xml("kiln-n1.qcow2", 10, "/images/demo.img", "raw");
  CHECK(has(v, "<capacity unit='GiB'>10</capacity>"));
  CHECK(has(v, "<format type='qcow2'/>"));
  CHECK(has(v, "<backingStore>\n    <path>/images/demo.img</path>\n    <format type='raw'/>"));
}

TEST_CASE("capabilities: cells, CPUs, memory, hugepages, guest domain types") {
  const char* caps = R"(<capabilities><host><cpu><arch>x86_64</arch></cpu><topology><cells num='2'>
    <cell id='0'><memory unit='KiB'>4194304</memory><pages unit='KiB' size='4'>1</pages>
      <pages unit='KiB' size='2048'>512</pages><cpus num='2'><cpu id='0'/><cpu id='1'/></cpus></cell>
    <cell id='1'><memory unit='KiB'>2097152</memory><pages unit='KiB' size='2048'>0</pages>
      <cpus num='2'><cpu id='2'/><cpu id='3'/></cpus></cell></cells></topology></host>
    <guest><os_type>hvm</os_type><arch name='x86_64'><emulator>/usr/bin/qemu-system-x86_64</emulator>
      <machine maxCpus='255'>pc-q35-7.2</machine><machine canonical='pc-q35-7.2'>q35</machine>
      <domain type='qemu'/><domain type='kvm'/></arch></guest>
    <guest><os_type>hvm</os_type><arch name='i686'><domain type='qemu'/></arch></guest></capabilities>)";
  Result<HostCapacity> c = parse_capabilities(caps);
  REQUIRE(c);
  CHECK(c->arch == "x86_64");
  CHECK(c->cpus == 4);
  CHECK(c->memory_mib == 6144);
  REQUIRE(c->cells.size() == 2);
  CHECK(c->cells[0].hugepages_2m == 512);
  CHECK(c->cells[1].cpus == std::vector<int>{2, 3});
  CHECK(c->domain_types == std::vector<std::string>{"qemu", "kvm"});
  CHECK(c->emulator == "/usr/bin/qemu-system-x86_64");
  CHECK(std::find(c->machines.begin(), c->machines.end(), "q35") != c->machines.end());
  CHECK_FALSE(parse_capabilities("<nope/>"));
}

TEST_CASE("node devices: NVIDIA display functions are GPUs, with IOMMU group, NUMA node and mdev types") {
  const char* gpu = R"(<device><name>pci_0000_3b_00_0</name><capability type='pci'><class>0x030200</class>
    <domain>0</domain><bus>59</bus><slot>0</slot><function>0</function>
    <product id='0x2330'>GH100 [H100 SXM5 80GB]</product><vendor id='0x10de'>NVIDIA Corporation</vendor>
    <capability type='mdev_types'><type id='nvidia-700'><name>H100-1-10C</name></type>
      <type id='nvidia-701'/></capability>
    <iommuGroup number='42'><address domain='0x0000' bus='0x3b' slot='0x00' function='0x0'/></iommuGroup>
    <numa node='1'/></capability></device>)";
  std::optional<HostGpu> g = parse_gpu_nodedev(gpu);
  REQUIRE(g);
  CHECK(g->address == "0000:3b:00.0");
  CHECK(g->nodedev == "pci_0000_3b_00_0");
  CHECK(g->iommu_group == 42);
  CHECK(g->numa_node == 1);
  CHECK(g->mdev_types == std::vector<std::string>{"nvidia-700", "nvidia-701"});
  CHECK(g->product == "GH100 [H100 SXM5 80GB]");
  const char* audio = R"(<device><name>pci_0000_3b_00_1</name><capability type='pci'><class>0x040300</class>
    <domain>0</domain><bus>59</bus><slot>0</slot><function>1</function><vendor id='0x10de'/></capability></device>)";
  CHECK_FALSE(parse_gpu_nodedev(audio));
  const char* nic = R"(<device><name>pci_0000_01_00_0</name><capability type='pci'><class>0x020000</class>
    <domain>0</domain><bus>1</bus><slot>0</slot><function>0</function><vendor id='0x15b3'/></capability></device>)";
  CHECK_FALSE(parse_gpu_nodedev(nic));
}
