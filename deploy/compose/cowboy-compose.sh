#!/usr/bin/env bash
# Services of the compose testnet (docker-compose.yml); installed in the image as /usr/local/bin/cowboy-compose.
#
#   cowboy-compose genesis     one-shot, as root: `cowboy-node testnet` for TESTNET_VALIDATORS validators whose
#                              hosts are the services validator-0..N-1; listen addresses set to 0.0.0.0; each home
#                              copied into its own volume (/homes/validator-<i>), the faucet key into /faucet, the
#                              runners' [validators] table and testnet.json into /public; owned by uid 10001.
#                              Does nothing when /public/generated exists (an existing network is never changed).
#   cowboy-compose validator   waits for the genesis service to fill /data (its own home only), then runs the node
#   cowboy-compose runner      waits for /public and the validator RUNNER_VALIDATOR_RPC, initialises /runner (QUIC
#                              endpoint, metrics on 0.0.0.0, every validator's QUIC endpoint), funds and registers
#                              it from /faucet (serialised with flock: one faucet, several users), then runs it
#   cowboy-compose demo        the demo workload: deploys an actor with a timer, then submits an HTTP job to
#                              DEMO_URL every DEMO_INTERVAL_S seconds and logs when each one settles
#   cowboy-compose http        the small HTTP server the demo jobs call (GET /price)
#
# Every waiting mode gives up after COMPOSE_WAIT_S seconds (default 300) with a message naming what it waited for,
# so the compose file works on engines that ignore `depends_on` conditions (podman-compose 1.0.x).
set -euo pipefail

WAIT_S="${COMPOSE_WAIT_S:-300}"
# The container paths; COMPOSE_ROOT (tests only) is a directory standing in for the container's /.
HOMES="${COMPOSE_ROOT:-}/homes" FAUCET="${COMPOSE_ROOT:-}/faucet" PUBLIC="${COMPOSE_ROOT:-}/public"
DATA="${COMPOSE_ROOT:-}/data" RUNNER="${COMPOSE_ROOT:-}/runner"

die() { echo "cowboy-compose: $*" >&2; exit 1; }
# Hand files to the image's unprivileged user (uid 10001), when running as root (the genesis service).
own() { if [[ $EUID -eq 0 ]]; then chown "$1" 10001:10001 "$2"; fi; }

# wait_for DESCRIPTION COMMAND...: retry COMMAND every second for at most WAIT_S seconds.
wait_for() {
    local what="$1" waited=0
    shift
    until "$@" >/dev/null 2>&1; do
        if (( waited >= WAIT_S )); then
            die "gave up after ${WAIT_S}s waiting for $what"
        fi
        if (( waited % 15 == 0 )); then
            echo "cowboy-compose: waiting for $what" >&2
        fi
        sleep 1
        waited=$((waited + 1))
    done
}

genesis() {
    local n="${TESTNET_VALIDATORS:-4}" chain="${TESTNET_CHAIN_ID:-cowboy-compose-1}"
    local block_ms="${TESTNET_BLOCK_TIME_MS:-1000}" base="${TESTNET_BASE_PORT:-4000}"
    if [[ -f "$PUBLIC/generated" ]]; then
        echo "cowboy-compose: network already generated ($(cat "$PUBLIC/generated")); nothing to do"
        exit 0
    fi
    local tmp i hosts=()
    tmp="$(mktemp -d)"
    for ((i = 0; i < n; i++)); do
        [[ -d "$HOMES/validator-$i" ]] || die "$HOMES/validator-$i is not mounted (one volume per validator)"
        hosts+=(--host "validator-$i")
    done
    cowboy-node testnet --validators "$n" --output "$tmp/net" --chain-id "$chain" --block-time-ms "$block_ms" \
        --base-port "$base" "${hosts[@]}" >/dev/null
    for ((i = 0; i < n; i++)); do
        local home="$tmp/net/validator-$i"
        # Listen on every interface of the container; the peers keep dialling validator-<j> by service name.
        sed -i -E 's/^addr = "validator-[0-9]+:([0-9]+)"/addr = "0.0.0.0:\1"/' "$home/config.toml"
        cp -a "$home/." "$HOMES/validator-$i/"
        touch "$HOMES/validator-$i/.compose-ready"  # last: the validator starts only on a complete home
        own -R "$HOMES/validator-$i"
    done
    install -m 0600 "$tmp/net/faucet.key" "$FAUCET/faucet.key"
    own -R "$FAUCET"
    python3 - "$tmp/net" >"$PUBLIC/runner-validators.toml" <<'PY'
import json, sys, tomllib
from pathlib import Path
net = Path(sys.argv[1])
print("[validators]")
for v in json.loads((net / "testnet.json").read_text())["validators"]:
    port = tomllib.loads((net / v["name"] / "config.toml").read_text())["quic"]["addr"].rsplit(":", 1)[1]
    print(f'"{v["ed25519_public_key"]}" = "{v["name"]}:{port}"')
PY
    cp "$tmp/net/testnet.json" "$PUBLIC/testnet.json"
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["genesis_hash"])' "$PUBLIC/testnet.json" \
        >"$PUBLIC/generated"
    own -R "$PUBLIC"
    rm -rf "$tmp"
    echo "cowboy-compose: generated $n validators (chain $chain, genesis $(cat "$PUBLIC/generated"))"
}

validator() {
    wait_for "the genesis service to fill $DATA ($DATA/.compose-ready)" test -f "$DATA/.compose-ready"
    # A home that is there but broken makes `cowboy-node run` exit with a message naming the file.
    exec cowboy-node run --home "$DATA"
}

runner() {
    local rpc="${RUNNER_VALIDATOR_RPC:?set RUNNER_VALIDATOR_RPC}"
    wait_for "$PUBLIC/runner-validators.toml (genesis service)" test -f "$PUBLIC/runner-validators.toml"
    wait_for "the validator at $rpc" cowboy-node status --rpc "$rpc"
    if [[ ! -f "$RUNNER/runner.toml" ]]; then
        cowboy-runner init --home "$RUNNER" --validator-rpc "$rpc" >/dev/null
        python3 - "$RUNNER/runner.toml" "${RUNNER_QUIC_ENDPOINT:?set RUNNER_QUIC_ENDPOINT}" \
            "${RUNNER_METRICS_ADDR:-0.0.0.0:9465}" "$PUBLIC/runner-validators.toml" "${RUNNER_HTTP_DOMAINS:-demo-http}" <<'PY'
import re, sys
path, quic, metrics, validators = sys.argv[1:5]
text = open(path).read()
text, n = re.subn(r'^#\s*quic_endpoint\s*=.*$', f'quic_endpoint = "{quic}"', text, count=1, flags=re.M)
assert n == 1, "no quic_endpoint line in runner.toml"
section = text.index("[metrics]")
text = text[:section] + re.sub(r'^addr\s*=.*$', f'addr = "{metrics}"', text[section:], count=1, flags=re.M)
# Serve HTTP jobs for the demo's server (the on-chain capability lists the domains a runner calls).
domains = ", ".join(f'"{d}"' for d in sys.argv[5].split(",") if d)
text, n = re.subn(r'^http_domains\s*=.*$', f'http_domains = [{domains}]', text, count=1, flags=re.M)
assert n == 1, "no http_domains line in runner.toml"
open(path, "w").write(text + "\n" + open(validators).read())
PY
        echo "cowboy-compose: initialised $RUNNER (QUIC $RUNNER_QUIC_ENDPOINT)"
    fi
    # One faucet key, several users (the runners, the demo): one transaction from it at a time.
    RUNNER_HOME="$RUNNER" RUNNER_FAUCET_KEY="$FAUCET/faucet.key" flock "$FAUCET/faucet.key" cowboy-devnet-runner setup
    exec cowboy-runner run --home "$RUNNER"
}

demo() {
    local rpc="${DEMO_RPC:?set DEMO_RPC}"
    wait_for "the validator at $rpc" cowboy-node status --rpc "$rpc"
    wait_for "$FAUCET/faucet.key (genesis service)" test -f "$FAUCET/faucet.key"
    exec python3 /usr/local/lib/cowboy/demo.py
}

http() {
    local dir
    dir="$(mktemp -d)"
    printf '{"price": 42}' >"$dir/price"
    exec python3 -m http.server "${HTTP_PORT:-8080}" --bind 0.0.0.0 --directory "$dir"
}

case "${1:-}" in
    genesis | validator | runner | demo | http) "$1" ;;
    *) echo "usage: cowboy-compose genesis|validator|runner|demo|http" >&2; exit 2 ;;
esac
