#!/usr/bin/env bash
# Writes an HAProxy (2.6 or later) configuration for `kipp serve` replicas to stdout.
#
# Routing: a request that names a conversation (OpenAI's `prompt_cache_key` in the JSON body, else
# an X-Session-Id header) goes to a replica chosen by consistent hashing of that name, so every
# turn reaches the replica that holds the conversation's prefix in its K/V cache; any other
# request goes to the replica with the fewest connections. /health is checked every second (every
# 250 ms once it failed): a dead or draining replica is out within about 1.5 s, and at once when
# a connection to it fails. A request that never reached a replica (connection refused, closed
# before an answer, 503 from a draining or full replica) is retried on another one.
# Each response carries X-Kipp-Replica: the replica (server name, its address) that answered it.
#
# Usage: deploy/haproxy_cfg.sh REPLICAS [BIND] [STATS_SOCKET] > haproxy.cfg
#   REPLICAS      file with one replica address HOST:PORT per line (# comments, blank lines ok)
#   BIND          address:port the balancer listens on (default 127.0.0.1:8000)
#   STATS_SOCKET  path of an admin socket for `show stat` (default: none)
set -euo pipefail

if [[ $# -lt 1 || $# -gt 3 || $1 == -h || $1 == --help ]]; then
  sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 2
fi
replicas_file=$1
bind=${2:-127.0.0.1:8000}
stats_socket=${3:-}

mapfile -t replicas < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$replicas_file" | grep -v '^$')
if [[ ${#replicas[@]} -eq 0 ]]; then
  echo "haproxy_cfg.sh: $replicas_file lists no replica (one HOST:PORT per line)" >&2
  exit 1
fi
for replica in "${replicas[@]}"; do
  if [[ ! $replica =~ ^[A-Za-z0-9.-]+:[0-9]+$ ]]; then
    echo "haproxy_cfg.sh: '$replica' in $replicas_file is not HOST:PORT" >&2
    exit 1
  fi
done

cat <<EOF
# HAProxy configuration for ${#replicas[@]} kipp serve replicas (written by deploy/haproxy_cfg.sh).
global
    maxconn 4096
    # Request bodies up to this size are read whole: for prompt_cache_key and for retries.
    tune.bufsize 262144
EOF
[[ -n $stats_socket ]] && echo "    stats socket $stats_socket mode 600 level admin"
cat <<EOF

defaults
    mode http
    option http-buffer-request
    timeout connect 2s
    timeout http-request 30s
    timeout queue 60s
    # Generations and streams run long (streams send a comment every second while quiet).
    timeout client 10m
    timeout server 10m
    # Completions have no side effects: a request that a replica refused or never answered is
    # sent to another one (redispatch on every retry).
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response 503

frontend kipp
    bind $bind
    http-request set-var(txn.conversation) req.body,json_query('\$.prompt_cache_key')
    http-request set-var(txn.conversation) req.hdr(X-Session-Id) if !{ var(txn.conversation) -m found } { req.hdr(X-Session-Id) -m found }
    use_backend kipp_by_conversation if { var(txn.conversation) -m len gt 0 }
    default_backend kipp_least_connections

backend kipp_by_conversation
    balance hash var(txn.conversation)
    hash-type consistent
    option httpchk GET /health
    http-check expect status 200
    default-server check inter 1s fastinter 250ms downinter 1s fall 2 rise 2 observe layer4 error-limit 1 on-error mark-down
    http-response set-header X-Kipp-Replica %[srv_name]
EOF
for replica in "${replicas[@]}"; do echo "    server $replica $replica"; done
cat <<EOF

# The same replicas, their health taken from the backend above.
backend kipp_least_connections
    balance leastconn
    http-response set-header X-Kipp-Replica %[srv_name]
EOF
for replica in "${replicas[@]}"; do echo "    server $replica $replica track kipp_by_conversation/$replica"; done
