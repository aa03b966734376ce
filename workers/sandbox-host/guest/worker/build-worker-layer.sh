#!/bin/sh
# Build the worker guest's initramfs: the base guest (initrd.gz from build-guest.sh) plus a layer
# holding a JavaScript runtime taken from what the project already installs, so nothing is
# downloaded at run time:
#   /opt/node/bin/node            the project's Node 22 (node_modules/node/bin/node), debug info stripped
#   /lib64, /lib/x86_64-linux-gnu its shared libraries (glibc, libstdc++, ...), found with ldd
#   /node_modules/iii-sdk         npm iii-sdk bundled to one ES module (esbuild), so user code imports it by name
#   /worker/runtime.mjs           the guest side of the engine relay (guest/worker/runtime.mjs)
# The result is initrd-worker.cpio, uncompressed: decompressing ~100 MB under a software CPU costs
# seconds per boot, while the kernel copies an uncompressed archive at memory speed.
# Usage: build-worker-layer.sh GUEST_OUT NODE_BINARY ESBUILD_BINARY III_SDK_PACKAGE_DIR
set -eu
OUT=$1; NODE=$2; ESBUILD=$3; SDK=$(cd "$4" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
[ -s "$OUT/initrd.gz" ] || { echo "build-worker-layer: $OUT/initrd.gz missing (run build-guest.sh first)" >&2; exit 1; }
for tool in cpio ldd gzip; do
  command -v "$tool" >/dev/null 2>&1 || { echo "build-worker-layer: missing $tool" >&2; exit 1; }
done
exec 8>"$OUT/worker.lock"
flock 8
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
R=$W/root
mkdir -p "$R/opt/node/bin" "$R/worker" "$R/node_modules/iii-sdk/dist"
# Debug info is 18 MB of guest RAM for nothing; without binutils the binary goes in as it is.
if command -v strip >/dev/null 2>&1; then strip --strip-debug -o "$R/opt/node/bin/node" "$NODE"; else cp "$NODE" "$R/opt/node/bin/node"; fi
# Shared libraries at the paths the dynamic loader looks in (the interpreter path is absolute).
ldd "$NODE" | awk '/=> \//{print $3} $1 ~ /^\//{print $1}' | while read -r lib; do
  mkdir -p "$R$(dirname "$lib")"
  cp -L "$lib" "$R$lib"
done
# /lib in the base image is a real directory (it holds the modules), so the libraries sit beside them.
# Bundle from the package's own entry, so its dependencies (ws, @opentelemetry/api) resolve beside it.
echo "export * from \"$SDK/dist/index.mjs\";" > "$W/iii-sdk-entry.mjs"
"$ESBUILD" --bundle --platform=node --format=esm --target=node22 --log-level=warning \
  --banner:js="import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" \
  "$W/iii-sdk-entry.mjs" --outfile="$R/node_modules/iii-sdk/dist/index.mjs"
# The SDK reads its version from ../package.json at run time: keep that layout.
VERSION=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$SDK/package.json")
printf '{"name":"iii-sdk","version":"%s","type":"module","exports":"./dist/index.mjs"}\n' "$VERSION" > "$R/node_modules/iii-sdk/package.json"
install -m 644 "$HERE/runtime.mjs" "$R/worker/runtime.mjs"; install -m 644 "$HERE/loader.mjs" "$R/worker/loader.mjs"
gzip -dc "$OUT/initrd.gz" > "$W/initrd-worker.cpio"
(cd "$R" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet) >> "$W/initrd-worker.cpio"
mv "$W/initrd-worker.cpio" "$OUT/initrd-worker.cpio"
echo "worker guest built in $OUT/initrd-worker.cpio ($(du -m "$OUT/initrd-worker.cpio" | cut -f1) MB)"
