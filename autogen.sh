#!/bin/sh
# Make ./configure from configure.ac (needs autoconf, automake, libtool,
# autoconf-archive and pkg-config: tools/install-deps installs them).
set -e
cd "$(dirname "$0")"
autoreconf --force --install --verbose >/dev/null
echo "Now run ./configure && make check"
