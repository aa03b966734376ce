#!/bin/sh
# Build the sandbox guest into OUTDIR (default: guest/out next to this script):
#   vmlinux    the Debian cloud kernel, uncompressed, so QEMU boots it directly through its PVH note
#   initrd.gz  busybox + the virtio modules of that kernel + init + agent.sh
#   kernel-version, BUILD-ID
# Needs apt (to download the kernel .deb), busybox-static, cpio, lz4, gzip. Nothing is installed:
# the kernel package is only downloaded and unpacked. Safe to run concurrently: the output is
# built in a temporary directory and moved into place under a lock.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-$HERE/out}
mkdir -p "$(dirname "$OUT")"
OUT=$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT")

exec 9>"$OUT.lock"
flock 9
if [ -s "$OUT/vmlinux" ] && [ -s "$OUT/initrd.gz" ] && [ "${FORCE:-0}" != 1 ]; then
  # Rebuild only the initramfs when init or agent.sh changed since the last build.
  if [ "$OUT/initrd.gz" -nt "$HERE/init" ] && [ "$OUT/initrd.gz" -nt "$HERE/agent.sh" ]; then
    echo "guest already built in $OUT"; exit 0
  fi
fi

for tool in busybox cpio lz4 gzip dpkg-deb apt-get; do
  command -v "$tool" >/dev/null 2>&1 || { echo "build-guest: missing $tool (run scripts/install-deps.sh)" >&2; exit 1; }
done
# The guest has no libc, so its busybox must be the static build.
BUSYBOX=/bin/busybox
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q "install ok installed" || {
  echo "build-guest: busybox-static is not installed (run scripts/install-deps.sh)" >&2; exit 1; }

W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
NEW=$W/out; mkdir -p "$NEW"

# Kernel: reuse the one already unpacked in OUT when only the initramfs is stale.
if [ -s "$OUT/vmlinux" ] && [ -d "$OUT/modules" ] && [ "${FORCE:-0}" != 1 ]; then
  KVER=$(cat "$OUT/kernel-version")
  cp "$OUT/vmlinux" "$NEW/vmlinux"; cp -r "$OUT/modules" "$NEW/modules"
else
  # The ABI name changes with every Debian kernel update: resolve it through the metapackage.
  PKG=$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  [ -n "$PKG" ] || { echo "build-guest: cannot resolve linux-image-cloud-amd64 (run apt-get update)" >&2; exit 1; }
  KVER=${PKG#linux-image-}
  (cd "$W" && apt-get download "$PKG" >/dev/null 2>&1) || { echo "build-guest: apt-get download $PKG failed" >&2; exit 1; }
  dpkg-deb -x "$W"/"$PKG"_*.deb "$W/k"
  # The cloud kernel is LZ4-compressed: cut at the LZ4 legacy-frame magic and decompress to the ELF.
  # lz4 complains about the trailing bytes after the frame; the ELF check below is what counts.
  Z=$W/k/boot/vmlinuz-$KVER
  OFF=$(LC_ALL=C grep -abo "$(printf '\002!L\030')" "$Z" | head -n1 | cut -d: -f1)
  tail -c +"$((OFF + 1))" "$Z" | lz4 -dc > "$NEW/vmlinux" 2>/dev/null || true
  [ "$(head -c 4 "$NEW/vmlinux" | od -An -c | tr -d ' ')" = "177ELF" ] || { echo "build-guest: vmlinux extraction failed" >&2; exit 1; }
  # virtio and the serial port are modules in Debian kernels; they must match the kernel (vermagic).
  mkdir -p "$NEW/modules"
  for m in virtio_ring virtio virtio_mmio virtio_console; do
    f=$(find "$W/k/lib/modules/$KVER" -name "$m.ko" | head -n1)
    [ -n "$f" ] || { echo "build-guest: missing $m.ko in $PKG" >&2; exit 1; }
    cp "$f" "$NEW/modules/"
  done
fi

R=$W/root
mkdir -p "$R/bin" "$R/dev" "$R/proc" "$R/sys" "$R/tmp" "$R/run" "$R/root" "$R/lib/modules"
cp "$BUSYBOX" "$R/bin/busybox"
cp "$NEW"/modules/*.ko "$R/lib/modules/"
install -m 755 "$HERE/init" "$R/init"
install -m 644 "$HERE/agent.sh" "$R/agent.sh"
(cd "$R" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) > "$NEW/initrd.gz"
echo "$KVER" > "$NEW/kernel-version"
date -u +%Y%m%dT%H%M%SZ > "$NEW/BUILD-ID"

rm -rf "$OUT.old"
[ -d "$OUT" ] && mv "$OUT" "$OUT.old"
mv "$NEW" "$OUT"
rm -rf "$OUT.old"
echo "guest built in $OUT (kernel $KVER)"
