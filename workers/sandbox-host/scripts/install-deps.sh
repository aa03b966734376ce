#!/bin/sh
# Install what the sandbox host and its tests need on Debian 12, only what is missing:
#   qemu-system-x86  the microVMs (KVM where it works, TCG software CPU otherwise)
#   busybox-static   the whole guest userland
#   cpio, lz4        building the guest initramfs and unpacking the cloud kernel
#   bubblewrap       the `process` fallback backend, used only where QEMU is missing
#   binutils         `strip`, to drop Node's debug info from the worker guest image (optional)
# The kernel is not installed: guest/build-guest.sh downloads and unpacks it. Idempotent; needs root
# (or sudo) only when something is missing.
set -eu
PKGS="qemu-system-x86 busybox-static cpio lz4 bubblewrap binutils"
missing=
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
  echo "sandbox-host deps: all installed"
else
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  echo "sandbox-host deps: installing$missing"
  $SUDO apt-get update -q
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
fi
# build-guest.sh resolves the kernel through apt-cache: make sure the package lists exist.
if ! apt-cache depends linux-image-cloud-amd64 2>/dev/null | grep -q "Depends: linux-image-[0-9]"; then
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q
fi
