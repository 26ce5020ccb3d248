#!/usr/bin/env bash
# Start a local single-validator Cowboy devnet.
#
#   deploy/devnet.sh [run|init] [INIT_FLAGS...]
#
#   run   (default) initialise DEVNET_HOME if it has no config.toml, then exec `cowboy-node run`
#   init  initialise DEVNET_HOME if it has no config.toml, print the summary and exit 0
#         (used by the one-shot `init` service of docker-compose.yml)
#
# INIT_FLAGS are passed to `cowboy-node init` when the home is created, e.g.
#   --rpc-addr 0.0.0.0:4000 --quic-addr 0.0.0.0:4433 --metrics-addr 0.0.0.0:9464 --block-time-ms 500
# An existing home is never modified: delete it to start a new chain.
#
# Environment:
#   DEVNET_HOME      node home directory (default ./devnet-home)
#   DEVNET_CHAIN_ID  chain id for a new home (default cowboy-devnet-1)
#   COWBOY_NODE      cowboy-node executable (default .venv/bin/cowboy-node of this checkout,
#                    else cowboy-node on PATH)
#   DEVNET_RUNNER    1: also start one local runner (run mode only; default 0, node only). The node then
#                    runs as a child of this script, next to deploy/devnet-runner.sh, which waits for the
#                    RPC, initialises DEVNET_RUNNER_HOME, funds the runner from the faucet key, registers it
#                    and runs `cowboy-runner run`. SIGINT/SIGTERM stop both (the runner first); when the node
#                    exits the runner is stopped; if only the runner stops, the node keeps running.
#   DEVNET_RUNNER_HOME  runner home (default DEVNET_HOME/runner)
#   COWBOY_RUNNER    cowboy-runner executable for DEVNET_RUNNER=1 (default: as COWBOY_NODE)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

mode="run"
if [[ $# -gt 0 && ( "$1" == "run" || "$1" == "init" ) ]]; then
    mode="$1"
    shift
fi
if [[ $# -gt 0 && "$1" != --* ]]; then
    echo "usage: $0 [run|init] [cowboy-node init flags...]" >&2
    exit 2
fi

DEVNET_HOME="${DEVNET_HOME:-./devnet-home}"
DEVNET_CHAIN_ID="${DEVNET_CHAIN_ID:-cowboy-devnet-1}"
if [[ -z "${COWBOY_NODE:-}" ]]; then
    if [[ -x "$repo_root/.venv/bin/cowboy-node" ]]; then
        COWBOY_NODE="$repo_root/.venv/bin/cowboy-node"
    else
        COWBOY_NODE="cowboy-node"
    fi
fi
if ! command -v "$COWBOY_NODE" >/dev/null 2>&1; then
    echo "error: $COWBOY_NODE not found; run 'make install' (or set COWBOY_NODE)" >&2
    exit 1
fi

if [[ ! -f "$DEVNET_HOME/config.toml" ]]; then
    echo "devnet: initialising $DEVNET_HOME (chain id $DEVNET_CHAIN_ID)"
    "$COWBOY_NODE" init --home "$DEVNET_HOME" --chain-id "$DEVNET_CHAIN_ID" "$@"
elif [[ $# -gt 0 ]]; then
    echo "devnet: $DEVNET_HOME already initialised; ignoring init flags: $*" >&2
fi

# Value of `addr` in section [$1] of config.toml, with wildcard hosts shown as loopback.
config_addr() {
    local addr
    addr="$(awk -v want="[$1]" '
        /^[[:space:]]*\[/ { section = $1 }
        section == want && /^[[:space:]]*addr[[:space:]]*=/ { split($0, q, "\""); print q[2]; exit }
    ' "$DEVNET_HOME/config.toml")"
    addr="${addr:-$2}"
    addr="${addr/#0.0.0.0:/127.0.0.1:}"
    addr="${addr/#\[::\]:/[::1]:}"
    printf '%s' "$addr"
}

rpc_url="http://$(config_addr rpc 127.0.0.1:4000)"
metrics_url="http://$(config_addr metrics 127.0.0.1:9464)/metrics"
faucet_key="$DEVNET_HOME/keys/faucet.key"

cat <<INFO

  Cowboy devnet ($DEVNET_HOME)
    RPC         $rpc_url            (GET /status, /health, /height; POST /submit)
    metrics     $metrics_url
    faucet key  $faucet_key

  Try, from another terminal:
    $COWBOY_NODE keys new --out /tmp/alice.key
    $COWBOY_NODE keys show /tmp/alice.key
    $COWBOY_NODE tx transfer --key $faucet_key --to 0x... --amount 1000 --rpc $rpc_url --wait
    $COWBOY_NODE status --rpc $rpc_url

INFO

if [[ "$mode" == "init" ]]; then
    exit 0
fi
if [[ "${DEVNET_RUNNER:-0}" != "1" ]]; then
    exec "$COWBOY_NODE" run --home "$DEVNET_HOME"
fi

# DEVNET_RUNNER=1: the node and one runner, both children of this shell.
DEVNET_RUNNER_HOME="${DEVNET_RUNNER_HOME:-$DEVNET_HOME/runner}"
runner_env=(RUNNER_HOME="$DEVNET_RUNNER_HOME" RUNNER_VALIDATOR_RPC="$rpc_url" RUNNER_FAUCET_KEY="$faucet_key"
            RUNNER_QUIC_ENDPOINT="$(config_addr quic 127.0.0.1:4433)" COWBOY_NODE="$COWBOY_NODE")
if [[ -n "${COWBOY_RUNNER:-}" ]]; then
    runner_env+=(COWBOY_RUNNER="$COWBOY_RUNNER")
fi
echo "  runner      $DEVNET_RUNNER_HOME   (cowboy-runner status --home $DEVNET_RUNNER_HOME)"
echo

"$COWBOY_NODE" run --home "$DEVNET_HOME" &
node_pid=$!
env "${runner_env[@]}" bash "$repo_root/deploy/devnet-runner.sh" run &
runner_pid=$!
set +e  # from here on exit statuses are collected, not fatal

# Runner first, so that it says Goodbye and stops polling while the node still answers; then the node.
signalled=0
stop_all() {
    signalled=1
    kill -TERM "$runner_pid" 2>/dev/null && wait "$runner_pid"
    kill -TERM "$node_pid" 2>/dev/null || true
}
trap stop_all INT TERM

# `wait` returns early (status > 128) when a trapped signal arrives: then wait again for the node's real status.
while true; do
    signalled=0
    wait "$node_pid"
    node_status=$?
    (( signalled )) || break
done
kill -TERM "$runner_pid" 2>/dev/null
wait "$runner_pid"
exit "$node_status"
