#!/usr/bin/env bash
# On a running, healthy container of the image (scripts/container_check.sh with KEEP=1): kill -9 one engine
# process inside it, run the image's HEALTHCHECK every few seconds until /health is "ok" again, then time a
# `stop`. The HEALTHCHECK must never fail during the reload (a recovering page is not dead).
#   KEEP=1 scripts/container_check.sh && OUT=docs/results/cpu-container-reload.json scripts/container_reload.sh
# Settings (environment):
#   ENGINE=podman NAME=spec-playground-check PORT=17860   the container and its host port (loopback)
#   POLL_S=3                 seconds between polls (each: GET /health, `healthcheck run`, the health status)
#   RELOAD_TIMEOUT=1200      give up if /health is not "ok" again by then
#   WAIT_START_PERIOD=1      kill only once the HEALTHCHECK's start period is over (failures inside it don't
#                            count, so a reload inside it would prove nothing); 0 kills at once
#   STOP=1                   then time `stop -t 60` (SIGTERM → exit); 0 leaves the container running
#   OUT=                     a JSON file for the raw results (every poll, the stop)
#   PYTHON=python3           writes the JSON
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${ENGINE:-podman}
name=${NAME:-spec-playground-check}
url=http://127.0.0.1:${PORT:-17860}/health
poll_s=${POLL_S:-3}
reload_timeout=${RELOAD_TIMEOUT:-1200}
python=${PYTHON:-python3}
log() { printf '[container_reload %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
status_of() { curl -s --max-time 5 "$url" | sed -n 's/.*"status":"\([a-z]*\)".*/\1/p'; }

[ "$("$engine" inspect --format '{{.State.Running}}' "$name" 2>/dev/null)" = true ] \
  || { echo "container_reload.sh: no running container $name (KEEP=1 scripts/container_check.sh)" >&2; exit 1; }
[ "$(status_of)" = ok ] || { echo "container_reload.sh: $url is not ok yet" >&2; exit 1; }
pid1=$("$engine" exec "$name" cat /proc/1/cmdline | tr '\0' ' ')
log "PID 1 in the container: $pid1"

if [ "${WAIT_START_PERIOD:-1}" = 1 ]; then
  started=$("$engine" inspect --format '{{.State.StartedAt.Unix}}' "$name")
  period_s=$("$engine" inspect --format '{{printf "%.0f" .Config.Healthcheck.StartPeriod.Seconds}}' "$name")
  wait_s=$(( started + period_s + 5 - $(date +%s) ))
  if [ "$wait_s" -gt 0 ]; then log "waiting ${wait_s}s for the start period to end"; sleep "$wait_s"; fi
fi
timeout 60 "$engine" healthcheck run "$name" >/dev/null \
  || { echo "container_reload.sh: the HEALTHCHECK fails before the kill" >&2; exit 1; }

# vLLM titles its engine-core processes VLLM::EngineCore (setproctitle): one per engine, the first started
# (the baseline's) has the lower pid.
target=$("$engine" exec "$name" sh -c 'for d in /proc/[0-9]*; do
  tr "\0" " " < "$d/cmdline" 2>/dev/null | grep -q "^VLLM::EngineCore" && echo "${d#/proc/}"; done; true' | sort -n | head -n1)
[ -n "$target" ] || { echo "container_reload.sh: no VLLM::EngineCore process in $name" >&2; exit 1; }
engine_count=$("$engine" exec "$name" sh -c 'grep -l "^VLLM::EngineCore" /proc/[0-9]*/cmdline 2>/dev/null | wc -l')
log "kill -9 $target (VLLM::EngineCore; $engine_count engine cores running)"
polls=$(mktemp)
t_kill=$(now)
"$engine" exec "$name" sh -c "kill -9 $target"  # the shell's kill: the image has no procps

# Poll until "ok" again after a state that isn't (the watcher looks every 2 s, so the first polls may
# still say ok).
seen_down=0; reload_s=""; failed_checks=0
while :; do
  t=$(since "$t_kill")
  state=$(status_of); state=${state:-none}
  # its message when it fails (exit 1: the check said dead; 125: an error of podman's own)
  if why=$(timeout 60 "$engine" healthcheck run "$name" 2>&1); then rc=0; else
    rc=$?; failed_checks=$((failed_checks + 1))
    log "healthcheck run: rc $rc: $(printf %s "$why" | grep -v 'systemd connection' | head -c 200)"
  fi
  podman_status=$("$engine" inspect --format '{{.State.Health.Status}}' "$name")
  printf '{"t_s": %s, "health": "%s", "check_rc": %s, "status": "%s"}\n' "$t" "$state" "$rc" "$podman_status" \
    >> "$polls"
  log "t=${t}s /health=$state healthcheck=$rc status=$podman_status"
  [ "$state" != ok ] && seen_down=1
  if [ "$seen_down" = 1 ] && [ "$state" = ok ]; then reload_s=$t; break; fi
  if awk -v t="$t" -v m="$reload_timeout" 'BEGIN { exit !(t >= m) }'; then break; fi
  sleep "$poll_s"
done
reload_log=$("$engine" logs --since "${t_kill%.*}" "$name" 2>&1 \
  | grep -E 'engine died|reload|ready|preset' | tail -n 8 || true)
log "reload: ${reload_s:-not back after ${reload_timeout}s}; failed health checks: $failed_checks"

stop_s=""; exit_code=""; stop_log=""
if [ "${STOP:-1}" = 1 ]; then
  t0=$(now)
  "$engine" stop -t 60 "$name" >/dev/null
  stop_s=$(since "$t0")
  exit_code=$("$engine" inspect --format '{{.State.ExitCode}}' "$name")
  stop_log=$("$engine" logs --tail 12 "$name" 2>&1 || true)
  log "stop: ${stop_s}s, exit code $exit_code"
fi

rc=0
PID1="$pid1" TARGET="$target" ENGINES="$engine_count" RELOAD_S="$reload_s" FAILED="$failed_checks" \
STOP_S="$stop_s" EXIT_CODE="$exit_code" RELOAD_LOG="$reload_log" STOP_LOG="$stop_log" POLLS="$polls" \
"$python" - "${OUT:-}" <<'EOF' || rc=$?
import json, os, sys
env = os.environ
polls = [json.loads(line) for line in open(env["POLLS"])]
num = lambda key: float(env[key]) if env.get(key) else None
result = {
    "pid1_cmdline": env["PID1"].strip(), "tini_is_pid1": env["PID1"].split()[:1] == ["tini"],
    "killed": {"pid_in_container": int(env["TARGET"]), "title": "VLLM::EngineCore",
               "engine_cores_before": int(env["ENGINES"])},
    "reload_s": num("RELOAD_S"), "failed_health_checks": int(env["FAILED"]),
    "health_states_seen": sorted({p["health"] for p in polls}),
    "podman_statuses_seen": sorted({p["status"] for p in polls}),
    "polls": polls, "reload_log": env["RELOAD_LOG"].splitlines(),
    "stop_s": num("STOP_S"), "stop_exit_code": int(env["EXIT_CODE"]) if env.get("EXIT_CODE") else None,
    "stop_log_tail": env["STOP_LOG"].splitlines(),
}
text = json.dumps(result, indent=1)
if sys.argv[1]:
    open(sys.argv[1], "w").write(text + "\n")
print(json.dumps({k: v for k, v in result.items() if k not in ("polls", "reload_log", "stop_log_tail")}))
sys.exit(0 if result["reload_s"] is not None and result["failed_health_checks"] == 0 else 1)
EOF
rm -f "$polls"
exit $rc
