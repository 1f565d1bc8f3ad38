#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for the tests and benchmarks: munged, MariaDB,
# slurmdbd, slurmctld and slurmd, started by hand (no systemd needed), every file of theirs
# under ROOT (default /tmp/autoresearch-slurm). Idempotent: a daemon already running is left
# as it is. Needs root; installs `slurm-wlm munge slurmdbd mariadb-server` with apt when
# missing. Prints `export SLURM_CONF=...` last: the client commands (sbatch, squeue, sacct)
# read the cluster's config from there. Stop it with tests/slurm/stop.sh ROOT.
#
# Why each piece: submitit learns a job's state from `sacct`, and `sacct` needs slurmdbd
# (with accounting_storage/none it exits 1 and a cancelled job's result() never returns);
# slurmdbd needs a database. No cgroups here: proctrack/linuxproc and task/none.
set -euo pipefail
ROOT=${1:-/tmp/autoresearch-slurm}
DB_PORT=${AUTORESEARCH_SLURM_DB_PORT:-13306}
say() { echo "slurm-cluster: $*" >&2; }
die() { say "$*"; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (daemons, /run/munge)"
if ! command -v slurmctld >/dev/null || ! command -v slurmdbd >/dev/null \
        || ! command -v munged >/dev/null || ! command -v mariadbd >/dev/null; then
    command -v apt-get >/dev/null || die "no apt-get to install slurm-wlm munge slurmdbd mariadb-server"
    say "installing slurm-wlm munge slurmdbd mariadb-server (apt)"
    { apt-get install -y -qq slurm-wlm munge slurmdbd mariadb-server >/dev/null 2>&1 \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
           apt-get install -y -qq slurm-wlm munge slurmdbd mariadb-server >/dev/null; }; } \
        || die "apt could not install slurm-wlm munge slurmdbd mariadb-server"
fi

mkdir -p "$ROOT"/{etc,log,state,spool,run,db}
ROOT=$(cd "$ROOT" && pwd)
export SLURM_CONF=$ROOT/etc/slurm.conf
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
wait_for() {  # wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds
    local until=$((SECONDS + $1)) what=$2; shift 2
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $until ] || die "$what did not come up (logs: $ROOT/log)"
        sleep 0.2
    done
}

# munge: the daemons' and clients' authentication (the package made /etc/munge/munge.key)
if ! pgrep -u munge -x munged >/dev/null; then
    mkdir -p /run/munge && chown munge:munge /run/munge && chmod 755 /run/munge
    [ -s /etc/munge/munge.key ] || { mungekey --create 2>/dev/null || create-munge-key -f; }
    chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
    runuser -u munge -- /usr/sbin/munged
    wait_for 10 munged sh -c 'munge -n | unmunge'
fi

# MariaDB: a data folder and log folder of its own, on 127.0.0.1 only
if ! alive "$ROOT/run/mariadb.pid"; then
    if [ ! -d "$ROOT/db/mysql" ]; then
        mariadb-install-db --user=root --datadir="$ROOT/db" --auth-root-authentication-method=socket \
            >"$ROOT/log/mariadb-install.log" 2>&1 || die "mariadb-install-db failed ($ROOT/log)"
    fi
    mariadbd --user=root --datadir="$ROOT/db" --bind-address=127.0.0.1 --port="$DB_PORT" \
        --socket="$ROOT/run/mariadb.sock" --pid-file="$ROOT/run/mariadb.pid" \
        --log-error="$ROOT/log/mariadb.log" --innodb-buffer-pool-size=512M \
        --innodb-lock-wait-timeout=900 --skip-name-resolve >/dev/null 2>&1 &
    wait_for 30 MariaDB mariadb --socket="$ROOT/run/mariadb.sock" -e 'select 1'
    mariadb --socket="$ROOT/run/mariadb.sock" -e "
        CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
fi

NODE=$(slurmd -C | head -1 | sed 's/ *$//')     # NodeName=... CPUs=... RealMemory=...
NAME=$(echo "$NODE" | sed 's/^NodeName=\([^ ]*\).*/\1/')
cat >"$ROOT/etc/slurmdbd.conf" <<CONF
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=root
LogFile=$ROOT/log/slurmdbd.log
PidFile=$ROOT/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
CONF
chmod 600 "$ROOT/etc/slurmdbd.conf"
cat >"$ROOT/etc/slurm.conf" <<CONF
ClusterName=autoresearch
SlurmctldHost=$NAME
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core      # memory is not a consumable here: jobs without --mem share it
MailProg=/bin/true
ReturnToService=2
StateSaveLocation=$ROOT/state
SlurmdSpoolDir=$ROOT/spool
SlurmctldPidFile=$ROOT/run/slurmctld.pid
SlurmdPidFile=$ROOT/run/slurmd.pid
SlurmctldLogFile=$ROOT/log/slurmctld.log
SlurmdLogFile=$ROOT/log/slurmd.log
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
MinJobAge=60
KillWait=5
$NODE State=UNKNOWN
PartitionName=debug Nodes=$NAME Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF

if ! alive "$ROOT/run/slurmdbd.pid"; then      # before slurmctld: it registers the cluster
    slurmdbd     # reads slurmdbd.conf beside $SLURM_CONF
    wait_for 30 slurmdbd sacctmgr -n list cluster
fi
if ! alive "$ROOT/run/slurmctld.pid"; then
    slurmctld -f "$SLURM_CONF"
    wait_for 30 slurmctld scontrol ping
fi
if ! alive "$ROOT/run/slurmd.pid"; then
    slurmd -f "$SLURM_CONF"
fi
# a node shows `unk` for a few seconds after slurmctld starts
wait_for 40 "the node $NAME" sh -c "sinfo -h -n $NAME -o %t | grep -Eq '^(idle|mix|alloc)'"
say "up: node $NAME, partition debug (root $ROOT)"
echo "export SLURM_CONF=$SLURM_CONF"
