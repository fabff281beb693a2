#!/bin/sh
# autogen.sh: generate configure and Makefile.in from a git checkout (needs autoconf, automake,
# libtool, pkg-config and autoconf-archive: tools/install-deps installs them on Debian).
set -e
cd "$(dirname "$0")"
exec autoreconf --force --install --warnings=all
