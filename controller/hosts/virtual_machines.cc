#include "controller/hosts/virtual_machines.h"

#include <libvirt/libvirt.h>

#include <cstdlib>

#include "common/ids.h"
#include "controller/hosts/placement.h"
#include "drivers/libvirt/domain_xml.h"
#include "controller/model/event_types.h"
#include "controller/store/store.h"

namespace kiln {
namespace {

template <typename T, int (*Free)(T)>
struct Ref {
  T p = nullptr;
  ~Ref() {
    if (p) Free(p);
  }
};
using DomainRef = Ref<virDomainPtr, virDomainFree>;
using PoolRef = Ref<virStoragePoolPtr, virStoragePoolFree>;
using VolRef = Ref<virStorageVolPtr, virStorageVolFree>;

Error virt_error(const std::string& what) { return Error(Code::kDriverError, libvirt::last_error(what)); }

// The pool for guest disks: the host's named pool, created as a dir pool
// at pool_dir when it does not exist; started when inactive.
Status open_pool(virConnectPtr conn, const HostOptions& o, PoolRef& pool) {
  pool.p = virStoragePoolLookupByName(conn, o.pool.c_str());
  if (!pool.p) {
    std::string xml = libvirt::dir_pool_xml(o.pool, o.pool_dir);
    pool.p = virStoragePoolDefineXML(conn, xml.c_str(), 0);
    if (!pool.p) return virt_error("define storage pool " + o.pool);
    (void)virStoragePoolBuild(pool.p, 0);  // mkdir; fails harmlessly when it exists
    (void)virStoragePoolSetAutostart(pool.p, 1);
  }
  if (virStoragePoolIsActive(pool.p) == 0 && virStoragePoolCreate(pool.p, 0) < 0)
    return virt_error("start storage pool " + o.pool);
  return ok_status();
}

std::string backing_format(const Image& image) {
  if (image.format == "qcow2") return "qcow2";
  if (image.format == "raw" || image.format.empty()) return "raw";
  return "";
}

EventDraft port_event(const char* type, const std::string& node_id, const std::string& mac) {
  EventDraft e;
  e.type = type;
  e.node_id = node_id;
  e.detail = {{"address", mac}, {"source", "virtual_machine"}};
  return e;
}

NodeCondition no_condition() { return NodeCondition(); }

}  // namespace

Status VirtualMachines::provision_blocking(const std::string& node_id, const std::string& image_ref) {
  Result<Node> node = store_.get_node(node_id);
  if (!node) return node.take_error();
  if (node->profile.empty()) return Error(Code::kUnprocessable, "a virtual node needs a profile");
  Result<Profile> profile = store_.get_profile(node->profile);
  if (!profile) return Error(Code::kUnprocessable, "profile " + node->profile + ": " + profile.error().message);
  Result<Flavour> flavour = flavour_of_profile(profile->doc, profile->name);
  if (!flavour) return Error(Code::kUnprocessable, flavour.error().message);
  if (image_ref.empty()) return Error(Code::kUnprocessable, "deploy needs an image");
  Result<Image> image = store_.get_image(image_ref);
  if (!image) return Error(Code::kUnprocessable, "image " + image_ref + ": " + image.error().message);
  std::string fmt = backing_format(*image);
  if (fmt.empty())
    return Error(Code::kUnprocessable, "image " + image->name + " is " + image->format +
                                           ": a virtual disk needs a raw or qcow2 image to back it");

  // 2. place (idempotent: an existing placement is returned as it is).
  std::string requested = node->bmc.options.value("host", node->host);
  VirtualMachine draft;
  draft.node_id = node->id;
  draft.domain = domain_name(node->id);
  draft.mac = libvirt::mac_for(node->id);
  Flavour f = *flavour;
  std::string nid = node->id;
  NodeStore::PlacementPlanner planner = [f, nid](const Host& h, const std::vector<HostReservation>& booked) {
    return plan_placement(h, booked, f, nid);
  };
  Result<VirtualMachine> vm = store_.place_virtual_node(draft, requested, planner);
  if (!vm) return vm.take_error();
  Result<Host> host = store_.get_host(vm->host_id);
  if (!host) return host.take_error();
  std::string host_name = host->name;
  std::string domain = vm->domain;
  Result<Node> shown = store_.update_node_if(
      node->id, no_condition(),
      [&](Node& m) {
        m.host = host_name;
        m.bmc.domain = domain;
        return ok_status();
      },
      {});
  if (!shown) return shown.take_error();

  // 3. the MAC as a port of the node.
  Result<Port> port = store_.find_port_by_address(vm->mac);
  if (!port) {
    if (port.error().code != Code::kNotFound) return port.take_error();
    Port p;
    p.id = new_uuid();
    p.node_id = node->id;
    p.address = vm->mac;
    p.pxe = false;  // the guest boots its disk; the port is for the agent's lookup and DHCP
    Result<Port> made = store_.create_port(p, port_event(event_type::kPortCreated, node->id, vm->mac));
    if (!made) return made.take_error();
  } else if (port->node_id != node->id) {
    return Error(Code::kConflict, "MAC " + vm->mac + " already belongs to node " + port->node_id);
  }

  // 4. storage.
  Result<libvirt::ConnPtr> conn = hosts_.connection(vm->host_id);
  if (!conn) return Error(Code::kUnavailable, "host " + host_name + " is unreachable: " + conn.error().message);
  virConnectPtr c = conn->get();
  PoolRef pool;
  if (Status s = open_pool(c, host->options, pool); !s) return s;
  std::string vol_name = domain + ".qcow2";
  VolRef vol;
  vol.p = virStorageVolLookupByName(pool.p, vol_name.c_str());
  if (!vol.p) {
    std::string xml = libvirt::volume_xml(vol_name, vm->placement.flavour.disk_gib, image->path, fmt);
    vol.p = virStorageVolCreateXML(pool.p, xml.c_str(), 0);
    if (!vol.p) return virt_error("create volume " + vol_name + " in pool " + host->options.pool);
  }
  char* path = virStorageVolGetPath(vol.p);
  if (!path) return virt_error("volume path of " + vol_name);
  vm->volume = path;
  std::free(path);

  // 5. define and start.
  libvirt::DomainSpec spec;
  spec.name = domain;
  spec.domain_type = libvirt::choose_domain_type(host->capacity, host->options.force_tcg);
  spec.arch = host->capacity.arch.empty() ? "x86_64" : host->capacity.arch;
  spec.machine = std::find(host->capacity.machines.begin(), host->capacity.machines.end(), "q35") !=
                         host->capacity.machines.end()
                     ? "q35"
                     : "";
  spec.uefi = node->boot_mode == "uefi";
  spec.ovmf_code = host->options.ovmf_code;
  spec.ovmf_vars = host->options.ovmf_vars;
  vm->nvram = spec.uefi ? host->options.pool_dir + "/" + domain + "_VARS.fd" : "";
  spec.nvram = vm->nvram;
  spec.vcpus = vm->placement.flavour.vcpus;
  spec.memory_mib = vm->placement.flavour.memory_mib;
  spec.hugepages = vm->placement.flavour.hugepages;
  spec.pinned_cpus = vm->placement.cpus;
  spec.numa_cell = vm->placement.numa_cell;
  spec.gpus = vm->placement.gpus;
  spec.disk_path = vm->volume;
  spec.mac = vm->mac;
  spec.network = host->options.network;
  spec.bridge = host->options.bridge;
  spec.console_log = host->options.console_dir + "/" + domain + ".log";
  // nocloud-net, not nocloud: cloud-init takes "ds=nocloud" as dsmode local
  // and ignores an http seed it fetched in the network stage
  // (docs/virtual-nodes.md, "Cloud-init").
  if (!boot_url_.empty()) spec.smbios_serial = "ds=nocloud-net;s=" + boot_url_ + "/v1/nocloud/" + node->id + "/";
  std::string xml = libvirt::domain_xml(spec);
  DomainRef dom;
  dom.p = virDomainDefineXML(c, xml.c_str());
  if (!dom.p) return virt_error("define domain " + domain + " on host " + host_name);
  vm->state = "defined";
  if (Status s = store_.update_virtual_machine(*vm); !s) return s;
  int active = virDomainIsActive(dom.p);
  if (active == 0 && virDomainCreate(dom.p) < 0) return virt_error("start domain " + domain);
  log_.info("virtual machine started", {{"node", node->id}, {"host", host_name}, {"domain", domain},
                                        {"type", spec.domain_type}});
  return ok_status();
}

Status VirtualMachines::teardown_blocking(const std::string& node_id) {
  Result<VirtualMachine> vm = store_.get_virtual_machine(node_id);
  if (!vm) {
    if (vm.error().code != Code::kNotFound) return vm.take_error();
    // Nothing placed (or already released): make sure the derived port is gone too.
    Result<Port> port = store_.find_port_by_address(libvirt::mac_for(node_id));
    if (port && port->node_id == node_id) {
      Status d = store_.delete_port(port->id, port_event(event_type::kPortDeleted, node_id, port->address));
      if (!d && d.error().code != Code::kNotFound) return d;
    }
    return ok_status();
  }
  vm->state = "removing";
  if (Status s = store_.update_virtual_machine(*vm); !s) return s;
  Result<Host> host = store_.get_host(vm->host_id);
  if (!host) return host.take_error();
  Result<libvirt::ConnPtr> conn = hosts_.connection(vm->host_id);
  if (!conn)
    return Error(Code::kUnavailable, "host " + host->name + " is unreachable (teardown will be retried): " +
                                         conn.error().message);
  virConnectPtr c = conn->get();
  {
    DomainRef dom;
    dom.p = virDomainLookupByName(c, vm->domain.c_str());
    if (dom.p) {
      if (virDomainIsActive(dom.p) == 1 && virDomainDestroy(dom.p) < 0)
        return virt_error("destroy domain " + vm->domain);
      unsigned flags = VIR_DOMAIN_UNDEFINE_NVRAM | VIR_DOMAIN_UNDEFINE_MANAGED_SAVE |
                       VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA;
      if (virDomainUndefineFlags(dom.p, flags) < 0 && virDomainUndefine(dom.p) < 0)
        return virt_error("undefine domain " + vm->domain);
    }
  }
  if (!vm->volume.empty()) {
    VolRef vol;
    vol.p = virStorageVolLookupByPath(c, vm->volume.c_str());
    if (!vol.p) {
      // Not in a pool we can see by path: try the host's pool by name.
      PoolRef pool;
      pool.p = virStoragePoolLookupByName(c, host->options.pool.c_str());
      if (pool.p) vol.p = virStorageVolLookupByName(pool.p, (vm->domain + ".qcow2").c_str());
    }
    if (vol.p && virStorageVolDelete(vol.p, 0) < 0) return virt_error("delete volume " + vm->volume);
  }
  Result<Port> port = store_.find_port_by_address(vm->mac);
  if (port && port->node_id == node_id) {
    Status d = store_.delete_port(port->id, port_event(event_type::kPortDeleted, node_id, port->address));
    if (!d && d.error().code != Code::kNotFound) return d;
  }
  if (Status s = store_.release_virtual_machine(node_id); !s) return s;
  Result<Node> shown = store_.update_node_if(
      node_id, no_condition(),
      [&](Node& m) {
        m.host = m.bmc.options.value("host", std::string());
        m.bmc.domain.clear();
        m.power_state = PowerState::kOff;
        return ok_status();
      },
      {});
  if (!shown && shown.error().code != Code::kNotFound) return shown.take_error();
  log_.info("virtual machine removed", {{"node", node_id}, {"host", host->name}, {"domain", vm->domain}});
  return ok_status();
}

asio::awaitable<Status> VirtualMachines::provision(std::string node_id, std::string image) {
  auto call = [this, node_id, image] { return provision_blocking(node_id, image); };  // named (GCC 12)
  co_return co_await virt_.run(call);
}

asio::awaitable<Status> VirtualMachines::teardown(std::string node_id) {
  auto call = [this, node_id] { return teardown_blocking(node_id); };
  co_return co_await virt_.run(call);
}

}  // namespace kiln
