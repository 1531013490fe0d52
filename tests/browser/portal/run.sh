#!/bin/sh
# CTest entry for the browser tests: runs NODE_SCRIPT with node, or exits 77
# (SKIPPED) with the reason when node is not installed. The script itself
# skips the same way without chromium, web/node_modules or web/dist.
#   run.sh SCRIPT [ARGS...]
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node is not installed (scripts/install-deps installs nodejs)"
  exit 77
fi
exec node "$@"
