#!/usr/bin/env bash
# `make compose-test`: build the image, bring up the compose testnet (docker-compose.yml), check it, tear it down.
#
# Checks, each bounded in time: the 4 validators answer on their published 127.0.0.1 ports and finalize blocks;
# they agree on the block hash at a common height; both runners registered; a demo HTTP job settles (the demo's
# log says "settled ok=True"); the demo actor's timer fired; Prometheus scrapes every validator and runner, every
# alert rule evaluates and every Grafana panel query returns series; the node and runner containers report
# healthy (a runner's health check must not probe a node RPC).
# The project (and every volume) is removed at the end, whatever happened.
#
# Environment: CONTAINER_ENGINE (docker|podman), IMAGE, BASE_IMAGE (see `make image`); PROMETHEUS_IMAGE and
# GRAFANA_IMAGE as in docker-compose.yml. Where the Prometheus image cannot be pulled (no registry), one is built
# from Debian's package (deploy/prometheus/Containerfile.debian on BASE_IMAGE, else debian:bookworm-slim); where
# the Grafana image cannot be pulled, Grafana is left out and the run says so.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

ENGINE="${CONTAINER_ENGINE:-docker}"
IMAGE="${IMAGE:-cowboy-node:local}"
PROJECT="${COMPOSE_PROJECT:-cowboy-compose-test}"
WAIT_S="${COMPOSE_TEST_WAIT_S:-420}"
if [[ "$ENGINE" == podman ]]; then
    if command -v podman-compose >/dev/null 2>&1; then compose=(podman-compose -p "$PROJECT"); else
        compose=(podman compose -p "$PROJECT"); fi
else
    compose=(docker compose -p "$PROJECT")
fi
t0=$(date +%s)
say() { printf '[compose-test +%3ss] %s\n' "$(( $(date +%s) - t0 ))" "$*"; }
fail() { say "FAIL: $*"; exit 1; }

build=("$ENGINE" build)
[[ "$ENGINE" == podman ]] && build+=(--format docker)
[[ -n "${BASE_IMAGE:-}" ]] && build+=(--build-arg "BASE_IMAGE=$BASE_IMAGE")
say "engine: $ENGINE (${compose[*]})"
base_image_hint() {  # after a failed build: the pinned base image could not be pulled? Say which override to use.
    grep -qiE 'pull|registry|manifest|dial tcp|no such host|name resolution|timeout|unauthorized' \
        /tmp/"$PROJECT"-build.log || return 0
    local pinned local_python
    pinned="$(sed -n 's/^ARG BASE_IMAGE=//p' Dockerfile)"
    local_python="$($ENGINE images --format '{{.Repository}}:{{.Tag}}' 2>/dev/null | grep -iE 'python.*3\.11' | head -1)"
    say "the build could not pull its base image ${BASE_IMAGE:-$pinned} (no registry reachable?)."
    if [[ -n "$local_python" ]]; then
        say "a local Python 3.11 image exists: rerun with   make compose-test BASE_IMAGE=$local_python"
    else
        say "build from a local Python 3.11 image instead:   make compose-test BASE_IMAGE=<local python:3.11 image>"
        say "(README, containers: where no registry is reachable, build or load one first)"
    fi
}
"${build[@]}" -t "$IMAGE" . >/tmp/"$PROJECT"-build.log 2>&1 || {
    tail -40 /tmp/"$PROJECT"-build.log; base_image_hint; fail "build"; }
say "built $IMAGE"

available() {  # available IMAGE: present locally or pullable
    $ENGINE image inspect "$1" >/dev/null 2>&1 || timeout 60 $ENGINE pull -q "$1" >/dev/null 2>&1
}
export PROMETHEUS_IMAGE="${PROMETHEUS_IMAGE:-docker.io/prom/prometheus:v2.53.0}"
if ! available "$PROMETHEUS_IMAGE"; then
    say "cannot pull $PROMETHEUS_IMAGE: building Prometheus from Debian's package instead"
    PROMETHEUS_IMAGE=localhost/cowboy-prometheus-debian
    "${build[@]}" -t "$PROMETHEUS_IMAGE" -f deploy/prometheus/Containerfile.debian deploy/prometheus \
        >/tmp/"$PROJECT"-build.log 2>&1 || { tail -40 /tmp/"$PROJECT"-build.log; fail "build"; }
fi
services=(genesis validator-0 validator-1 validator-2 validator-3 runner-0 runner-1 demo-http demo prometheus)
export GRAFANA_IMAGE="${GRAFANA_IMAGE:-docker.io/grafana/grafana-oss:11.1.0}"
grafana_verdict="Grafana started"
if available "$GRAFANA_IMAGE"; then
    services+=(grafana)
else
    grafana_verdict="Grafana NOT checked (cannot pull $GRAFANA_IMAGE)"
    say "NOTE: cannot pull $GRAFANA_IMAGE (no registry here): Grafana not started; its panels' queries are" \
        "checked against a real Prometheus by tests/e2e/test_prometheus.py"
fi

cleanup() {
    local status=$?
    if (( status != 0 )); then
        for s in genesis validator-0 runner-0 runner-1 demo; do
            echo "----- logs of $s (tail) -----"
            $ENGINE logs --tail 25 "$(cid "$s")" 2>&1 || true
        done
    fi
    say "tearing down (down -v, and the project's network)"
    "${compose[@]}" down -v >/dev/null 2>&1 || true
    # podman-compose 1.0 leaves the project network behind after `down`; docker compose has removed it already.
    $ENGINE network rm "${PROJECT}_default" >/dev/null 2>&1 || true
    exit "$status"
}
trap cleanup EXIT
cid() {  # container of a service: podman-compose names it PROJECT_SERVICE_1, docker compose PROJECT-SERVICE-1
    if [[ "${compose[0]}" == podman-compose ]]; then echo "${PROJECT}_$1_1"; else echo "${PROJECT}-$1-1"; fi
}

"${compose[@]}" down -v >/dev/null 2>&1 || true
# podman-compose prints an "Error: ... no such volume" line for every volume it is about to create: keep its
# chatter in a file, shown only if `up` fails.
"${compose[@]}" up -d "${services[@]}" >/tmp/"$PROJECT"-up.log 2>&1 || { cat /tmp/"$PROJECT"-up.log; fail "up"; }
say "up: ${services[*]}"

deadline=$(( $(date +%s) + WAIT_S ))
until_ok() {  # until_ok WHAT COMMAND...: retry every 2 s until the overall deadline
    local what="$1"
    shift
    until "$@"; do
        (( $(date +%s) < deadline )) || fail "timed out waiting for: $what"
        sleep 2
    done
    say "ok: $what"
}
height() { curl -fsS --max-time 3 "http://127.0.0.1:$1/status" | python3 -c 'import json,sys; print(json.load(sys.stdin)["height"])'; }
all_at_least() {
    local p h
    for p in 4000 4010 4020 4030; do
        h="$(height "$p" 2>/dev/null)" || return 1
        (( h >= $1 )) || return 1
    done
}
until_ok "all 4 validators finalized height >= 5 (RPC on 127.0.0.1:4000/4010/4020/4030)" all_at_least 5

agree() {
    local h=1000000000 p x hashes=()
    for p in 4000 4010 4020 4030; do x="$(height "$p")"; (( x < h )) && h=$x; done
    for p in 4000 4010 4020 4030; do
        hashes+=("$(curl -fsS --max-time 3 "http://127.0.0.1:$p/block/$h" | python3 -c 'import json,sys; print(json.load(sys.stdin)["hash"])')")
    done
    [[ "$(printf '%s\n' "${hashes[@]}" | sort -u | wc -l)" == 1 ]] || { say "disagreement at $h: ${hashes[*]}"; return 1; }
    say "validators agree at height $h: ${hashes[0]}"
}
until_ok "the validators agree on the block at a common height" agree

registered() { $ENGINE logs "$(cid "$1")" 2>&1 | grep -qE 'registering|already registered' && \
    $ENGINE logs "$(cid "$1")" 2>&1 | grep -q '"status": "success"\|already registered'; }
until_ok "runner-0 registered itself" registered runner-0
until_ok "runner-1 registered itself" registered runner-1

settled() { $ENGINE logs "$(cid demo)" 2>&1 | grep -q 'settled ok=True'; }
until_ok "a demo HTTP job settled (demo log: settled ok=True)" settled
$ENGINE logs "$(cid demo)" 2>&1 | grep 'demo:' | head -5 | sed 's/^/    /'
ticks() { $ENGINE logs "$(cid demo)" 2>&1 | grep -qE 'settled ok=True .*\(ticks=[1-9]'; }
until_ok "the demo actor's timer fired (ticks >= 1)" ticks

targets_up() {
    curl -fsS --max-time 3 http://127.0.0.1:9090/api/v1/targets | python3 -c '
import json, sys
active = json.load(sys.stdin)["data"]["activeTargets"]
up = sorted(t["labels"]["instance"] for t in active if t["health"] == "up")
print("    prometheus targets up:", " ".join(up))
sys.exit(0 if len(up) == 6 else 1)'
}
until_ok "Prometheus scrapes all 4 validators and both runners" targets_up

panels_answer() {  # every Grafana panel query and every metric an alert names has series in this Prometheus
    python3 - deploy/grafana/dashboards/cowboy-testnet.json <<'PY'
import json, re, sys, urllib.parse, urllib.request
def query(q):
    url = "http://127.0.0.1:9090/api/v1/query?" + urllib.parse.urlencode({"query": q})
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)["data"]["result"]
with urllib.request.urlopen("http://127.0.0.1:9090/api/v1/rules", timeout=5) as r:
    rules = [x for g in json.load(r)["data"]["groups"] for x in g["rules"]]
bad = [f"rule {x['name']}: {x['health']}" for x in rules if x["health"] != "ok"] if rules else ["no rules loaded"]
exprs = [t["expr"] for p in json.load(open(sys.argv[1]))["panels"] for t in p["targets"]]
bad += [f"panel query without series: {e}" for e in exprs if not query(e)]
names = sorted({n for x in rules for n in re.findall(r"\bcowboy_[a-z0-9_]+", x["query"])})
bad += [f"metric of an alert not scraped: {n}" for n in names if not query(f"count({n})")]
print(f"    {len(rules)} alert rules healthy, {len(exprs)} panel queries answered, {len(names)} alert metrics scraped"
      if not bad else "    " + "\n    ".join(bad))
sys.exit(1 if bad else 0)
PY
}
until_ok "every alert rule evaluates, every dashboard query and alert metric has series" panels_answer

healthy() {  # podman without systemd runs no health timers: run the check itself (what a timer would run)
    if [[ "$ENGINE" == podman ]]; then
        podman healthcheck run "$(cid "$1")" >/dev/null 2>&1
    else
        [[ "$(docker inspect --format '{{.State.Health.Status}}' "$(cid "$1")" 2>/dev/null)" == healthy ]]
    fi
}
for s in validator-0 runner-0; do
    until_ok "$s container reports healthy" healthy "$s"
done
grafana_up() {  # Grafana answers and has provisioned the testnet dashboard
    python3 - <<'PY'
import json, sys, urllib.request
try:
    with urllib.request.urlopen("http://127.0.0.1:3000/api/health", timeout=5) as r:
        ok = json.load(r).get("database") == "ok"
    with urllib.request.urlopen("http://127.0.0.1:3000/api/search?query=cowboy", timeout=5) as r:
        ok = ok and bool(json.load(r))
except Exception:
    ok = False
sys.exit(0 if ok else 1)
PY
}
if [[ " ${services[*]} " == *" grafana "* ]]; then
    until_ok "Grafana answers on 127.0.0.1:3000 with the provisioned dashboard" grafana_up
    grafana_verdict="Grafana checked"
fi
nofile="$($ENGINE logs "$(cid validator-0)" 2>&1 | grep -m1 'file-descriptor limit' || true)"
[[ -n "$nofile" ]] && say "validator-0 said: $nofile"
say "PASS: compose testnet ($ENGINE) — 4 validators agree, 2 runners registered, a job settled, timers fire;" \
    "$grafana_verdict"
