#!/usr/bin/env bash
# Builds millstream-test-base:bookworm, a stand-in for python:3.11-slim-bookworm made
# only from Debian packages, for machines that reach Debian's mirror but not Docker Hub.
#
#   sudo tests/docker/make_base_image.sh            # needs root (debootstrap) and a Docker engine
#
# The Dockerfile then builds on it with --build-arg BASE_IMAGE=millstream-test-base:bookworm.
# What it must give the Dockerfile, like the official image: Debian bookworm with apt,
# Python 3.11 as `python`/`python3`, and a `pip` that installs system-wide. Debian marks its
# own Python "externally managed" (PEP 668), so Python comes as a venv in /opt/python put
# first on PATH, which is what /usr/local/bin is in the official image. pip is told to use
# the system CA store (PIP_CERT) rather than its bundled one, for the reason given below.
set -euo pipefail

TAG="${BASE_TAG:-millstream-test-base:bookworm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
WORK="$(mktemp -d /var/tmp/millstream-base.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

command -v debootstrap >/dev/null || { echo "debootstrap missing: apt-get install -y debootstrap" >&2; exit 1; }

# minbase: dpkg, apt and the Priority:required set (passwd, so useradd/groupadd work).
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$WORK/rootfs" "$MIRROR"

# On a network that intercepts TLS (a corporate proxy), pip inside `docker build` reaches PyPI
# only if the image trusts the same locally added CAs as this host: copy them in. They are
# public certificates, and this base is for tests only; the default python:3.11-slim is untouched.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$WORK/rootfs/usr/local/share/ca-certificates/"
    chroot "$WORK/rootfs" update-ca-certificates
fi

chroot "$WORK/rootfs" /usr/bin/python3 -m venv /opt/python
chroot "$WORK/rootfs" /opt/python/bin/python -m pip --version
# Like the slim images: no apt lists or caches in the image.
rm -rf "$WORK/rootfs"/var/lib/apt/lists/* "$WORK/rootfs"/var/cache/apt/archives/*.deb

tar -C "$WORK/rootfs" -c . | docker import \
    --change 'ENV PATH=/opt/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
    --change 'CMD ["python3"]' \
    - "$TAG"
echo "built $TAG"
