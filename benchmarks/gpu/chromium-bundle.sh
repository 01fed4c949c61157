#!/bin/bash
# Packs this machine's Debian chromium + chromedriver, the shared libraries they load (glibc excepted: the GPU
# image's is newer), fonts and selenium into parts of at most 60 MiB, so that scripts/screenshot.py can run ON
# the H200 machine, which has no browser and can fetch nothing. Usage, from the project root:
#   bash benchmarks/gpu/chromium-bundle.sh            # writes .gpu/c00, .gpu/c01, ... and .gpu/chromium-unpack.sh
# On the device, after copying each part to /tmp/gpu-parts (as with the wheel parts):
#   source .gpu/chromium-unpack.sh                 # sets CHROMIUM, CHROMEDRIVER, FONTCONFIG_FILE, PYTHONPATH
set -euo pipefail
out=${OUT_DIR:-.gpu}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/cr/lib" "$stage/cr/fonts" "$stage/cr/py" "$out"
cp -a /usr/lib/chromium/. "$stage/cr/chromium/"
for bin in /usr/lib/chromium/chromium /usr/lib/chromium/chromedriver /usr/lib/chromium/chrome_crashpad_handler; do
  ldd "$bin" | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libresolv)\.so' \
  | xargs -I{} cp -L {} "$stage/cr/lib/"
cp -a /usr/share/fonts/. "$stage/cr/fonts/"
site=$(.venv/bin/python -c 'import selenium, os; print(os.path.dirname(os.path.dirname(selenium.__file__)))')
for pkg in selenium trio trio_websocket websocket outcome sniffio sortedcontainers wsproto attr attrs h11 \
           typing_extensions.py certifi urllib3 idna socks.py; do
  [ -e "$site/$pkg" ] && cp -a "$site/$pkg" "$stage/cr/py/"
done
tar czf - -C "$stage" cr | split -b 60M -d -a 2 - "$out/c"
cat > "$out/chromium-unpack.sh" <<'EOF'
# sourced ON the device: joins the chromium parts copied to /tmp/gpu-parts and points screenshot.py at them
mkdir -p /tmp/cr-root /tmp/fc-cache
cp .gpu/c[0-9]* /tmp/gpu-parts/ 2>/dev/null || true
[ -x /tmp/cr-root/cr/chromium/chromium ] || cat /tmp/gpu-parts/c[0-9]* | tar xzf - -C /tmp/cr-root
cat > /tmp/cr-root/fonts.conf <<FC
<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig><dir>/tmp/cr-root/cr/fonts</dir><cachedir>/tmp/fc-cache</cachedir></fontconfig>
FC
export CHROMIUM=/tmp/cr-root/cr/chromium/chromium CHROMEDRIVER=/tmp/cr-root/cr/chromium/chromedriver
export CHROMIUM_LD_LIBRARY_PATH=/tmp/cr-root/cr/lib FONTCONFIG_FILE=/tmp/cr-root/fonts.conf
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}/tmp/cr-root/cr/py
EOF
ls -la "$out"/c[0-9]*
