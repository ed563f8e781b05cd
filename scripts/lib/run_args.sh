# What scripts/run needs to know of the arguments it passes on to tern,
# and the sizes of its demo config.
# Sourced, not run.
#
# parse_run_args ARGS... sets
#   RUN_OWN_CONFIG  1 when tern gets a config of the user's own (-c), or
#                   only prints something (--help, --version)
#   RUN_WORKERS     the workers tern will run: --workers N, else one per CPU
#                   (tern's default, "auto")
#   RUN_URLS        the addresses tern will serve, as URLs: one per
#                   --listen, else http://127.0.0.1:8080
#   RUN_LISTEN_GIVEN  1 when --listen was given
parse_run_args() {
  RUN_OWN_CONFIG=""
  RUN_WORKERS=""
  RUN_URLS=()
  RUN_LISTEN_GIVEN=""
  local args=("$@") i arg value
  for ((i = 0; i < ${#args[@]}; i++)); do
    arg=${args[i]}
    value=""
    case "$arg" in
      -c | --config | -c* | --config=* | -h | --help | -v | --version) RUN_OWN_CONFIG=1 ;;
      --workers) RUN_WORKERS=${args[i + 1]:-} ;;
      --workers=*) RUN_WORKERS=${arg#--workers=} ;;
      --listen) value=${args[i + 1]:-} ;;
      --listen=*) value=${arg#--listen=} ;;
    esac
    if [ -n "$value" ]; then
      local scheme=http
      if [[ "$value" == *" tls" ]]; then
        scheme=https
        value=${value% tls}
      fi
      # "*:8080" is every IPv4 address, as tern reads it.
      [[ "$value" == \*:* ]] && value="0.0.0.0:${value#\*:}"
      RUN_URLS+=("$scheme://$value")
    fi
  done
  [[ "$RUN_WORKERS" =~ ^[0-9]+$ ]] && [ "$RUN_WORKERS" -ge 1 ] || RUN_WORKERS=$(nproc 2>/dev/null || echo 1)
  if [ ${#RUN_URLS[@]} -gt 0 ]; then
    RUN_LISTEN_GIVEN=1
  else
    RUN_URLS=("http://127.0.0.1:8080")
  fi
}

# demo_limits WORKERS LIMIT: sizes for the demo that fit LIMIT, the
# descriptor limit tern will have (it raises its soft limit to the hard
# one, `ulimit -Hn`): per worker, a share of it for connections and for the
# open-file caches of the static files and of PHP's scripts, as tern counts
# them at start. Sets DEMO_TOP and DEMO_STATIC, the config's lines; empty
# where the defaults (10,000 each) fit.
demo_limits() {
  local workers=$1 limit=$2 share cache connections
  DEMO_TOP=""
  DEMO_STATIC=""
  [ "$limit" = unlimited ] && return 0
  share=$(((limit - 64) / workers))
  cache=$((share / 8))
  [ "$cache" -gt 10000 ] && cache=10000
  # Beside connections: 16 for the loop, 2 listeners, the pool to php-fpm,
  # and a cache for each of the static files and PHP's scripts.
  connections=$((share - 16 - 2 - 4 - 2 * cache))
  [ "$connections" -gt 10000 ] && connections=10000
  if [ "$connections" -lt 10000 ]; then
    DEMO_TOP="max_connections = $connections"
  fi
  if [ "$cache" -lt 10000 ]; then
    DEMO_STATIC="
[static]
cache_entries = $cache"
  fi
}
