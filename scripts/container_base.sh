#!/usr/bin/env bash
# A Debian base image built locally with debootstrap, for machines that reach Debian's mirror but no
# container registry (no Docker Hub). Idempotent: an existing image is kept (FORCE=1 rebuilds it).
#   scripts/container_base.sh                    -> localhost/debian-base:bookworm
#   IMAGE=localhost/debian-base:bookworm SUITE=bookworm MIRROR=http://deb.debian.org/debian scripts/container_base.sh
# Then: podman build --build-arg BASE_IMAGE=localhost/debian-base:bookworm -t spec-playground .
# Needs root, debootstrap and podman (apt-get install debootstrap podman).
set -euo pipefail
image=${IMAGE:-localhost/debian-base:bookworm}
suite=${SUITE:-bookworm}
engine=${CONTAINER_ENGINE:-podman}

if [ -z "${FORCE:-}" ] && "$engine" image exists "$image" 2>/dev/null; then
  echo "$image already exists (FORCE=1 rebuilds it)"
  exit 0
fi
[ "$(id -u)" = 0 ] || { echo "container_base.sh: debootstrap needs root" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "container_base.sh: apt-get install debootstrap" >&2; exit 1; }

# The mirror this machine's apt uses (deb822 'URIs:' or one-line 'deb URL'), not its security archive.
if [ -z "${MIRROR:-}" ]; then
  MIRROR=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
    | sed -n -E 's/^URIs:[[:space:]]*([^[:space:]]+).*/\1/p; s/^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?([^[:space:]]+).*/\2/p' \
    | grep -E '/debian/?$' | head -n1 || true)
  MIRROR=${MIRROR:-http://deb.debian.org/debian}
fi
MIRROR=${MIRROR%/}
echo "debootstrap $suite (minbase) from $MIRROR -> $image"

work=$(mktemp -d /var/tmp/debian-base.XXXXXX)
trap 'rm -rf "$work"' EXIT
rootfs=$work/rootfs
debootstrap --variant=minbase "$suite" "$rootfs" "$MIRROR"

# The same sources as the official debian image: the release, its updates, its security archive.
security=${SECURITY_MIRROR:-${MIRROR%/debian}/debian-security}
cat > "$rootfs/etc/apt/sources.list" <<EOF
deb $MIRROR $suite main
deb $MIRROR $suite-updates main
deb $security $suite-security main
EOF
# Keep the image small, like the official one: no downloaded .debs, no package lists, no logs.
chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/*.log \
       "$rootfs"/var/cache/debconf/*-old "$rootfs"/tmp/* "$rootfs"/root/.bash_history
: > "$rootfs/etc/machine-id"
# debootstrap copies the host's resolv.conf and hostname; the container engine supplies its own.
rm -f "$rootfs/etc/resolv.conf" "$rootfs/etc/hostname"

tar --numeric-owner --xattrs -C "$rootfs" -c . \
  | "$engine" import \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'ENV LANG=C.UTF-8' \
      --change 'CMD ["/bin/bash"]' \
      --message "debootstrap --variant=minbase $suite $MIRROR" \
      - "$image"
"$engine" image inspect --format '{{.Id}} {{.Size}}' "$image"
echo "built $image"
