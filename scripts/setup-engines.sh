#!/usr/bin/env bash
# The real engines the tests run against, installed when missing (the
# README's `npm test` runs this first): runc, the OCI runtime isolated
# (`exec`) tasks run on; chromium, the headless browser the status page's
# test drives; etcd-server, the store cluster mode runs on; and for images
# docker-registry (a real OCI registry on loopback), skopeo (pushes test
# images to it) and umoci (builds and unpacks them). As root it installs what is missing with apt-get
# and says so; otherwise it says what to install and fails, since the tests
# never fake these engines.
set -euo pipefail
missing=()
command -v runc >/dev/null 2>&1 || [ -x /usr/sbin/runc ] || missing+=(runc)
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/bin/etcd ] || missing+=(etcd-server)
[ -x /usr/bin/docker-registry ] || missing+=(docker-registry)
[ -x /usr/bin/skopeo ] || missing+=(skopeo)
[ -x /usr/bin/umoci ] || missing+=(umoci)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "setup-engines: the tests need ${missing[*]} (Debian packages: ${missing[*]}); install them as root: apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "setup-engines: installing ${missing[*]} with apt-get (the tests run isolated tasks on runc, drive the status page in chromium and run cluster mode on etcd, and pull images from a real registry)"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends "${missing[@]}" >/tmp/setup-engines.log 2>&1; then
  apt-get update >>/tmp/setup-engines.log 2>&1
  apt-get install -y --no-install-recommends "${missing[@]}" >>/tmp/setup-engines.log 2>&1 || { echo "setup-engines: apt-get install ${missing[*]} failed; see /tmp/setup-engines.log" >&2; exit 1; }
fi
echo "setup-engines: installed ${missing[*]}"
