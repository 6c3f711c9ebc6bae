#!/usr/bin/env bash
# A fleet of sinkstream replicas behind nginx on loopback (docs/SCALING.md).
#   cluster.sh up N PORT [-- serve flags]   N replicas on PORT+1..PORT+N sharing one
#                                           session store, nginx on 127.0.0.1:PORT;
#                                           returns once every replica and nginx answer
#   cluster.sh pids                         replica PIDs, one per line
#   cluster.sh start I                      (re)start replica I (1..N), e.g. after kill -9
#   cluster.sh metrics                      fleet view: replicas' /metrics summed + nginx status
#   cluster.sh down                         stops everything `up` started
# $SINKSTREAM_CLUSTER_DIR holds the state (default /tmp/sinkstream-cluster-$UID):
# store/ (the shared sessions), replica-I.{pid,log}, nginx.conf and its logs.
# $SINKSTREAM_BIN is the binary (default: build/release/sinkstream here).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
dir="${SINKSTREAM_CLUSTER_DIR:-/tmp/sinkstream-cluster-$(id -u)}"
bin="${SINKSTREAM_BIN:-$here/build/release/sinkstream}"
nginx_bin="${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}"

die() { echo "cluster.sh: $*" >&2; exit 1; }

# Alive and not a zombie (a replica killed with -9 stays one until reaped).
alive() { [[ -n "$1" && -e /proc/$1 ]] && ! grep -q ') Z ' "/proc/$1/stat" 2>/dev/null; }

healthy() { curl -fsS -m 2 "http://127.0.0.1:$1/health" >/dev/null 2>&1; }

wait_healthy() {  # port, what, pid (optional: fail fast if it died)
  for _ in $(seq 1 300); do
    healthy "$1" && return 0
    if [[ -n "${3:-}" ]] && ! alive "$3"; then die "$2 exited; see its log in $dir"; fi
    sleep 0.1
  done
  die "$2 did not become healthy on port $1"
}

start_replica() {  # index
  local i=$1 port flags
  port=$(($(cat "$dir/port") + i))
  read -r -a flags <"$dir/flags" || true
  "$bin" serve --port "$port" --state-dir "$dir/store" --shared-state --replica-id "replica-$i" "${flags[@]}" \
    >>"$dir/replica-$i.log" 2>&1 &
  echo $! >"$dir/replica-$i.pid"
  wait_healthy "$port" "replica $i" "$!"
}

cmd="${1:-}"
shift || true
case "$cmd" in
  up)
    [[ $# -ge 2 ]] || die "usage: cluster.sh up N PORT [-- serve flags]"
    n=$1 port=$2
    shift 2
    [[ "${1:-}" == "--" ]] && shift
    [[ -e "$dir/n" ]] && die "a cluster is already up in $dir (cluster.sh down first)"
    [[ -x "$bin" ]] || die "no sinkstream binary at $bin (build it, or set SINKSTREAM_BIN)"
    [[ -x "$nginx_bin" ]] || die "nginx not found (apt-get install nginx-light)"
    mkdir -p "$dir/store" "$dir/nginx-tmp"
    echo "$n" >"$dir/n"
    echo "$port" >"$dir/port"
    echo "$*" >"$dir/flags"
    for i in $(seq 1 "$n"); do start_replica "$i"; done
    servers=""
    for i in $(seq 1 "$n"); do servers+="server 127.0.0.1:$((port + i)) max_fails=1 fail_timeout=3s; "; done
    user_line=""
    [[ $(id -u) == 0 ]] && user_line="user root;"
    sed -e "s|@DIR@|$dir|g" -e "s|@PORT@|$port|g" -e "s|@SERVERS@|$servers|" -e "s|@USER@|$user_line|" \
      "$here/deploy/nginx.conf" >"$dir/nginx.conf"
    "$nginx_bin" -q -c "$dir/nginx.conf" -p "$dir" -g "daemon on;" || die "nginx did not start (see $dir/nginx-error.log)"
    wait_healthy "$port" "nginx"
    echo "cluster up: $n replicas on ports $((port + 1))-$((port + n)), nginx on 127.0.0.1:$port, store $dir/store"
    ;;
  pids)
    [[ -e "$dir/n" ]] || die "no cluster in $dir"
    for i in $(seq 1 "$(cat "$dir/n")"); do cat "$dir/replica-$i.pid"; done
    ;;
  start)
    [[ -e "$dir/n" ]] || die "no cluster in $dir"
    i=${1:?usage: cluster.sh start I}
    if alive "$(cat "$dir/replica-$i.pid")"; then die "replica $i is running"; fi
    start_replica "$i"
    ;;
  metrics)
    [[ -e "$dir/n" ]] || die "no cluster in $dir"
    port=$(cat "$dir/port")
    for i in $(seq 1 "$(cat "$dir/n")"); do
      curl -fsS -m 5 "http://127.0.0.1:$((port + i))/metrics" 2>/dev/null || echo "# replica $i down" >&2
    done | awk '/^#/ {next} NF == 2 {sum[$1] += $2; if (!($1 in seen)) {order[++n] = $1; seen[$1] = 1}}
      END {print "# fleet: sum over replicas"; for (k = 1; k <= n; ++k) printf "%s %.10g\n", order[k], sum[order[k]]}'
    echo "# nginx"
    curl -fsS -m 5 "http://127.0.0.1:$port/nginx_status" | sed 's/^/# /'
    ;;
  down)
    [[ -e "$dir/n" ]] || exit 0
    [[ -e "$dir/nginx.pid" ]] && kill "$(cat "$dir/nginx.pid")" 2>/dev/null || true
    for i in $(seq 1 "$(cat "$dir/n")"); do
      pid=$(cat "$dir/replica-$i.pid" 2>/dev/null || true)
      [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true
    done
    for i in $(seq 1 "$(cat "$dir/n")"); do
      pid=$(cat "$dir/replica-$i.pid" 2>/dev/null || true)
      for _ in $(seq 1 100); do alive "$pid" || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    done
    rm -f "$dir/n"
    echo "cluster down (logs and store kept in $dir)"
    ;;
  *)
    sed -n '2,12p' "$0" >&2
    exit 2
    ;;
esac
