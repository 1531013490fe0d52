#!/usr/bin/env bash
# End-to-end test on the VM lab (scripts/lab): two qemu VMs, kiln-vm-1 (BIOS, IPMI) and
# kiln-vm-2 (UEFI, Redfish), PXE-booted by kilnd into the deploy ramdisk and taken
#   enroll -> manage -> inspect -> provide -> deploy demo-os -> active (booted from disk)
#   -> undeploy -> available
# (both deployed into one allocation, so before hand-off their OS agents run
# nccl_multinode through kilnd with the test-only tcp collective, VM to VM over the bridge),
# checking the inventory (disk size, MAC), that cleaning leaves no partition table on
# the VM's raw disk file, that the deployed disk starts with the image's bytes (sha256),
# and that the provision transitions were emitted as events. Then the failure paths:
#   bad-checksum  an image registered with a wrong sha256: deploy_failed, "sha256 mismatch"
#   no-callback   the node's NIC is cut off the bridge during a deploy: the agent never
#                 calls back and kilnd's --timeout deploying=... fails it with the reason
#   dnsmasq       dnsmasq killed mid-run: kilnd starts a new one
#   unknown-mac   a VM whose MAC kilnd does not know gets no DHCP lease (and /boot says
#                 "nothing to boot", as for any caller kilnd has nothing for)
#   virtual       a cpu-lab virtual node on lab-host deployed, validated, undeployed
#   cloud         a tenant's `kiln cluster up` of debian-12-cloud (a distro qcow2, cloud-init,
#                 no kiln-agent) on one bare-metal and one virtual node, then real ssh through
#                 the cluster's ssh_config, verifying host keys; wrong keys refused
#
# Usage: tests/e2e/lab/lab_e2e.sh [STEP...]
#   STEPs: up manage inspect provide deploy undeploy virtual cloud bad-checksum no-callback dnsmasq
#          unknown-mac down; none = all of them in that order. Steps can be run one at a
#          time against a lab that is already up (the state is in the lab).
# Environment: KILN_BUILD_DIR (kilnd, kiln-agent, kiln-vbmc; default build/release),
#   KILN_LAB_DIR, KILN_E2E_KEEP=1 (leave the lab up at the end, even on failure),
#   KILN_E2E_DEPLOY_TIMEOUT (kilnd's --timeout deploying=, default 600 s: a demo-os deploy
#   takes about a minute under TCG, debian-12-cloud's several), KILN_E2E_NO_CALLBACK_TIMEOUT
#   (the one no-callback restarts kilnd with, default 20 s: the VM is cut off before it can
#   call back, so any timeout proves the path; a longer one only keeps its TCG vCPU busy).
# Exit: 0 pass, 1 fail, 77 skipped (not root, no qemu, no network namespaces).
set -euo pipefail
cd "$(dirname "$0")/../../.."
export KILN_BUILD_DIR=${KILN_BUILD_DIR:-build/release}
export KILN_LAB_DIR=${KILN_LAB_DIR:-var/lab}
DEPLOY_TIMEOUT=${KILN_E2E_DEPLOY_TIMEOUT:-600}
# no-callback waits for the deploying timeout to fire: it restarts kilnd with this one.
NO_CALLBACK_TIMEOUT=${KILN_E2E_NO_CALLBACK_TIMEOUT:-20}
export KILN_LAB_KILND_ARGS="--timeout deploying=$DEPLOY_TIMEOUT --multinode-collective tcp ${KILN_LAB_KILND_ARGS:-}"
LAB=$(realpath -m "$KILN_LAB_DIR")
NODES=(kiln-vm-1 kiln-vm-2)
MACS=(52:54:00:77:00:01 52:54:00:77:00:02)
T0=$(date +%s)

log() { echo "[$(($(date +%s) - T0))s] e2e: $*" >&2; }
fail() {
  log "FAIL: $*"
  for n in "${NODES[@]}"; do
    echo "--- $n console (last 30 lines)" >&2
    tail -n 30 "$LAB/vms/$n.console" 2>/dev/null | tr -d '\r' | sed 's/\x1b\[[0-9;?]*[a-zA-Z]//g' >&2 || true
  done
  echo "--- kilnd log (last 40 lines)" >&2
  tail -n 40 "$LAB/run/kilnd.log" >&2 2>/dev/null || true
  exit 1
}

if [ "$(id -u)" -ne 0 ]; then echo "SKIP: the lab e2e test needs root (network namespaces, libvirtd)"; exit 77; fi
if ! why=$(scripts/lab check 2>&1); then echo "SKIP: $why"; exit 77; fi

env_get() { grep "^$1=" "$LAB/env" | cut -d= -f2-; }
api() {
  curl -sS --max-time 30 -H "Authorization: Bearer $(env_get KILN_TOKEN)" \
    -H 'Content-Type: application/json' "$@"
}
URL() { env_get KILN_URL; }
node() { api "$(URL)/v1/nodes/$1"; }
state_of() { node "$1" | jq -r .provision_state; }
target() { # target NODE BODY
  local code
  code=$(api -o /tmp/e2e-target.$$ -w '%{http_code}' -X PUT "$(URL)/v1/nodes/$1/states/provision" -d "$2")
  [ "$code" = 202 ] || fail "PUT $1 provision $2 -> $code $(cat /tmp/e2e-target.$$)"
}
# wait_state NODE STATE SECONDS: waits until NODE is in STATE with no step running.
wait_state() {
  local n=$1 want=$2 limit=$3 end s j last=""
  end=$(($(date +%s) + limit))
  while [ "$(date +%s)" -lt "$end" ]; do
    j=$(node "$n")
    s=$(echo "$j" | jq -r '.provision_state + " " + (.provision_step // "")')
    if [ "$s" != "$last" ]; then log "$n: $s"; last=$s; fi
    if [ "$(echo "$j" | jq -r .provision_state)" = "$want" ]; then echo "$j"; return 0; fi
    case "$(echo "$j" | jq -r .provision_state)" in
      *_failed|quarantined) [ "$want" = "${want%_failed}" ] && fail "$n went to $s: $(echo "$j" | jq -r .last_error)" ;;
    esac
    sleep 2
  done
  fail "$n did not reach $want in ${limit}s (is $s)"
}
disk() { echo "$LAB/vms/$1.raw"; }
# The raw disk has no MBR boot signature and no GPT header.
assert_no_partition_table() {
  local d sig gpt
  d=$(disk "$1")
  sig=$(dd if="$d" bs=1 skip=510 count=2 status=none | od -An -tx1 | tr -d ' ')
  gpt=$(dd if="$d" bs=1 skip=512 count=8 status=none | tr -d '\000')
  [ "$sig" != 55aa ] || fail "$1: the disk still has an MBR signature after cleaning"
  [ "$gpt" != "EFI PART" ] || fail "$1: the disk still has a GPT header after cleaning"
  log "$1: disk has no partition table"
}
# transitions NODE: "from>to" lines of NODE's provision events, oldest first.
transitions() {
  local id
  id=$(node "$1" | jq -r .id)
  api "$(URL)/v1/events?limit=1000" |
    jq -r --arg id "$id" --arg name "$1" '(.events // .)[] | select(.node == $id or .node == $name)
      | select(.type == "provision.transition") | "\(.from)>\(.to)"'
}
assert_events() { # assert_events NODE from>to...
  local n=$1 t have
  shift
  have=$(transitions "$n")
  for t in "$@"; do
    echo "$have" | grep -qx "$t" || fail "$n: no provision.transition event $t (have: $(echo $have))"
  done
  log "$n: events $*"
}
both() { # both FUNCTION: runs FUNCTION NODE for each node in parallel, fails if one fails
  local pids=() n rc=0
  for n in "${NODES[@]}"; do "$1" "$n" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  [ $rc -eq 0 ] || fail "$1 failed for a node"
}

# debian-12-cloud is built and registered by step cloud, not by `up`: under make test,
# e2e/cloud-image builds the same image (images/build-cloud-image, one builder at a time)
# while the lab's first steps run, so neither test waits for the other's build.
step_up() {
  KILN_LAB_CLOUD_IMAGE=0 scripts/lab up 2 >/dev/null
  for n in "${NODES[@]}"; do
    [ "$(state_of "$n")" != null ] || fail "$n is not enrolled"
  done
  log "lab up at $(URL)"
}

manage_one() { target "$1" '{"target":"manage"}'; wait_state "$1" manageable 120 >/dev/null; }
step_manage() { both manage_one; }

inspect_one() {
  local n=$1 inv size mac want_size i
  target "$n" '{"target":"inspect"}'
  wait_state "$n" manageable 600 >/dev/null
  inv=$(api "$(URL)/v1/nodes/$n/inventory")
  want_size=$(stat -c %s "$(disk "$n")")
  size=$(echo "$inv" | jq '[.. | objects | select(has("size_bytes")) | .size_bytes] | max // 0')
  [ "$size" = "$want_size" ] || fail "$n: inventory disk size $size, the VM's disk is $want_size: $inv"
  i=$([ "$n" = kiln-vm-1 ] && echo 0 || echo 1)
  mac=${MACS[$i]}
  echo "$inv" | grep -qi "$mac" || fail "$n: inventory does not list MAC $mac: $inv"
  log "$n: inventory has the ${size}-byte disk and $mac"
}
step_inspect() { both inspect_one; }

provide_one() {
  target "$1" '{"target":"provide"}'
  wait_state "$1" available 900 >/dev/null
  assert_no_partition_table "$1"
}
step_provide() { both provide_one; }

deploy_one() {
  local n=$1 img sha size t0 got
  img=$(api "$(URL)/v1/images/demo-os")
  sha=$(echo "$img" | jq -r .sha256)
  size=$(echo "$img" | jq -r .size)
  t0=$(date +%s)
  : >"$LAB/e2e-$n.phases"
  target "$n" '{"target":"deploy","image":"demo-os","allocation":"e2e-job"}'
  # Record when each step starts (docs/benchmarks.md: time from deploy to active per phase).
  local last="" s end=$(($(date +%s) + DEPLOY_TIMEOUT + 60)) j
  while [ "$(date +%s)" -lt "$end" ]; do
    j=$(node "$n")
    s=$(echo "$j" | jq -r '.provision_state + "/" + (.provision_step // "")')
    if [ "$s" != "$last" ]; then echo "$(($(date +%s) - t0)) $s" >>"$LAB/e2e-$n.phases"; log "$n: $s"; last=$s; fi
    case "$s" in
      active/*) break ;;
      deploy_failed/*|quarantined/*) fail "$n: deploy failed: $(echo "$j" | jq -r .last_error)" ;;
    esac
    sleep 1
  done
  [ "${last%%/*}" = active ] || fail "$n: not active after deploy (is $last)"
  log "$n: active after $(($(date +%s) - t0)) s"
  grep -aq 'kiln-init\[os\]' "$LAB/vms/$n.console" || fail "$n: the demo OS's init never ran (console)"
  # The image is on the disk as written but for the MBR's partition table (bytes 446-509),
  # where write_config_drive added the cidata partition, which lies past the image.
  got=$( { head -c 446 "$(disk "$n")"; head -c 512 "$LAB/images/demo-os.img" | tail -c 66;
           head -c "$size" "$(disk "$n")" | tail -c +513; } | sha256sum | cut -c1-64)
  [ "$got" = "$sha" ] || fail "$n: the disk's first $size bytes (partition table aside) hash to $got, the image is $sha"
  log "$n: disk holds demo-os (sha256 $sha)"
  assert_config_drive "$n"
  assert_addresses "$n"
  assert_validated "$n" multinode
}
# assert_addresses NODE: the demo OS's agent reported the OS's address, which is one
# dnsmasq leased to the VM's MAC (the independent record), and the node's ssh login is
# demo-os's user (root, the default) at it.
assert_addresses() {
  local n=$1 i mac leased j ssh
  i=$([ "$n" = kiln-vm-1 ] && echo 0 || echo 1)
  mac=${MACS[$i]}
  leased=$(awk -v m="$mac" 'tolower($2) == m {print $3}' "$LAB/kilnd/dnsmasq/leases" | sort -u)
  [ -n "$leased" ] || fail "$n: dnsmasq has no lease for $mac: $(cat "$LAB/kilnd/dnsmasq/leases" 2>&1)"
  j=$(node "$n")
  ssh=$(echo "$j" | jq -r '.ssh // ""')
  echo "$leased" | grep -qxF "${ssh#root@}" && [ "${ssh%%@*}" = root ] ||
    fail "$n: ssh is '$ssh', addresses $(echo "$j" | jq -c .addresses); dnsmasq leased $mac: $(echo $leased)"
  log "$n: the OS reported $(echo "$j" | jq -c .addresses), ssh $ssh"
}
# assert_config_drive NODE: the disk's last partition is the config drive (ISO 9660
# labelled cidata, sfdisk finds the table sound), and the demo OS mounted it at boot and
# said so on its console with the node's name as hostname. (The lab's allocation label
# names no allocation record, so the drive carries no keys: "0 ssh keys".)
assert_config_drive() {
  local n=$1 d start
  d=$(disk "$n")
  sfdisk --verify "$d" >/dev/null 2>&1 || fail "$n: sfdisk --verify fails after the config drive: $(sfdisk --verify "$d" 2>&1)"
  start=$(sfdisk --dump "$d" | awk -F'[=,]' '/type=83/ {gsub(/ /, "", $2); print $2}' | tail -1)
  [ -n "$start" ] || fail "$n: no config drive partition (type 83): $(sfdisk --dump "$d")"
  blkid -p -O $((start * 512)) "$d" | grep -q 'LABEL="cidata"' ||
    fail "$n: the partition at sector $start is not labelled cidata: $(blkid -p -O $((start * 512)) "$d")"
  grep -aq "kiln-init\[os\]: config drive: /dev/[a-z0-9]*, hostname $n, 0 ssh keys installed" "$LAB/vms/$n.console" ||
    fail "$n: the demo OS did not report its config drive: $(grep -a 'config drive' "$LAB/vms/$n.console")"
  log "$n: config drive at sector $start, read by the demo OS"
}
# assert_validated NODE [multinode]: the pre-hand-off report of the cpu-lab plan was
# stored and its checks measured something; with "multinode", nccl_multinode ran across
# both lab nodes (the tcp collective) and passed.
assert_validated() {
  local rep id mn
  rep=$(api "$(URL)/v1/nodes/$1/validations" | jq -c '.validations[0]')
  [ "$(echo "$rep" | jq -r .result)" = pass ] || fail "$1: newest validation is not a pass: $rep"
  id=$(echo "$rep" | jq -r .id)
  rep=$(api "$(URL)/v1/validations/$id")
  for c in jitter nvme_read; do
    [ "$(echo "$rep" | jq -r --arg c "$c" '.report.checks[] | select(.name == $c) | .status')" = pass ] ||
      fail "$1: check $c did not pass in $id: $(echo "$rep" | jq -c '.report.checks')"
  done
  log "$1: validated ($(echo "$rep" | jq -r '.report.checks[] | select(.name == "jitter" or .name == "nvme_read") | "\(.name)=\(.value) \(.unit)"' | tr '\n' ' '))"
  [ "${2:-}" = multinode ] || return 0
  mn=$(echo "$rep" | jq -c '.report.checks[] | select(.name == "nccl_multinode")')
  [ "$(echo "$mn" | jq -r '.status + " " + .details.collective + " " + (.details.members | length | tostring)')" = "pass tcp 2" ] ||
    fail "$1: nccl_multinode did not pass across both nodes: $mn"
  log "$1: nccl_multinode rank $(echo "$mn" | jq -r .details.rank) of 2: $(echo "$mn" | jq -r .value) GB/s busbw (tcp test collective, VM to VM)"
}
step_deploy() { both deploy_one; }

undeploy_one() {
  target "$1" '{"target":"undeploy"}'
  wait_state "$1" available 900 >/dev/null
  assert_no_partition_table "$1"
  assert_events "$1" enroll\>verifying verifying\>manageable manageable\>inspecting \
    inspecting\>manageable manageable\>cleaning cleaning\>burning_in burning_in\>available \
    available\>deploying deploying\>validating validating\>active active\>cleaning
}
step_undeploy() { both undeploy_one; }

step_bad_checksum() {
  local n=kiln-vm-1 j
  api -X DELETE "$(URL)/v1/images/demo-os-badsum" >/dev/null 2>&1 || true
  api -fS -X POST "$(URL)/v1/images" -d "$(jq -n --arg s "$LAB/images/demo-os.img" \
    --argjson size "$(stat -c %s "$LAB/images/demo-os.img")" \
    '{name: "demo-os-badsum", kind: "os", format: "raw", sha256: ("0" * 64), size: $size, source: $s}')" \
    >/dev/null || fail "cannot register demo-os-badsum"
  target "$n" '{"target":"deploy","image":"demo-os-badsum"}'
  j=$(wait_state "$n" deploy_failed 600)
  echo "$j" | jq -r .last_error | grep -qi 'sha256' || fail "$n: deploy_failed without the checksum reason: $(echo "$j" | jq -r .last_error)"
  log "$n: deploy_failed: $(echo "$j" | jq -r .last_error)"
  target "$n" '{"target":"undeploy"}'
  wait_state "$n" available 900 >/dev/null
  assert_no_partition_table "$n"
}

# The VM's tap device; a shut-off domain lists "-", which counts as none yet.
vm_tap() { virsh -q -c "$(env_get KILN_LAB_LIBVIRT_URI)" domiflist "$1" | awk '$1 != "-" {print $1}' | head -1; }

# kilnd_restart ARGS: the lab's kilnd stopped and started again with ARGS as its extra flags
# (same data dir, so nodes, images and the lab's token stay; `scripts/lab up` starts only
# what is missing).
kilnd_restart() {
  local pid
  pid=$(cat "$LAB/run/kilnd.pid")
  kill -TERM "$pid"
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && fail "kilnd $pid did not stop on SIGTERM"
  KILN_LAB_CLOUD_IMAGE=0 KILN_LAB_KILND_ARGS="$1" scripts/lab up 2 >/dev/null || fail "the lab's kilnd did not come back"
}

step_no_callback() {
  local n=kiln-vm-2 j tap
  kilnd_restart "--timeout deploying=$NO_CALLBACK_TIMEOUT --multinode-collective tcp"
  log "kilnd restarted with --timeout deploying=$NO_CALLBACK_TIMEOUT"
  target "$n" '{"target":"deploy","image":"demo-os"}'
  # Cut the NIC off the bridge once the VM is running: it can neither PXE boot nor reach kilnd.
  for _ in $(seq 1 60); do tap=$(vm_tap "$n" 2>/dev/null || true); [ -n "$tap" ] && break; sleep 1; done
  [ -n "$tap" ] || fail "$n: no tap device"
  ip netns exec kilnlab ip link set "$tap" nomaster
  # Paused for the wait: cut off, it can do nothing kilnd would see, and under TCG its
  # vCPU would spin in iPXE's retries for the whole timeout.
  virsh -q -c "$(env_get KILN_LAB_LIBVIRT_URI)" suspend "$n" >/dev/null || fail "$n: cannot pause the VM"
  log "$n: $tap cut off the bridge, VM paused; waiting for the deploying timeout (${NO_CALLBACK_TIMEOUT}s)"
  j=$(wait_state "$n" deploy_failed $((NO_CALLBACK_TIMEOUT + 120)))
  echo "$j" | jq -r .last_error | grep -qi 'timeout\|timed out' || fail "$n: deploy_failed without a timeout reason: $(echo "$j" | jq -r .last_error)"
  log "$n: deploy_failed: $(echo "$j" | jq -r .last_error)"
  # Running again before the undeploy powers it (kilnd may have powered it off meanwhile).
  virsh -q -c "$(env_get KILN_LAB_LIBVIRT_URI)" resume "$n" >/dev/null 2>&1 || true
  tap=$(vm_tap "$n" 2>/dev/null || true)
  [ -z "$tap" ] || ip netns exec kilnlab ip link set "$tap" master kilnbr0 || true
  target "$n" '{"target":"undeploy"}'
  wait_state "$n" available 900 >/dev/null
}

dnsmasq_pid() {
  local p
  for p in $(ip netns pids kilnlab); do
    [ "$(cat /proc/$p/comm 2>/dev/null)" = dnsmasq ] && { echo "$p"; return 0; }
  done
  return 1
}
step_dnsmasq() {
  local old new
  old=$(dnsmasq_pid) || fail "no dnsmasq in the lab"
  kill -KILL "$old"
  for _ in $(seq 1 30); do
    new=$(dnsmasq_pid || true)
    [ -n "$new" ] && [ "$new" != "$old" ] && break
    sleep 1
  done
  [ -n "${new:-}" ] && [ "$new" != "$old" ] || fail "dnsmasq was not restarted after kill -9"
  log "dnsmasq $old killed, kilnd restarted it as $new"
}

step_unknown_mac() {
  local uri name=kiln-vm-stranger mac=52:54:00:77:00:ff body
  uri=$(env_get KILN_LAB_LIBVIRT_URI)
  # Unknown MACs get the one "nothing to boot" script every caller without a boot gets.
  body=$(curl -sS --max-time 10 "$(URL)/boot/$mac.ipxe")
  echo "$body" | grep -q 'nothing to boot for this machine' || fail "GET /boot/$mac.ipxe: $body"
  if echo "$body" | grep -q 'kiln.token'; then fail "GET /boot/$mac.ipxe carries a token"; fi
  # A diskless UEFI VM on the lab bridge: it only has to ask for an address (UEFI because
  # OVMF puts iPXE's messages on the serial console; the BIOS ROM shows them on VGA only).
  cat >"$LAB/$name.xml" <<XML
<domain type='qemu'>
  <name>$name</name>
  <memory unit='MiB'>256</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
    <loader readonly='yes' type='pflash'>/usr/share/OVMF/OVMF_CODE_4M.fd</loader>
    <nvram template='/usr/share/OVMF/OVMF_VARS_4M.fd'>$LAB/vms/$name.vars.fd</nvram>
    <boot dev='network'/>
  </os>
  <features><acpi/><apic/></features>
  <devices>
    <interface type='bridge'><mac address='$mac'/><source bridge='kilnbr0'/><model type='virtio'/></interface>
    <serial type='file'><source path='$LAB/vms/$name.console'/><target port='0'/></serial>
    <memballoon model='none'/>
  </devices>
</domain>
XML
  virsh -q -c "$uri" create "$LAB/$name.xml" >/dev/null || fail "cannot start $name"
  # Until iPXE has finished configuring the NIC ("Configuring (net0 ...)... ok" or an
  # error after the dots), then 10 s more for anything it would fetch with what it got.
  local end=$(($(date +%s) + 120))
  until tr -d '\r' <"$LAB/vms/$name.console" 2>/dev/null | grep -aEq 'Configuring \(net0 [^)]*\)\.* +[[:alnum:]]'; do
    [ "$(date +%s)" -lt "$end" ] || break
    sleep 2
  done
  sleep 10
  virsh -q -c "$uri" destroy "$name" >/dev/null 2>&1 || true
  tr -d '\r' <"$LAB/vms/$name.console" | grep -aq 'Configuring' || fail "$name: iPXE never tried DHCP"
  if tr -d '\r' <"$LAB/vms/$name.console" | grep -aq '/boot/'; then fail "$name (unknown MAC) fetched a boot script"; fi
  if grep -qi "$mac" "$LAB/kilnd/dnsmasq/leases" 2>/dev/null; then fail "$name (unknown MAC) got a DHCP lease"; fi
  log "$name ($mac): iPXE got no DHCP answer"
}

# Issue 7 on the lab: a virtual node from the cpu-lab profile on lab-host, deployed with
# demo-os (no PXE: the OS agent finds kilnd by DHCP option 224), validated, handed over,
# then undeployed with nothing left behind (domain, volume, port, capacity).
step_virtual() {
  local uri id dom code free_before free_after
  uri=$(env_get KILN_LAB_LIBVIRT_URI)
  free_before=$(api "$(URL)/v1/hosts/lab-host" | jq -c .free)
  code=$(api -o /tmp/e2e-vnode.$$ -w '%{http_code}' -X POST "$(URL)/v1/nodes" \
    -d '{"name":"e2e-vnode","kind":"virtual","profile":"cpu-lab","host":"lab-host","ssh_keys":["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKilnE2eTestKeyOnly e2e@kiln"]}')
  [ "$code" = 201 ] || fail "POST virtual node -> $code $(cat /tmp/e2e-vnode.$$)"
  id=$(jq -r .id /tmp/e2e-vnode.$$)
  dom="kiln-$id"
  target e2e-vnode '{"target":"deploy","image":"demo-os"}'
  # NoCloud seed (what a cloud image's cloud-init reads through the SMBIOS serial): bound to
  # the VM's DHCP lease, so this host (not the VM) gets the 404 an unknown node gets; the VM's
  # own agent reads kiln-agent.env from it (its os secret) or the deploy never ends.
  local doc code
  for doc in user-data meta-data kiln-agent.env; do
    code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 10 "$(URL)/v1/nocloud/$id/$doc")
    [ "$code" = 404 ] || fail "NoCloud $doc served to the host, not only the VM's lease: HTTP $code"
  done
  # The deploy defines the domain after it has copied the image into the
  # volume: wait for it rather than race it.
  local xml="" tries
  for tries in $(seq 1 120); do
    xml=$(virsh -q -c "$uri" dumpxml "$dom" 2>/dev/null) && break
    sleep 0.5
  done
  [ -n "$xml" ] || fail "$dom was not defined within 60 s of the deploy"
  echo "$xml" | grep -q "ds=nocloud-net;s=.*/v1/nocloud/$id/" ||
    fail "$dom has no NoCloud SMBIOS serial"
  wait_state e2e-vnode active $((DEPLOY_TIMEOUT + 120)) >/dev/null
  virsh -q -c "$uri" domstate "$dom" | grep -q running || fail "virtual node $dom is not running"
  assert_validated e2e-vnode
  target e2e-vnode '{"target":"undeploy"}'
  wait_state e2e-vnode available 300 >/dev/null
  if virsh -q -c "$uri" list --all --name | grep -qx "$dom"; then fail "$dom still defined after undeploy"; fi
  [ "$(curl -sS -o /dev/null -w '%{http_code}' "$(URL)/v1/nocloud/$id/user-data")" = 404 ] ||
    fail "NoCloud user-data still served after undeploy"
  if ls "$LAB/pool" 2>/dev/null | grep -q "$id"; then fail "volume of $dom left in $LAB/pool"; fi
  [ "$(api "$(URL)/v1/ports?node=$id" | jq '.ports | length')" = 0 ] || fail "port of $dom left behind"
  free_after=$(api "$(URL)/v1/hosts/lab-host" | jq -c .free)
  [ "$free_after" = "$free_before" ] || fail "lab-host capacity not returned: $free_before -> $free_after"
  api -X DELETE "$(URL)/v1/nodes/e2e-vnode" >/dev/null
  log "virtual node: active, validated, undeployed with nothing left behind"
}

# Hand-off to a distro cloud image (debian-12-cloud: Debian's own cloud-init, no kiln-agent;
# images/build-cloud-image): a tenant's `kiln cluster up` of one bare-metal and one virtual
# node. Bare metal goes PXE -> ramdisk (validated there) -> qcow2 written as raw -> config
# drive -> the OS's cloud-init phones home with its host keys; the virtual node reads the
# NoCloud seed. Then real ssh through the cluster's ssh_config logs in with the tenant's key
# and checks each node's host key against known_hosts (StrictHostKeyChecking yes): hostname,
# the tenant's user_data marker. A wrong key is refused by sshd, a wrong host key by ssh.
# `cluster down` returns the bare-metal node to the pool, cleaned.
CLOUD_DIR=""
cloud_ssh() { # cloud_ssh HOST KEY CMD...: ssh from the lab's network namespace
  local host=$1 key=$2
  shift 2
  ip netns exec kilnlab ssh -F "$CLOUD_DIR/out/ssh_config" -i "$key" -o IdentitiesOnly=yes \
    -o BatchMode=yes -o ConnectTimeout=20 "$host" "$@"
}
# phases NODE T0: "<seconds since T0> <step or state>" for NODE's provision steps and
# transitions since T0 (docs/benchmarks.md, request to ssh per phase).
phases() {
  local id
  id=$(node "$1" | jq -r .id)
  api "$(URL)/v1/events?node=$id&limit=1000" |
    jq -r --arg id "$id" '(.events // .)[] | select(.node == $id)
      | select(.type == "provision.step" or .type == "provision.transition")
      | "\(.ts) \(if .type == "provision.step" then .detail.step else .to end)"' |
    while read -r ts what; do
      t=$(( $(date -d "$ts" +%s) - $2 ))
      [ "$t" -ge 0 ] && echo "$t $what"
    done
}
step_cloud() {
  local img state end tok code t0 kiln="$KILN_BUILD_DIR/cli/kiln" marker hosts h out n bm waited
  CLOUD_DIR="$LAB/e2e-cloud"
  rm -rf "$CLOUD_DIR"
  mkdir -p "$CLOUD_DIR"
  # Built (or found built) and registered as a qcow2: converting until kilnd has made its
  # raw+sparse.
  scripts/lab cloud-image >/dev/null || fail "scripts/lab cloud-image failed"
  end=$(($(date +%s) + 600))
  while :; do
    img=$(api "$(URL)/v1/images/debian-12-cloud")
    state=$(echo "$img" | jq -r '.state // .status')
    [ "$state" = ready ] && break
    [ "$state" = failed ] && fail "debian-12-cloud failed: $(echo "$img" | jq -r .last_error)"
    [ "$(date +%s)" -lt "$end" ] || fail "debian-12-cloud not ready in 600 s: $img"
    sleep 2
  done
  log "debian-12-cloud: $(echo "$img" | jq -c '{format, state, virtual_size, ssh_user}')"
  code=$(api -o /dev/null -w '%{http_code}' -X POST "$(URL)/v1/tenants" -d '{"name": "e2e-cloud-tenant",
    "quotas": [{"profile": "cpu-lab", "kind": "baremetal", "max_nodes": 1},
               {"profile": "cpu-lab", "kind": "virtual", "max_nodes": 1}]}')
  [ "$code" = 201 ] || [ "$code" = 409 ] || fail "POST /v1/tenants -> $code"
  tok=$(api -X POST "$(URL)/v1/tokens" -d "{\"name\": \"e2e-cloud-$$\", \"role\": \"tenant\", \"tenant\": \"e2e-cloud-tenant\"}" | jq -r .token)
  [ -n "$tok" ] && [ "$tok" != null ] || fail "no tenant token"
  ssh-keygen -q -t ed25519 -N '' -C e2e-tenant -f "$CLOUD_DIR/id_tenant"
  ssh-keygen -q -t ed25519 -N '' -C e2e-stranger -f "$CLOUD_DIR/id_wrong"
  marker="kiln-e2e-$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  jq -n --arg k "$(cat "$CLOUD_DIR/id_tenant.pub")" --arg m "$marker" '{name: "e2e-cloud", lease_seconds: 3600,
    ssh_keys: [$k],
    user_data: ("#cloud-config\nruncmd:\n  - [sh, -c, \"echo " + $m + " >/var/tmp/kiln-marker\"]\n"),
    groups: [{name: "metal", profile: "cpu-lab", kind: "baremetal", count: 1, image: "debian-12-cloud"},
             {name: "vm", profile: "cpu-lab", kind: "virtual", count: 1, image: "debian-12-cloud"}]}' \
    >"$CLOUD_DIR/cluster.json"
  t0=$(date +%s)
  KILN_URL=$(URL) KILN_TOKEN=$tok "$kiln" cluster up -f "$CLOUD_DIR/cluster.json" --wait --timeout 20m \
    --output-dir "$CLOUD_DIR/out" >"$CLOUD_DIR/up.log" 2>&1 ||
    fail "kiln cluster up failed: $(tail -n 20 "$CLOUD_DIR/up.log")"
  log "cloud: cluster ready after $(($(date +%s) - t0)) s"
  [ -s "$CLOUD_DIR/out/known_hosts" ] || fail "cluster up wrote no known_hosts: $(cat "$CLOUD_DIR/up.log")"
  grep -q 'StrictHostKeyChecking yes' "$CLOUD_DIR/out/ssh_config" ||
    fail "ssh_config does not pin host keys: $(cat "$CLOUD_DIR/out/ssh_config")"
  hosts=$(awk '$1 == "Host" {print $2}' "$CLOUD_DIR/out/ssh_config")
  [ "$(echo "$hosts" | wc -w)" = 2 ] || fail "ssh_config has hosts '$(echo $hosts)', want 2"
  local t_ssh=""
  for h in $hosts; do
    # What the distro's cloud-init made of Kiln's seed: finished without errors, the
    # hostname, the tenant's user_data, the default user's sudo, root locked, and a
    # network-config that let systemd-networkd-wait-online finish at once (a wait that ran
    # out its 2 minutes means no link counted as configured).
    out=$(cloud_ssh "$h" "$CLOUD_DIR/id_tenant" 'cloud-init status --wait >/dev/null; hostname; cat /var/tmp/kiln-marker
        cloud-init status; tr -d " \n" </run/cloud-init/result.json; echo
        sudo -n true && echo sudo=ok; echo "root_locked=$(sudo -n grep -c "^root:[!*]" /etc/shadow)"
        echo "wait_online_s=$(( ($(systemctl show -P ExecMainExitTimestampMonotonic systemd-networkd-wait-online.service) - $(systemctl show -P ExecMainStartTimestampMonotonic systemd-networkd-wait-online.service)) / 1000000 ))"') ||
      fail "$h: ssh with the tenant's key and the pinned host key failed: $out"
    [ "$(echo "$out" | sed -n 1p)" = "$h" ] || fail "$h: hostname is '$(echo "$out" | sed -n 1p)'"
    [ "$(echo "$out" | sed -n 2p)" = "$marker" ] || fail "$h: the tenant's user_data marker is '$(echo "$out" | sed -n 2p)'"
    echo "$out" | grep -qx 'status: done' || fail "$h: cloud-init did not finish cleanly: $out"
    echo "$out" | grep -q '"errors":\[\]' || fail "$h: cloud-init reported errors: $out"
    echo "$out" | grep -qx 'sudo=ok' || fail "$h: the default user has no passwordless sudo: $out"
    echo "$out" | grep -qx 'root_locked=1' || fail "$h: root's password is not locked: $out"
    waited=$(echo "$out" | sed -n 's/^wait_online_s=//p')
    (( ${waited:-999} < 60 )) || fail "$h: systemd-networkd-wait-online took ${waited}s: $out"
    [ -n "$t_ssh" ] || t_ssh=$(($(date +%s) - t0))
    log "cloud: $h: ssh as $(awk -v h="$h" '$1 == "Host" {x = ($2 == h)} x && $1 == "User" {print $2}' "$CLOUD_DIR/out/ssh_config") verified its host key; cloud-init done without errors, hostname and user_data marker right"
    if out=$(cloud_ssh "$h" "$CLOUD_DIR/id_wrong" true 2>&1); then fail "$h: sshd let in a key that is not the tenant's"; fi
    echo "$out" | grep -q 'Permission denied' || fail "$h: a wrong key failed, but not by sshd: $out"
  done
  # A host key that is not the one the OS posted: ssh refuses before any login.
  h=$(echo "$hosts" | head -1)
  ssh-keygen -q -t ed25519 -N '' -f "$CLOUD_DIR/fake_host_key"
  awk -v k="$(cut -d' ' -f1,2 "$CLOUD_DIR/fake_host_key.pub")" '{print $1, k}' "$CLOUD_DIR/out/known_hosts" \
    >"$CLOUD_DIR/out/known_hosts.wrong"
  if out=$(ip netns exec kilnlab ssh -F "$CLOUD_DIR/out/ssh_config" -o UserKnownHostsFile="$CLOUD_DIR/out/known_hosts.wrong" \
      -i "$CLOUD_DIR/id_tenant" -o IdentitiesOnly=yes -o BatchMode=yes -o ConnectTimeout=20 "$h" true 2>&1); then
    fail "$h: ssh logged in against a host key the OS never posted"
  fi
  echo "$out" | grep -q 'Host key verification failed' || fail "$h: wrong host key, but: $out"
  log "cloud: a stranger's key refused by sshd; a host key the OS never posted refused by ssh"
  bm=$(jq -r '.nodes[] | select(.kind == "baremetal") | .name' "$CLOUD_DIR/out/cluster.json")
  phases "$bm" "$t0" >"$LAB/e2e-cloud.phases"
  echo "$t_ssh ssh" >>"$LAB/e2e-cloud.phases"
  log "cloud: $bm phases (s since the request): $(tr '\n' ' ' <"$LAB/e2e-cloud.phases")"
  KILN_URL=$(URL) KILN_TOKEN=$tok "$kiln" cluster down e2e-cloud --wait >>"$CLOUD_DIR/up.log" 2>&1 ||
    fail "kiln cluster down failed: $(tail -n 5 "$CLOUD_DIR/up.log")"
  wait_state "$bm" available 900 >/dev/null
  assert_no_partition_table "$bm"
  log "cloud: cluster down; $bm cleaned and available"
}

step_down() { [ "${KILN_E2E_KEEP:-0}" = 1 ] || scripts/lab down; }

ALL=(up manage inspect provide deploy undeploy virtual cloud bad-checksum no-callback dnsmasq unknown-mac down)
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=("${ALL[@]}")
if [ $# -eq 0 ] && [ "${KILN_E2E_KEEP:-0}" != 1 ]; then trap 'scripts/lab down >/dev/null 2>&1 || true' EXIT; fi
for s in "${steps[@]}"; do
  log "== $s"
  "step_${s//-/_}"
done
log "PASS (${steps[*]})"
