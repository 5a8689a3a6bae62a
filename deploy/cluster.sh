#!/usr/bin/env bash
# Runs several Sluice instances behind one nginx, all on loopback: the recipe for serving past one
# process, and what tests/deploy/nginx_test.ts drives. It starts N `sluice serve` instances on
# consecutive ports, waits until each one's /health is ready, starts nginx (as the current user,
# with a generated config and every file it writes under one directory; /etc/nginx is never read),
# prints one "ready" line, and stops everything when it is stopped itself (SIGINT, SIGTERM) or when
# nginx exits. An instance that dies is reported; the others carry on.
#
# usage: deploy/cluster.sh [--instances N] [--port P] [--first-port P] [--model M]
#                          [--state-dir DIR] [--ready-timeout-s S] [-- SERVE FLAGS...]
#   --instances N       Sluice instances (default 3)
#   --port P            nginx's port on 127.0.0.1 (default 8080)
#   --first-port P      the first instance's port; the others follow it (default: --port + 1)
#   --model M           what each instance serves: demo (default), a directory or a hub id
#   --state-dir DIR     logs, pids and nginx's files (default: a temporary directory, removed at exit)
#   --ready-timeout-s S how long instances may take to become ready (default 300: a cold shader
#                       cache on a software adapter is slow)
#   SERVE FLAGS         passed to every instance, e.g. -- --sched fcfs --gpu-kv-mb 64
# Environment: SLUICE_BIN (a compiled sluice binary to run instead of main.ts), DENO (the deno
# binary; found on PATH or through npx), NGINX (the nginx binary).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
usage() { sed -n '9,21s/^# \{0,1\}//p' "$0"; }
log() { echo "sluice-cluster: $*" >&2; }

instances=3 port=8080 first_port="" model=demo state_dir="" ready_timeout=300 serve_flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --instances) instances="${2:?--instances needs a value}"; shift 2 ;;
    --port) port="${2:?--port needs a value}"; shift 2 ;;
    --first-port) first_port="${2:?--first-port needs a value}"; shift 2 ;;
    --model) model="${2:?--model needs a value}"; shift 2 ;;
    --state-dir) state_dir="${2:?--state-dir needs a value}"; shift 2 ;;
    --ready-timeout-s) ready_timeout="${2:?--ready-timeout-s needs a value}"; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; serve_flags=("$@"); break ;;
    *) echo "sluice-cluster: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
for n in "$instances" "$port" "$ready_timeout" ${first_port:+"$first_port"}; do
  case "$n" in '' | *[!0-9]*) echo "sluice-cluster: not a number: '$n'" >&2; exit 2 ;; esac
done
[ "$instances" -ge 1 ] || { echo "sluice-cluster: --instances must be at least 1" >&2; exit 2; }
first_port="${first_port:-$((port + 1))}"

# ---- the programs ----

nginx_bin="${NGINX:-$(command -v nginx || true)}"
[ -n "$nginx_bin" ] || [ ! -x /usr/sbin/nginx ] || nginx_bin=/usr/sbin/nginx
if [ -z "$nginx_bin" ]; then
  echo "sluice-cluster: nginx not found (Debian: apt-get install -y nginx; or set NGINX)" >&2
  exit 1
fi
command -v curl >/dev/null || { echo "sluice-cluster: curl not found" >&2; exit 1; }
if [ -n "${SLUICE_BIN:-}" ]; then
  sluice=("$SLUICE_BIN")
else
  deno="${DENO:-$(command -v deno || true)}"
  if [ -z "$deno" ]; then
    # The real binary, not the npx wrapper: the pid we signal must be the server itself.
    deno="$(npx -y deno@2.9.6 eval 'console.log(Deno.execPath())' 2>/dev/null)"
  fi
  sluice=("$deno" run -A "$root/main.ts")
fi

# ---- state and teardown ----

own_state_dir=0
if [ -z "$state_dir" ]; then
  state_dir="$(mktemp -d "${TMPDIR:-/tmp}/sluice-cluster-XXXXXX")"
  own_state_dir=1
fi
mkdir -p "$state_dir/nginx/tmp"
: >"$state_dir/instances"

pids=() ports=() nginx_pid="" sleeper=""

alive() { kill -0 "$1" 2>/dev/null; }

# shellcheck disable=SC2317 # reap and cleanup run from the EXIT trap
# Waits up to $1 seconds for the given pids to exit; SIGKILLs whatever is left.
reap() {
  local deadline=$((SECONDS + $1)) pid
  shift
  for pid in "$@"; do
    while alive "$pid" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
    if alive "$pid"; then
      log "pid $pid did not stop in time: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
}

# shellcheck disable=SC2317
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  [ -z "$sleeper" ] || kill "$sleeper" 2>/dev/null || true
  # Instances first: they drain (their streams still pass through nginx), then nginx goes.
  [ ${#pids[@]} -eq 0 ] || kill -TERM "${pids[@]}" 2>/dev/null || true
  [ ${#pids[@]} -eq 0 ] || reap 30 "${pids[@]}"
  if [ -n "$nginx_pid" ]; then
    kill -TERM "$nginx_pid" 2>/dev/null || true
    reap 10 "$nginx_pid"
  fi
  [ "$own_state_dir" = 0 ] || rm -rf "$state_dir"
  log "stopped"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- instances ----

for ((i = 0; i < instances; i++)); do
  p=$((first_port + i))
  "${sluice[@]}" serve --host 127.0.0.1 --port "$p" --model "$model" ${serve_flags[@]+"${serve_flags[@]}"} \
    >"$state_dir/instance-$i.log" 2>&1 </dev/null &
  pids+=("$!")
  ports+=("$p")
  echo "$! $p" >>"$state_dir/instances"
  log "instance $i pid $! on http://127.0.0.1:$p (log $state_dir/instance-$i.log)"
done

health() { curl -fsS --max-time 2 -o /dev/null "http://127.0.0.1:$1/health" 2>/dev/null; }

deadline=$((SECONDS + ready_timeout))
for ((i = 0; i < instances; i++)); do
  until health "${ports[$i]}"; do
    if ! alive "${pids[$i]}"; then
      log "instance $i exited before it was ready:"
      tail -n 20 "$state_dir/instance-$i.log" >&2
      exit 1
    fi
    if [ $SECONDS -ge $deadline ]; then
      log "instance $i not ready after ${ready_timeout} s"
      exit 1
    fi
    sleep 0.2
  done
done

# ---- nginx ----

upstreams=()
for p in "${ports[@]}"; do upstreams+=("127.0.0.1:$p"); done
bash "$here/nginx_conf.sh" --listen "127.0.0.1:$port" --dir "$state_dir/nginx" "${upstreams[@]}" \
  >"$state_dir/nginx/nginx.conf"
# -e: the error log before the config is read (the build's default may be a system path).
"$nginx_bin" -p "$state_dir/nginx" -c "$state_dir/nginx/nginx.conf" -e "$state_dir/nginx/error.log" \
  </dev/null &
nginx_pid=$!
echo "$nginx_pid" >"$state_dir/nginx.pid"
log "nginx pid $nginx_pid (config $state_dir/nginx/nginx.conf)"

deadline=$((SECONDS + 10))
until health "$port"; do
  if ! alive "$nginx_pid" || [ $SECONDS -ge $deadline ]; then
    log "nginx did not start:"
    tail -n 20 "$state_dir/nginx/error.log" >&2 || true
    exit 1
  fi
  sleep 0.1
done
log "ready http://127.0.0.1:$port ($instances instances)"

# ---- supervise until stopped ----

reported=()
while alive "$nginx_pid"; do
  for ((i = 0; i < instances; i++)); do
    if [ -z "${reported[$i]:-}" ] && ! alive "${pids[$i]}"; then
      reported[i]=1
      log "instance $i (pid ${pids[$i]}, port ${ports[$i]}) exited; nginx sends its work elsewhere"
    fi
  done
  sleep 1 &
  sleeper=$!
  wait "$sleeper" || true
done
log "nginx exited"
exit 1
