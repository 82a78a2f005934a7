#!/usr/bin/env bash
# A real single-node SLURM cluster on localhost for the tests (Debian 12, SLURM 22.05, root, no systemd).
#   tests/slurm/cluster.sh start   install if needed, configure, start munged, slurmctld, slurmd; wait for idle
#   tests/slurm/cluster.sh stop    stop the daemons started here, by their PID files
# As strict as a real site: a CPU partition (the default) and a GPU partition, each with a MaxTime
# that `EnforcePartLimits=ALL` checks at submission ("Requested time limit is invalid"), and CPUs
# confined to what a job asked for (`TaskPlugin=task/affinity`: `srun -c 1 nproc` prints 1).
# A second pair with other names and shorter limits, as a site the project never saw has them: a CPU
# partition of 8 h (where config/claim.yaml, which trains on CPUs, must still plan) and a GPU one of 24 h.
# The node offers two fake GPUs (gres on /dev/null and /dev/zero), one per core, so two training jobs run
# at a time: a job sees CUDA_VISIBLE_DEVICES=0 or 1 and no CUDA device, and trains on the CPU.
# The tests name these partitions and the GPU one's MaxTime to the workflow as a site's user would (SITE in tests/test_slurm.py).
# Beside it, a second cluster on other ports (SLURM_CONF=/etc/slurm-variant/slurm.conf), as another site
# has it: typed GPUs (Gres=gpu:a100:2) and select/cons_res, which refuses --gpus (only --gres), with
# partitions `batch` (4 h) and `a100` (2 days). tests/test_slurm.py asks it with SLURM_CONF; it runs no job.
# The default cluster's variants, for checks by hand (the tests run on the default, which three test files share):
#   ASYNCFL_SLURM_GPU_TYPE=a100   typed GPUs (Gres=gpu:a100:2) instead of untyped ones
#   ASYNCFL_SLURM_SELECT=cons_res select/cons_res, which refuses --gpus, instead of select/cons_tres
set -euo pipefail
GPU_TYPE=${ASYNCFL_SLURM_GPU_TYPE:-}
SELECT=${ASYNCFL_SLURM_SELECT:-cons_tres}

STATE=/var/lib/asyncfl-slurm
VARIANT=/etc/slurm-variant
PIDS=(/run/slurmd.pid /run/slurmctld.pid /run/slurmd-variant.pid /run/slurmctld-variant.pid /run/munge/munged.pid)

start() {
  if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
  fi
  local host cpus memory
  host=$(hostname -s)
  cpus=$(nproc)
  memory=$(( $(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo) - 2048 ))
  mkdir -p /etc/slurm "$STATE/ctld" "$STATE/d" /var/log/slurm /run/munge
  cat > /etc/slurm/slurm.conf <<CONF
ClusterName=asyncfl
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
EnforcePartLimits=ALL
SelectType=select/$SELECT
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
GresTypes=gpu
MinJobAge=3600
ReturnToService=2
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName=localhost NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory Gres=gpu:${GPU_TYPE:+$GPU_TYPE:}2 State=UNKNOWN
PartitionName=cpu Nodes=localhost Default=YES MaxTime=1-00:00:00 State=UP
PartitionName=gpu Nodes=localhost MaxTime=1-12:00:00 State=UP
PartitionName=standard Nodes=localhost MaxTime=08:00:00 State=UP
PartitionName=gpu_a100 Nodes=localhost MaxTime=1-00:00:00 State=UP
CONF
  cat > /etc/slurm/gres.conf <<CONF
AutoDetect=off
NodeName=localhost Name=gpu ${GPU_TYPE:+Type=$GPU_TYPE }File=/dev/null
NodeName=localhost Name=gpu ${GPU_TYPE:+Type=$GPU_TYPE }File=/dev/zero
CONF
  [ -s /etc/munge/munge.key ] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; }
  chown munge:munge /etc/munge/munge.key /run/munge
  chmod 400 /etc/munge/munge.key
  runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
  slurmctld -c -i
  slurmd
  start_variant "$host" "$cpus" "$memory"
  wait_idle "" && wait_idle "$VARIANT/slurm.conf"
}

# The second cluster: its own ports, state, PID and log files; munge is shared.
start_variant() {
  local host=$1 cpus=$2 memory=$3
  mkdir -p "$VARIANT" "$STATE-variant/ctld" "$STATE-variant/d"
  cat > "$VARIANT/slurm.conf" <<CONF
ClusterName=asyncfl-variant
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=6827
SlurmdPort=6828
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
EnforcePartLimits=ALL
SelectType=select/cons_res
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
GresTypes=gpu
ReturnToService=2
StateSaveLocation=$STATE-variant/ctld
SlurmdSpoolDir=$STATE-variant/d
SlurmctldPidFile=/run/slurmctld-variant.pid
SlurmdPidFile=/run/slurmd-variant.pid
SlurmctldLogFile=/var/log/slurm/slurmctld-variant.log
SlurmdLogFile=/var/log/slurm/slurmd-variant.log
NodeName=variant NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory Gres=gpu:a100:2 State=UNKNOWN
PartitionName=batch Nodes=variant Default=YES MaxTime=04:00:00 State=UP
PartitionName=a100 Nodes=variant MaxTime=2-00:00:00 State=UP
CONF
  cat > "$VARIANT/gres.conf" <<CONF
AutoDetect=off
NodeName=variant Name=gpu Type=a100 File=/dev/null
NodeName=variant Name=gpu Type=a100 File=/dev/zero
CONF
  slurmctld -c -i -f "$VARIANT/slurm.conf"
  slurmd -N variant -f "$VARIANT/slurm.conf"
}

# Wait until the cluster whose slurm.conf is $1 (the default's if empty) has its node idle.
wait_idle() {
  local conf=${1:-/etc/slurm/slurm.conf}
  for _ in $(seq 60); do
    if [ "$(SLURM_CONF=$conf sinfo -h -o %T 2>/dev/null | sort -u)" = "idle" ]; then
      echo "SLURM cluster up ($conf): $(SLURM_CONF=$conf sinfo -h -o '%P %N %c CPUs %m MB %G %T')"
      return 0
    fi
    sleep 1
  done
  echo "SLURM node did not become idle ($conf): $(SLURM_CONF=$conf sinfo 2>&1)" >&2
  tail -n 20 /var/log/slurm/slurmctld*.log /var/log/slurm/slurmd*.log >&2
  return 1
}

stop() {
  for pidfile in "${PIDS[@]}"; do
    if [ -s "$pidfile" ]; then
      kill "$(cat "$pidfile")" 2>/dev/null || true
      rm -f "$pidfile"
    fi
  done
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
