#!/usr/bin/env bash
# `make demo`: profile the bundled workload (three functions with 60/30/10
# shares of the CPU) and print the per-procedure report.
set -euo pipefail
build=${1:-build}
ecpi="$build/loader/ecpi"
db=$(mktemp -d /tmp/ecpi-demo.XXXXXX)/ecpi.db
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "\$ ecpi record -o $db -- $build/testprogs/shares 3"
$SUDO "$ecpi" record -o "$db" -- "$build/testprogs/shares" 3
echo
echo "\$ ecpi prof $db --limit 15"
"$ecpi" prof "$db" --limit 15
echo
echo "\$ ecpi calc share_sixty $db --summary      # where its cycles went (DCPI Figure 4)"
"$ecpi" calc share_sixty "$db" --summary
echo
echo "Next: ecpi calc share_sixty $db   (per-instruction listing with stall culprits),"
echo "      ecpi export $db -o profile.html   (flame graph), ecpi --help"
