# Shared by the scripts: free ports and a private Redis. Source it, don't run it.

# Prints a TCP port on 127.0.0.1 that was free a moment ago.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Starts redis-server on 127.0.0.1:$1 without persistence; sets REDIS_PID.
# Stop it with stop_redis.
start_redis() {
  local port=$1
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no --loglevel warning >/dev/null &
  REDIS_PID=$!
  for _ in $(seq 1 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "redis-server did not start on port $port" >&2
  return 1
}

# Starts redis-server on 127.0.0.1:$1 with its data in directory $2 (append-only file, fsync
# every second), so keys survive a restart; sets REDIS_PID. Stop it with stop_redis (SIGTERM:
# Redis flushes the AOF and exits).
start_persistent_redis() {
  local port=$1 dir=$2
  mkdir -p "$dir"
  # A session of its own: Ctrl-C (or a signal to the script's process group) reaches the relay
  # only, which then withdraws its registrations from this Redis before the script stops it.
  setsid redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --appendonly yes --appendfsync everysec \
    --save "" --daemonize no --loglevel notice --logfile "$dir/redis.log" >/dev/null &
  REDIS_PID=$!
  for _ in $(seq 1 200); do
    redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && return 0
    kill -0 "$REDIS_PID" 2>/dev/null || break
    sleep 0.05
  done
  echo "redis-server did not start on port $port (see $dir/redis.log)" >&2
  stop_redis
  return 1
}

stop_redis() {
  if [ -n "${REDIS_PID:-}" ]; then
    kill "$REDIS_PID" 2>/dev/null || true
    wait "$REDIS_PID" 2>/dev/null || true
    REDIS_PID=""
  fi
}

# Starts a development-mode relay for a load test (no passwords, rate limits out of the way) on
# free loopback ports: $1 the simp-server executable, $2 Redis's port, $3 its log file; further
# arguments go to simp-server. Sets RELAY_PID and RELAY_PORT (its control port) once it listens.
# Stop it with stop_bench_relay.
start_bench_relay() {
  local server=$1 redis_port=$2 log=$3 udp
  shift 3
  RELAY_PORT=$(free_port); udp=$(free_port)
  "$server" --host 127.0.0.1 --port "$RELAY_PORT" --udp-port "$udp" --redis "redis://127.0.0.1:$redis_port" \
    --no-login --log-level error --message-rate 10000000 --connection-rate 100000 \
    --login-rate 100000 --max-connections-per-host 1000000 \
    --max-unauthenticated-per-host 1000000 --max-unauthenticated 1000000 "$@" >"$log" 2>&1 &
  RELAY_PID=$!
  wait_for_port "$RELAY_PORT" "$RELAY_PID" && return 0
  echo "simp-server did not start (see $log)" >&2
  return 1
}

# Waits up to 10 s until something accepts TCP connections on 127.0.0.1:$1; with a process id
# $2, gives up as soon as that process is gone. Returns 1 if nothing listened.
wait_for_port() {
  local port=$1 pid=${2:-}
  for _ in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    if [ -n "$pid" ]; then kill -0 "$pid" 2>/dev/null || return 1; fi
    sleep 0.05
  done
  return 1
}

stop_bench_relay() {
  if [ -n "${RELAY_PID:-}" ]; then
    kill "$RELAY_PID" 2>/dev/null || true
    wait "$RELAY_PID" 2>/dev/null || true
    RELAY_PID=""
  fi
}
