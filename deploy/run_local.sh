#!/usr/bin/env bash
# Runs N `kipp serve` replicas of one model on this machine behind HAProxy (deploy/haproxy_cfg.sh
# writes its configuration): replicas on 127.0.0.1:PORT+1 .. PORT+N, the balancer on
# 127.0.0.1:PORT. Each replica gets THREADS compute threads (default: the cores divided among
# them). Ctrl-C or SIGTERM drains the replicas (each finishes its requests), then stops the
# balancer. Replica logs go to DIR/replica-K.log, the configuration to DIR/haproxy.cfg.
#
# Usage: deploy/run_local.sh -m MODEL [-n N] [-p PORT] [-t THREADS] [-d DIR] [-- kipp serve options]
#   environment: KIPP (the kipp binary; default build/release/kipp, else kipp on PATH),
#                HAPROXY (default haproxy on PATH, else /usr/sbin/haproxy)
# Example: deploy/run_local.sh -m qwen3-0.6b-q8_0.gguf -n 2 -p 8000 -- --max-batch 8
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
usage() {
  sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 2
}

model='' replicas=2 port=8000 threads='' dir=''
while [[ $# -gt 0 ]]; do
  case $1 in
    -m) model=$2; shift 2 ;;
    -n) replicas=$2; shift 2 ;;
    -p) port=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -d) dir=$2; shift 2 ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
[[ -n $model && $replicas =~ ^[1-9][0-9]*$ && $port =~ ^[0-9]+$ ]] || usage
kipp=${KIPP:-$here/../build/release/kipp}
[[ -x $kipp ]] || kipp=$(command -v kipp) || { echo "run_local.sh: no kipp binary (set KIPP)" >&2; exit 1; }
haproxy=${HAPROXY:-$(command -v haproxy || echo /usr/sbin/haproxy)}
[[ -x $haproxy ]] || { echo "run_local.sh: no haproxy (set HAPROXY)" >&2; exit 1; }
[[ -n $threads ]] || threads=$(( $(nproc) / replicas > 0 ? $(nproc) / replicas : 1 ))
[[ -n $dir ]] || dir=$(mktemp -d -t kipp-replicas.XXXXXX)
mkdir -p "$dir"

pids=()
stop() {
  trap '' INT TERM
  echo "run_local.sh: draining the replicas" >&2
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ -n ${balancer:-} ]]; then
    kill -TERM "$balancer" 2>/dev/null || true
    wait "$balancer" 2>/dev/null || true
  fi
  exit 0
}
trap stop INT TERM

: > "$dir/replicas"
for k in $(seq 1 "$replicas"); do
  replica_port=$((port + k))
  "$kipp" serve -m "$model" --host 127.0.0.1 --port "$replica_port" --threads "$threads" "$@" \
    > "$dir/replica-$k.out" 2> "$dir/replica-$k.log" &
  pids+=($!)
  echo "127.0.0.1:$replica_port" >> "$dir/replicas"
done
for k in $(seq 1 "$replicas"); do
  until grep -q 'listening on' "$dir/replica-$k.out"; do
    if ! kill -0 "${pids[k-1]}" 2>/dev/null; then
      echo "run_local.sh: replica $k did not start:" >&2
      cat "$dir/replica-$k.log" >&2
      stop
    fi
    sleep 0.2
  done
done

"$here/haproxy_cfg.sh" "$dir/replicas" "127.0.0.1:$port" > "$dir/haproxy.cfg"
"$haproxy" -db -f "$dir/haproxy.cfg" &
balancer=$!
echo "run_local.sh: $replicas replicas x $threads threads behind http://127.0.0.1:$port (logs and configuration in $dir)" >&2
wait "$balancer" || echo "run_local.sh: the balancer stopped" >&2
stop
