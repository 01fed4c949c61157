#!/usr/bin/env bash
# Build the CPU image, run it on loopback, drive it end to end, stop and remove the container, print a summary.
#   scripts/container_check.sh
# Settings (environment):
#   ENGINE=podman                      or docker
#   BASE_IMAGE=localhost/debian-base:bookworm   made by scripts/container_base.sh when missing (podman);
#                                      BASE_IMAGE=python:3.11-slim for the official base
#   IMAGE=localhost/spec-playground:cpu   PORT=17860 (host side, 127.0.0.1 only)
#   WHEELS=/opt/wheels                 a folder holding torch-2.13.0+cpu's wheel: mounted into the build, and
#                                      PyTorch's index is then not used (default: /opt/wheels when it has one)
#   EXTRA_CA=/etc/ssl/certs/ca-certificates.crt   a CA bundle for pip inside the build (a TLS proxy's);
#                                      default: the host pip's own (PIP_CERT, or pip config's global.cert)
#   NO_CACHE=1                         build from scratch;  KEEP=1 leave the container running
#   BUILD_TIMEOUT=5400 HEALTH_TIMEOUT=1800 RUN_TIMEOUT=900   bounded waits, in seconds
#   PYTHON=.venv/bin/python            a Python with gradio_client, for the /run check
#   NICE="nice -n 19 ionice -c3"       how heavy commands run (the container inherits it)
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${ENGINE:-podman}
base=${BASE_IMAGE:-localhost/debian-base:bookworm}
image=${IMAGE:-localhost/spec-playground:cpu}
port=${PORT:-17860}
name=${NAME:-spec-playground-check}
build_timeout=${BUILD_TIMEOUT:-5400}
health_timeout=${HEALTH_TIMEOUT:-1800}
run_timeout=${RUN_TIMEOUT:-900}
read -r -a nice <<< "${NICE-nice -n 19 ionice -c3}"
python=${PYTHON:-}
if [ -z "$python" ]; then
  if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
fi
"$python" -c 'import gradio_client' 2>/dev/null \
  || { echo "container_check.sh: $python has no gradio_client (set PYTHON=...)" >&2; exit 1; }
log() { printf '[container_check %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# -- the base image --------------------------------------------------------------------------------------
if [[ $base == localhost/* ]] && ! "$engine" image exists "$base" 2>/dev/null; then
  log "no $base yet: scripts/container_base.sh"
  IMAGE=$base CONTAINER_ENGINE=$engine "${nice[@]}" scripts/container_base.sh
fi

# -- what this host's engine needs to start a container --------------------------------------------------
# Tried in order on the base image: the engine's defaults; then rlimits no higher than this process's own
# (a runtime can't raise them without CAP_SYS_RESOURCE; podman asks for nofile=1048576); then runc instead of
# crun (crun 1.8 refuses hybrid cgroup v1/v2 hosts).
run_opts=()
if [ "$engine" = podman ]; then
  nofile=$(ulimit -Hn); nproc=$(ulimit -Hu)
  [ "$nofile" = unlimited ] || [ "$nofile" -gt 65536 ] && nofile=65536
  [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ] && nproc=32768
  limits=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
  found=0
  for candidate in "" "limits" "runc limits"; do
    opts=()
    [[ $candidate == *runc* ]] && opts+=(--runtime runc)
    [[ $candidate == *limits* ]] && opts+=("${limits[@]}")
    if timeout 120 "$engine" run --rm "${opts[@]}" "$base" true >/dev/null 2>&1; then
      run_opts=("${opts[@]}"); found=1; break
    fi
  done
  [ $found = 1 ] || { echo "container_check.sh: $engine can't start a container from $base here" >&2;
                      timeout 120 "$engine" run --rm "$base" true; exit 1; }
  log "runtime options: ${run_opts[*]:-(defaults)}"
fi

# -- build -----------------------------------------------------------------------------------------------
build_opts=(--build-arg DEVICE=cpu --build-arg "BASE_IMAGE=$base" -t "$image")
[ "$engine" = podman ] && build_opts+=(--format docker "${run_opts[@]}")
[ -n "${NO_CACHE:-}" ] && build_opts+=(--no-cache)
pip_options=""
wheels=${WHEELS-/opt/wheels}
if [ -n "$wheels" ] && compgen -G "$wheels/torch-2.13.0+cpu-*.whl" >/dev/null; then
  [ "$engine" = podman ] || { echo "container_check.sh: WHEELS needs podman (build-time volumes)" >&2; exit 1; }
  build_opts+=(-v "$(realpath "$wheels"):/tmp/wheels:ro" --build-arg TORCH_INDEX_URL=)
  pip_options+=" --find-links /tmp/wheels"
fi
if [ -n "${EXTRA_CA+x}" ]; then extra_ca=$EXTRA_CA
elif [ -n "${PIP_CERT:-}" ]; then extra_ca=$PIP_CERT
else extra_ca=$(python3 -m pip config get global.cert 2>/dev/null || true); fi
if [ -n "$extra_ca" ] && [ -f "$extra_ca" ]; then
  [ "$engine" = podman ] || { echo "container_check.sh: EXTRA_CA needs podman (build-time volumes)" >&2; exit 1; }
  build_opts+=(-v "$(realpath "$extra_ca"):/tmp/host-ca.crt:ro")
  pip_options+=" --cert /tmp/host-ca.crt"
fi
[ -n "$pip_options" ] && build_opts+=(--build-arg "PIP_OPTIONS=${pip_options# }")
log "build: $engine build ${build_opts[*]} ."
t0=$(date +%s)
timeout "$build_timeout" "${nice[@]}" "$engine" build "${build_opts[@]}" . > /tmp/container_check.build.log 2>&1 \
  || { tail -40 /tmp/container_check.build.log; echo "container_check.sh: build failed (log: /tmp/container_check.build.log)" >&2; exit 1; }
build_s=$(( $(date +%s) - t0 ))
size=$("$engine" image inspect --format '{{.Size}}' "$image")
log "built $image in ${build_s}s, $(( size / 1000000 )) MB"

# -- run -------------------------------------------------------------------------------------------------
"$engine" rm -f "$name" >/dev/null 2>&1 || true
cleanup() {
  if [ -z "${KEEP:-}" ]; then
    "$engine" stop -t 60 "$name" >/dev/null 2>&1 || true
    "$engine" rm -f "$name" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
t0=$(date +%s)
# --shm-size: the two engines' shared-memory queues need ~800 MiB of /dev/shm (the default is 64 MiB).
"${nice[@]}" "$engine" run -d --name "$name" --shm-size=2g -p "127.0.0.1:$port:7860" "${run_opts[@]}" "$image" \
  2> >(grep -v 'systemd connection' >&2) >/dev/null  # podman without systemd: no timer, healthcheck run works
url=http://127.0.0.1:$port
log "started $name on $url; waiting for /health (at most ${health_timeout}s)"
health=""
while :; do
  health=$(curl -s --max-time 5 "$url/health" || true)
  [[ $health == *'"status":"ok"'* ]] && break
  if [[ $health == *'"status":"error"'* ]]; then
    "$engine" logs --tail 60 "$name"; echo "container_check.sh: the engines failed to load: $health" >&2; exit 1
  fi
  if [ "$("$engine" inspect --format '{{.State.Running}}' "$name")" != true ]; then
    "$engine" logs --tail 60 "$name"; echo "container_check.sh: the container exited" >&2; exit 1
  fi
  if [ $(( $(date +%s) - t0 )) -ge "$health_timeout" ]; then
    "$engine" logs --tail 60 "$name"; echo "container_check.sh: not healthy after ${health_timeout}s: $health" >&2; exit 1
  fi
  sleep 5
done
healthy_s=$(( $(date +%s) - t0 ))
log "healthy after ${healthy_s}s: $health"

# -- checks ----------------------------------------------------------------------------------------------
failures=0
check() { if eval "$2"; then log "PASS $1"; else log "FAIL $1"; failures=$((failures + 1)); fi; }
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$url/health")
check "/health answers 200" '[ "$code" = 200 ]'
check "/health says nothing but status and preset" \
  'printf %s "$health" | "$python" -c "import json, sys; sys.exit(set(json.load(sys.stdin)) != {\"status\", \"preset\"})"'
pid=$("$engine" inspect --format '{{.State.Pid}}' "$name")
uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")
users=$("$engine" top "$name" user 2>/dev/null | tail -n +2 | sort -u | tr '\n' ' ')
check "the app runs unprivileged (pid $pid on the host: uid $uid; podman top users: ${users})" \
  '[ "$uid" = 1000 ] && [ -n "$users" ] && ! printf %s "$users" | grep -qw root'
check "the image's user is playground" '[ "$("$engine" exec "$name" id -un)" = playground ]'
check "healthcheck run passes" 'timeout 60 "$engine" healthcheck run "$name" >/dev/null'
check "tini is PID 1 (signals forwarded, orphans reaped)" '[ "$("$engine" exec "$name" cat /proc/1/comm)" = tini ]'
client=$(mktemp --suffix .py); result_file=$(mktemp)
cat > "$client" <<'EOF'
import json, os, sys
sys.path.insert(0, os.getcwd())  # the outputs' names from the page's code (no engines imported)
from gradio_client import Client
from specplay.page.live_run import API_OUTPUTS
prompt = ("Rewrite this sentence in the passive voice: The committee approved the new budget on Monday, "
          "and the mayor signed it the next day.")
values = Client(sys.argv[1], verbose=False).predict(prompt, 32, 0.0, "sequential", api_name="/run")
out = dict(zip(API_OUTPUTS, values))
result = out["result"] if isinstance(out["result"], dict) else json.loads(out["result"])
base, spec = result["baseline"], result["speculative"]
print(json.dumps({"identical": result["identical"], "tokens": len(base["token_ids"]), "text": base["text"],
                  "baseline_tokens_per_s": round(base["tokens_per_s"], 2),
                  "speculative_tokens_per_s": round(spec["tokens_per_s"], 2),
                  "speedup": round(result["speedup"], 2), "acceptance_rate": spec.get("acceptance_rate"),
                  "baseline_steps": base["steps"], "speculative_steps": spec["steps"]}))
sys.exit(0 if (not out["error"] and result["identical"] is True and base["text"].strip() and spec["text"].strip())
         else 1)
EOF
check "/run: identical outputs at temperature 0, non-empty text" \
  'timeout "$run_timeout" "$python" "$client" "$url" > "$result_file"'
run_result=$(cat "$result_file"); rm -f "$client" "$result_file"

stop_s="(kept running: KEEP=1)"
if [ -z "${KEEP:-}" ]; then
  t0=$(date +%s)
  "$engine" stop -t 60 "$name" >/dev/null 2>&1 || true
  stop_s="$(( $(date +%s) - t0 )) s (SIGTERM: the app shuts both engines down)"
fi

# -- summary ---------------------------------------------------------------------------------------------
echo
echo "== container check ($engine, base $base) =="
echo "build time:        ${build_s} s${NO_CACHE:+ (no cache)}"
echo "image size:        $(( size / 1000000 )) MB ($size bytes)"
echo "time to healthy:   ${healthy_s} s (from run to /health ok)"
echo "/health:           $health"
echo "/run result:       $run_result"
echo "stop:              $stop_s"
echo "checks failed:     $failures"
[ "$failures" = 0 ]
