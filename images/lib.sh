# Shared by images/build-ramdisk and images/build-demo-os (sourced, not run).
#
# Both images carry Debian's stock kernel and a busybox-static initramfs with kiln-agent in
# it. Nothing here needs root or loop devices: the kernel package is fetched with
# `apt-get download` and unpacked with `dpkg-deb -x` (never installed), the initramfs is a
# cpio archive, and the demo disk is made with sfdisk, mkfs.vfat --offset and mtools.
#
# Outputs are cached: each image records a hash of its inputs next to itself and is
# rebuilt only when that hash changes (a new kiln-agent, a changed script, another kernel).

IMAGES_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# Kernel modules the images load at boot (the dependencies come from modules.dep):
# virtio and emulated NICs and disks of a qemu VM, and the common NIC/disk drivers of a
# real server; isofs for the demo OS's config drive (the cidata partition).
KILN_MODULES=(
  virtio_pci virtio_net virtio_blk virtio_scsi virtio_rng
  e1000 e1000e igb ixgbe
  nvme ahci ata_piix sd_mod sr_mod
  isofs
)

die() { echo "$(basename "$0"): $*" >&2; exit 1; }
note() { echo "$(basename "$0"): $*" >&2; }

# kernel_package: the linux-image-*-amd64 package the linux-image-amd64 metapackage points
# at (KILN_KERNEL_PACKAGE overrides), e.g. linux-image-6.1.0-56-amd64.
kernel_package() {
  if [ -n "${KILN_KERNEL_PACKAGE:-}" ]; then echo "$KILN_KERNEL_PACKAGE"; return; fi
  local p
  p=$(apt-cache depends linux-image-amd64 2>/dev/null |
      awk '/Depends: linux-image-[0-9].*-amd64$/ {print $2; exit}')
  [ -n "$p" ] || die "cannot resolve linux-image-amd64 (apt-get update?)"
  echo "$p"
}

# fetch_kernel CACHE_DIR (default build/kernel-cache, shared by every output folder;
# KILN_KERNEL_CACHE overrides): downloads and unpacks the kernel package once into
# CACHE_DIR/<package>_<version>/, prints that directory. modules.dep is generated there
# (the package does not ship it; its postinst would run depmod).
fetch_kernel() {
  local cache=$1 pkg ver dir
  pkg=$(kernel_package)
  ver=$(apt-cache policy "$pkg" | awk '/Candidate:/ {print $2}')
  [ -n "$ver" ] && [ "$ver" != "(none)" ] || die "no candidate for $pkg"
  dir="$cache/${pkg}_$ver"
  if [ ! -f "$dir/.done" ]; then
    rm -rf "$dir" && mkdir -p "$dir/deb"
    note "downloading $pkg $ver"
    (cd "$dir/deb" && apt-get download -q "$pkg=$ver" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2) ||
      die "apt-get download $pkg failed"
    dpkg-deb -x "$dir"/deb/*.deb "$dir/root"
    rm -rf "$dir/deb"
    local kver
    kver=$(ls "$dir/root/lib/modules")
    depmod -b "$dir/root" "$kver" || die "depmod failed"
    touch "$dir/.done"
  fi
  echo "$dir"
}

# kernel_release KDIR: e.g. 6.1.0-56-amd64
kernel_release() { ls "$1/root/lib/modules"; }

# stage_modules KDIR ROOT: copies KILN_MODULES and everything they depend on (per
# modules.dep) into ROOT/lib/modules/<release>, writes a modules.dep for just those, and
# the load list to ROOT/etc/kiln/modules.
stage_modules() {
  local kdir=$1 root=$2 rel src dst m path
  rel=$(kernel_release "$kdir")
  src="$kdir/root/lib/modules/$rel"
  dst="$root/lib/modules/$rel"
  mkdir -p "$dst" "$root/etc/kiln"
  : >"$root/etc/kiln/modules"
  for m in "${KILN_MODULES[@]}"; do
    # modules.dep line: "kernel/.../name.ko: kernel/dep1.ko kernel/dep2.ko"
    path=$(awk -F: -v m="$m" '{n=$1; sub(/.*\//, "", n); sub(/\.ko.*$/, "", n); gsub(/-/, "_", n)}
                             n == m {print $0; exit}' "$src/modules.dep")
    if [ -z "$path" ]; then
      if grep -q "/${m//_/[_-]}.ko" "$src/modules.builtin"; then continue; fi  # built in
      die "module $m is not in $rel"
    fi
    for f in ${path/:/}; do
      mkdir -p "$dst/$(dirname "$f")"
      cp -n "$src/$f" "$dst/$f"
    done
    echo "$m" >>"$root/etc/kiln/modules"
  done
  cp "$src/modules.builtin" "$src/modules.builtin.modinfo" "$src/modules.order" "$dst/"
  depmod -b "$root" "$rel" || die "depmod failed"
}

# stage_binary BIN ROOT DEST: copies BIN to ROOT/DEST plus every shared library `ldd` lists
# and the dynamic loader, at their own paths.
stage_binary() {
  local bin=$1 root=$2 dest=$3 lib
  mkdir -p "$root/$(dirname "$dest")"
  # Stripped: a debug build's symbols would make the initramfs (fetched by iPXE) many times larger.
  strip --strip-unneeded -o "$root/$dest" "$bin" 2>/dev/null || cp "$bin" "$root/$dest"
  chmod 755 "$root/$dest"
  for lib in $(ldd "$bin" | awk '/=> \// {print $3} /^[ \t]*\// {print $1}'); do
    mkdir -p "$root/$(dirname "$lib")"
    cp -L "$lib" "$root/$lib"
  done
}

# stage_rootfs ROOT PHASE AGENT KDIR: the initramfs tree common to both images.
stage_rootfs() {
  local root=$1 phase=$2 agent=$3 kdir=$4 a
  rm -rf "$root"
  mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc/kiln,proc,sys,dev,run,tmp,var,root,mnt}
  ln -s ../run "$root/var/run"
  cp /bin/busybox "$root/bin/busybox"
  for a in $(/bin/busybox --list-full); do
    [ -e "$root/$a" ] || ln -s /bin/busybox "$root/$a"
  done
  stage_binary "$agent" "$root" /usr/bin/kiln-agent
  stage_modules "$kdir" "$root"
  install -m 755 "$IMAGES_SRC/initramfs/init" "$root/init"
  install -m 755 "$IMAGES_SRC/initramfs/udhcpc.script" "$root/etc/kiln/udhcpc.script"
  echo "$phase" >"$root/etc/kiln/phase"
  printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
  printf 'root:x:0:\n' >"$root/etc/group"
  printf '127.0.0.1 localhost\n' >"$root/etc/hosts"
  : >"$root/etc/resolv.conf"
}

# pack_initramfs ROOT OUT: a zstd-compressed newc cpio (Debian's kernel has RD_ZSTD).
pack_initramfs() {
  local root=$1 out=$2
  (cd "$root" && find . -print0 | LC_ALL=C sort -z |
     cpio --null -o -H newc --owner 0:0 --quiet) | zstd -q -T0 -10 -f -o "$out.tmp"
  mv "$out.tmp" "$out"
}

# inputs_hash FILE...: one hash over the contents of the given files.
inputs_hash() {
  sha256sum "$@" | awk '{print $1}' | sha256sum | awk '{print $1}'
}

# agent_inputs AGENT: the agent binary and the libraries it would carry.
agent_inputs() {
  echo "$1"
  ldd "$1" | awk '/=> \// {print $3} /^[ \t]*\// {print $1}'
}
