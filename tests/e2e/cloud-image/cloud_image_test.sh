#!/usr/bin/env bash
# Proves that images/build-cloud-image makes an image the distro's cloud-init hands off:
# it builds the image, then boots it in qemu (TCG, as the lab's VMs) three times
#   bios       SeaBIOS, the NoCloud seed as a second disk (how a virtual node gets it)
#   uefi       OVMF, the same seed
#   partition  SeaBIOS, the seed as an ISO 9660 "cidata" partition at the end of the one
#              disk, laid out as Kiln's agent writes it (agent/deploy/config_drive_partition.h:
#              backup GPT moved to the disk's end, the partition 1 MiB-aligned ending at
#              LastUsableLBA, type Linux data, name "cidata")
# and in each: waits for sshd, verifies the host key against the one the VM printed on
# its serial console (cloud-init's keys_to_console: no trust on first use), logs in as
# "debian" with the key given in user-data and runs
#   cloud-init status --wait; hostname; cat /kiln-marker
# checking that cloud-init finished without errors from the NoCloud datasource, set the
# hostname, ran runcmd (the marker holds a per-run token), grew the root file system,
# and that another key is refused by sshd.
# Boot times (qemu start -> ssh login, and the guest's own systemd-analyze) are printed.
#
# Usage: tests/e2e/cloud-image/cloud_image_test.sh [bios] [uefi] [partition]   (none: all)
#        tests/e2e/cloud-image/cloud_image_test.sh build   (the image and its checks, no boot)
# Environment: KILN_IMAGES_DIR (default build/images), KILN_CLOUD_TEST_DIR (scratch, default
#   a temporary folder), KILN_CLOUD_BOOT_TIMEOUT (seconds per boot to ssh, default 600),
#   KILN_CLOUD_MEMORY_MIB (guest memory, default 1024; the lab's VMs have 512), KILN_CLOUD_KEEP=1
#   (keep the scratch folder).
# Exit: 0 pass, 1 fail, 77 skipped (not root, a tool missing, Debian's mirror unreachable).
set -euo pipefail
cd "$(dirname "$0")/../../.."
IMAGES=${KILN_IMAGES_DIR:-build/images}
BOOT_TIMEOUT=${KILN_CLOUD_BOOT_TIMEOUT:-600}
CASES=("$@")
[ ${#CASES[@]} -gt 0 ] || CASES=(bios uefi partition)
OVMF_CODE=/usr/share/OVMF/OVMF_CODE_4M.fd   # the pair the lab's UEFI VMs use
OVMF_VARS=/usr/share/OVMF/OVMF_VARS_4M.fd
T0=$(date +%s)

log() { echo "[$(($(date +%s) - T0))s] cloud-image: $*" >&2; }
skip() { echo "SKIP: $*"; exit 77; }

[ "$(id -u)" -eq 0 ] || skip "building the cloud image needs root (mmdebstrap's root mode)"
for t in mmdebstrap sgdisk qemu-img qemu-system-x86_64 genisoimage ssh ssh-keygen mkfs.ext4 debugfs mcopy; do
  command -v "$t" >/dev/null || skip "$t is not installed (scripts/install-deps)"
done
for f in "$OVMF_CODE" "$OVMF_VARS"; do [ -f "$f" ] || skip "$f missing (ovmf)"; done

if [ -n "${KILN_CLOUD_TEST_DIR:-}" ]; then
  DIR=$(realpath -m "$KILN_CLOUD_TEST_DIR"); rm -rf "$DIR"; mkdir -p "$DIR"
else
  DIR=$(mktemp -d /tmp/kiln-cloud-image.XXXXXX)
fi
QEMU_PID=""
stop_vm() {
  if [ -n "$QEMU_PID" ]; then
    kill "$QEMU_PID" 2>/dev/null || true
    wait "$QEMU_PID" 2>/dev/null || true
    QEMU_PID=""
  fi
}
cleanup() {
  stop_vm
  if [ "${KILN_CLOUD_KEEP:-0}" = 1 ]; then log "kept $DIR"; else rm -rf "$DIR"; fi
}
trap cleanup EXIT
CONSOLE=""
fail() {
  log "FAIL: $*"
  if [ -n "$CONSOLE" ] && [ -f "$CONSOLE" ]; then
    echo "--- serial console (last 60 lines)" >&2
    tail -n 60 "$CONSOLE" | tr -d '\r' | sed 's/\x1b\[[0-9;?]*[a-zA-Z]//g' >&2
  fi
  exit 1
}

# --- the image -----------------------------------------------------------------------------
tb=$(date +%s)
if ! IMG=$(images/build-cloud-image "$IMAGES" 2>"$DIR/build.log" | tail -n1); then
  if ! curl -sfI --max-time 15 http://deb.debian.org/debian/dists/bookworm/Release >/dev/null; then
    skip "deb.debian.org is unreachable, so the cloud image cannot be built"
  fi
  cat "$DIR/build.log" >&2
  fail "images/build-cloud-image failed"
fi
sed 's/^/  /' "$DIR/build.log" | tail -n 3 >&2
log "image $IMG ready in $(( $(date +%s) - tb ))s"
info=$(qemu-img info --output=json "$IMG")
grep -q '"format": "qcow2"' <<<"$info" || fail "$IMG is not a qcow2"
(cd "$(dirname "$IMG")" && sha256sum -c --quiet "$(basename "$IMG").sha256") || fail "sha256 mismatch"

# The disk's layout, read back from a raw copy (kept for the partition case).
RAW="$DIR/image.raw"
qemu-img convert -f qcow2 -O raw "$IMG" "$RAW"
table=$(sgdisk -p "$RAW")
grep -Eq '^ +14 +2048 +4095 .* EF02 ' <<<"$table" || fail "no 1 MiB BIOS boot partition 14: $table"
grep -Eq '^ +15 .* EF00 ' <<<"$table" || fail "no EFI system partition 15: $table"
grep -Eq '^ +1 .* 8300 ' <<<"$table" || fail "no Linux root partition 1: $table"
mdir -i "$RAW@@$((4096 * 512))" ::/EFI/BOOT/BOOTX64.EFI >/dev/null 2>&1 ||
  fail "the ESP has no EFI/BOOT/BOOTX64.EFI"

# Nothing in the image that would be the same on every node, or let anyone in: no SSH
# host keys (a shared key lets one node impersonate another), no password, an empty
# machine-id, no apt lists, no kiln-agent. Read from the root file system with debugfs.
rootfs="$RAW?offset=$((262144 * 512))"
in_image() { debugfs -R "$1" "$rootfs" 2>/dev/null; }
in_image 'ls /etc/ssh' | grep -q sshd_config || fail "cannot read /etc/ssh from the image"
! in_image 'ls /etc/ssh' | grep -q ssh_host_ || fail "the image carries SSH host keys"
in_image 'cat /etc/shadow' | grep -q '^root:[!*]' || fail "root has a password in the image"
! in_image 'cat /etc/shadow' | grep -Eq '^[^:]+:\$' || fail "an account has a password in the image"
in_image 'stat /etc/machine-id' | grep -q 'Size: 0$' || fail "/etc/machine-id is not empty"
! in_image 'ls /var/lib/apt/lists' | grep -q '_Packages' || fail "apt lists left in the image"
! in_image 'stat /usr/bin/kiln-agent' | grep -q 'Inode:' || fail "kiln-agent is in the image"

# --- the tenant's seed ---------------------------------------------------------------------
ssh-keygen -q -t ed25519 -N '' -C tenant -f "$DIR/key"
ssh-keygen -q -t ed25519 -N '' -C stranger -f "$DIR/wrong_key"
TOKEN=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
HOSTNAME_WANT=kiln-cloud-$(head -c 3 /dev/urandom | od -An -tx1 | tr -d ' \n')
mkdir -p "$DIR/seed"
cat >"$DIR/seed/meta-data" <<EOF
instance-id: iid-$TOKEN
local-hostname: $HOSTNAME_WANT
EOF
cat >"$DIR/seed/user-data" <<EOF
#cloud-config
users:
  - default
ssh_authorized_keys:
  - $(cat "$DIR/key.pub")
runcmd:
  - [sh, -c, "echo marker-$TOKEN > /kiln-marker"]
EOF
# The network-config Kiln's config drive carries (controller/tenancy/config_drive.cc,
# config_drive_network_config): DHCP on the node's port, matched by its MAC, not optional.
# It must bring the NIC up through the image's renderer (netplan) without stalling the boot
# in systemd-networkd-wait-online, or the ssh below comes late or never.
VM_MAC=52:54:00:6b:69:6c
cat >"$DIR/seed/network-config" <<EOF
version: 2
ethernets:
  kiln-port-0:
    match:
      macaddress: "$VM_MAC"
    dhcp4: true
EOF
genisoimage -quiet -output "$DIR/seed.iso" -volid cidata -joliet -rock "$DIR/seed" ||
  fail "genisoimage failed"

free_port() {  # a port nothing listens on (qemu's hostfwd takes a fixed one)
  local p
  while :; do
    p=$(( 20000 + RANDOM % 40000 ))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}

SSH_OPTS=()
ssh_vm() {  # ssh_vm KEY COMMAND...
  local key=$1; shift
  ssh -F /dev/null -i "$key" -p "$PORT" "${SSH_OPTS[@]}" -o BatchMode=yes -o ConnectTimeout=10 \
    -o IdentitiesOnly=yes debian@127.0.0.1 "$@"
}

# boot NAME FIRMWARE DISK [SEED]: starts qemu, waits for the host keys on the console and a
# login, checks what cloud-init did.
boot() {
  local name=$1 fw=$2 disk=$3 seed=${4:-} args start up out analyze fmt=qcow2
  CONSOLE="$DIR/$name.console"
  PORT=$(free_port)
  [[ $disk != *.raw ]] || fmt=raw
  args=(-accel tcg -machine q35 -m "${KILN_CLOUD_MEMORY_MIB:-1024}" -smp 1 -display none -no-reboot
        -serial "file:$CONSOLE" -monitor none
        -drive "file=$disk,if=virtio,cache=unsafe,format=$fmt"
        -netdev "user,id=n0,hostfwd=tcp:127.0.0.1:$PORT-:22" -device "virtio-net-pci,netdev=n0,mac=$VM_MAC")
  [ -z "$seed" ] || args+=(-drive "file=$seed,if=virtio,format=raw,readonly=on")
  if [ "$fw" = uefi ]; then
    cp "$OVMF_VARS" "$DIR/$name.vars.fd"
    args+=(-drive "if=pflash,format=raw,unit=0,readonly=on,file=$OVMF_CODE"
           -drive "if=pflash,format=raw,unit=1,file=$DIR/$name.vars.fd")
  fi
  start=$(date +%s)
  qemu-system-x86_64 "${args[@]}" 2>"$DIR/$name.qemu.log" &
  QEMU_PID=$!
  log "$name: booting ($fw, TCG) with ssh on port $PORT"

  # The host keys, as cloud-init's keys_to_console prints them on the serial console.
  while ! grep -q -- '-----END SSH HOST KEY KEYS-----' "$CONSOLE" 2>/dev/null; do
    kill -0 "$QEMU_PID" 2>/dev/null || fail "$name: qemu exited: $(cat "$DIR/$name.qemu.log")"
    (( $(date +%s) - start < BOOT_TIMEOUT )) || fail "$name: no host keys on the console after ${BOOT_TIMEOUT}s"
    sleep 2
  done
  tr -d '\r' <"$CONSOLE" | sed -n '/-----BEGIN SSH HOST KEY KEYS-----/,/-----END SSH HOST KEY KEYS-----/p' |
    grep -E '^(ssh-|ecdsa-)' | sed "s/^/[127.0.0.1]:$PORT /" >"$DIR/$name.known_hosts"
  [ -s "$DIR/$name.known_hosts" ] || fail "$name: no host keys between the console markers"
  SSH_OPTS=(-o StrictHostKeyChecking=yes -o UserKnownHostsFile="$DIR/$name.known_hosts")

  # Log in as soon as sshd answers; a host key other than the console's fails here.
  while ! out=$(ssh_vm "$DIR/key" true 2>&1); do
    kill -0 "$QEMU_PID" 2>/dev/null || fail "$name: qemu exited"
    grep -q 'REMOTE HOST IDENTIFICATION HAS CHANGED\|Host key verification failed' <<<"$out" &&
      fail "$name: the host key is not the one on the console: $out"
    (( $(date +%s) - start < BOOT_TIMEOUT )) || fail "$name: no ssh login after ${BOOT_TIMEOUT}s: $out"
    sleep 2
  done
  up=$(( $(date +%s) - start ))
  log "$name: ssh login after ${up}s"

  out=$(ssh_vm "$DIR/key" 'cloud-init status --wait; hostname; cat /kiln-marker') ||
    fail "$name: the command over ssh failed: $out"
  log "$name: cloud-init finished after $(( $(date +%s) - start ))s"
  printf '%s\n' "$out" | sed "s/^/  $name> /" >&2
  grep -qx 'status: done' <<<"$out" || fail "$name: cloud-init did not finish cleanly: $out"
  grep -qx "$HOSTNAME_WANT" <<<"$out" || fail "$name: hostname is not $HOSTNAME_WANT: $out"
  grep -qx "marker-$TOKEN" <<<"$out" || fail "$name: runcmd's marker is missing: $out"

  # What cloud-init used and did, and how long the guest took to boot.
  out=$(ssh_vm "$DIR/key" 'cat /run/cloud-init/result.json; echo; systemd-analyze || true
        echo "rootfs=$(findmnt -bno SIZE /)"; lsblk -o NAME,SIZE,FSTYPE,LABEL /dev/vda
        sudo -n true && echo sudo=ok; echo "root_locked=$(sudo -n grep -c "^root:[!*]" /etc/shadow)"
        echo "networkd=$(ls /run/systemd/network/ /etc/systemd/network/ 2>/dev/null | tr "\n" " ")"
        echo "wait_online_s=$(( ($(systemctl show -P ExecMainExitTimestampMonotonic systemd-networkd-wait-online.service) - $(systemctl show -P ExecMainStartTimestampMonotonic systemd-networkd-wait-online.service)) / 1000000 ))"
        systemd-analyze blame | head -n 12') ||
    fail "$name: the checks over ssh failed: $out"
  printf '%s\n' "$out" | sed "s/^/  $name> /" >&2
  analyze=$(grep -m1 '^Startup finished' <<<"$out" || true)
  grep -q '"datasource": "DataSourceNoCloud' <<<"$out" || fail "$name: cloud-init did not use NoCloud: $out"
  grep -q '"errors": \[\]' <<<"$out" || fail "$name: cloud-init reported errors: $out"
  grep -qx 'sudo=ok' <<<"$out" || fail "$name: the default user has no passwordless sudo"
  grep -qx 'root_locked=1' <<<"$out" || fail "$name: root's password is not locked"
  # The config drive's network-config made the NIC "online" at once: a wait-online that ran
  # out its 2 minutes means no link counted (every link optional, or none matched).
  local waited
  waited=$(sed -n 's/^wait_online_s=//p' <<<"$out")
  (( ${waited:-999} < 60 )) || fail "$name: systemd-networkd-wait-online took ${waited}s: $out"
  local rootsize
  rootsize=$(sed -n 's/^rootfs=//p' <<<"$out")
  (( ${rootsize:-0} > 2200 * 1024 * 1024 )) || fail "$name: the root file system did not grow ($rootsize bytes)"

  # Another key is refused by sshd itself (not by the client).
  if out=$(ssh_vm "$DIR/wrong_key" true 2>&1); then fail "$name: a key not in user-data logged in"; fi
  grep -q 'Permission denied (publickey)' <<<"$out" || fail "$name: the wrong key failed, but not with publickey refused: $out"

  BOOT_TIMES+=("$name ($fw): ssh login ${up}s after qemu start; guest: $analyze")
  ssh_vm "$DIR/key" 'sudo -n poweroff' >/dev/null 2>&1 || true
  local i
  for i in $(seq 1 30); do kill -0 "$QEMU_PID" 2>/dev/null || break; sleep 1; done
  stop_vm
  CONSOLE=""
}

BOOT_TIMES=()
for c in "${CASES[@]}"; do
  case "$c" in
    build) ;;
    bios|uefi)
      # A copy-on-write overlay, 4 GiB, so the image stays as built and growpart has room.
      qemu-img create -q -f qcow2 -b "$(realpath "$IMG")" -F qcow2 "$DIR/$c.qcow2" 4G
      boot "$c" "$c" "$DIR/$c.qcow2" "$DIR/seed.iso"
      ;;
    partition)
      # The image on a 4 GiB disk with the seed in a partition at its end, as the agent
      # writes it (the agent's own code is covered by tests/unit/agent_deploy).
      disk="$DIR/partition.raw"
      cp --sparse=always "$RAW" "$disk"
      truncate -s 4G "$disk"
      sgdisk -e "$disk" >/dev/null   # backup GPT to the real end
      sectors=$(( $(stat -c %s "$disk") / 512 ))
      last_usable=$(( sectors - 34 ))
      iso_sectors=$(( ( ($(stat -c %s "$DIR/seed.iso") + 1048575) / 1048576 ) * 2048 ))
      first=$(( (last_usable + 1 - iso_sectors) / 2048 * 2048 ))
      sgdisk -n 0:"$first":"$last_usable" -t 0:8300 -c 0:cidata "$disk" >/dev/null
      dd if="$DIR/seed.iso" of="$disk" bs=512 seek="$first" conv=notrunc status=none
      sgdisk -p "$disk" | sed -n '/^Number/,$p' | sed 's/^/  partition> /' >&2
      boot partition bios "$disk"
      # growpart stops at the cidata partition; the seed must still be there.
      sgdisk -p "$disk" | sed -n '/^Number/,$p' | sed 's/^/  partition after boot> /' >&2
      part_first=$(sgdisk -p "$disk" | awk '$NF == "cidata" {print $2}')
      [ "$part_first" = "$first" ] || fail "partition: the cidata partition moved or vanished"
      root_last=$(sgdisk -p "$disk" | awk '$1 == 1 {print $3}')
      [ "$root_last" = $(( first - 1 )) ] ||
        fail "partition: growpart did not grow the root up to the cidata partition (ends at $root_last)"
      cmp -s <(dd if="$disk" bs=512 skip="$first" count=$(( $(stat -c %s "$DIR/seed.iso") / 512 )) status=none) \
        "$DIR/seed.iso" || fail "partition: the cidata partition's ISO was overwritten"
      ;;
    *) fail "unknown case $c (bios, uefi, partition, build)" ;;
  esac
done
log "PASS"
for t in "${BOOT_TIMES[@]}"; do log "boot time: $t"; done
