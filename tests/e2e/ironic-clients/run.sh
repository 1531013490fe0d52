#!/bin/sh
# CTest entry for the Ironic client test: runs ironic_clients_test.py with
# the Python that Debian's `openstack` CLI runs under (its shebang), so
# openstacksdk and ironicclient import exactly as the CLIs see them, whatever
# python3 comes first on PATH (a pyenv shim has neither). Exits 77 (SKIPPED,
# with the reason) when the clients or node are not installed:
# scripts/install-deps installs python3-openstackclient, python3-ironicclient,
# python3-openstacksdk and nodejs.
#   run.sh KILND KILN_VBMC
here=$(dirname "$0")
for tool in openstack baremetal node; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool is not installed (scripts/install-deps installs Debian's python3-openstackclient, python3-ironicclient and nodejs)"
    exit 77
  fi
done
interp=$(head -n 1 "$(command -v openstack)" | sed -n 's/^#! *//p' | cut -d' ' -f1)
if [ -z "$interp" ] || [ ! -x "$interp" ]; then
  echo "SKIP: cannot tell which Python runs $(command -v openstack)"
  exit 77
fi
exec "$interp" "$here/ironic_clients_test.py" "$@"
