#!/usr/bin/env bash
# Stop the one-node cluster tests/slurm/start.sh started under ROOT (its jobs too); its
# folders stay (the next start reuses the database). munged, shared, is left running.
set -uo pipefail
ROOT=${1:-/tmp/autoresearch-slurm}
export SLURM_CONF=$ROOT/etc/slurm.conf
[ -f "$SLURM_CONF" ] && scancel --user="$(id -un)" 2>/dev/null
for daemon in slurmd slurmctld slurmdbd mariadb; do
    pidfile=$ROOT/run/$daemon.pid
    if [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        pid=$(cat "$pidfile"); kill "$pid"
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    fi
done
echo "slurm-cluster: stopped (root $ROOT)" >&2
