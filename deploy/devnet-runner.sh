#!/usr/bin/env bash
# Set up and run one devnet runner (cowboy-runner) against a running node.
#
#   deploy/devnet-runner.sh [run|setup]
#
#   setup  0. wait up to RUNNER_WAIT_S seconds for the node to answer `cowboy-node status`;
#          1. initialise RUNNER_HOME if it has no runner.toml (`cowboy-runner init`);
#          2. if the runner's address has no registration on the node: transfer RUNNER_FUND from
#             RUNNER_FAUCET_KEY to it (when that key file exists), then `cowboy-runner register`
#             with RUNNER_STAKE; a "runner_already_registered" refusal (a concurrent setup) counts as done;
#          3. exit 0. Safe to run again: an initialised home and an existing registration are left alone.
#   run    (default) setup, then exec `cowboy-runner run --home RUNNER_HOME` (the runner is the
#          foreground process and receives SIGTERM / Ctrl-C directly)
#
# Environment:
#   RUNNER_HOME           runner home directory (default ./devnet-home/runner)
#   RUNNER_VALIDATOR_RPC  node HTTP API (default http://127.0.0.1:4000); the QUIC endpoint defaults to
#                         the same host, port 4433 (runner.toml [runner] quic_endpoint)
#   RUNNER_STAKE          stake bonded by `register`, smallest unit (default 10^18, the genesis
#                         runners.min_runner_stake)
#   RUNNER_FUND           amount sent from the faucet before registering (default 2·10^18: the stake plus
#                         plenty for fees)
#   RUNNER_QUIC_ENDPOINT  HOST:PORT of the node's QUIC transport, written into a NEW runner.toml as
#                         [runner] quic_endpoint (default: unset, i.e. the RPC host, port 4433)
#   RUNNER_WAIT_S         how long to wait for the node's RPC (default 60)
#   RUNNER_FAUCET_KEY     funded account key (default ./devnet-home/keys/faucet.key); if the file does not
#                         exist the runner account must already be funded
#   COWBOY_NODE           cowboy-node executable (default .venv/bin/cowboy-node of this checkout, else PATH)
#   COWBOY_RUNNER         cowboy-runner executable (default .venv/bin/cowboy-runner of this checkout, else PATH)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

mode="run"
if [[ $# -gt 0 && ( "$1" == "run" || "$1" == "setup" ) ]]; then
    mode="$1"
    shift
fi
if [[ $# -gt 0 ]]; then
    echo "usage: $0 [run|setup]   (settings come from the environment, see the header)" >&2
    exit 2
fi

RUNNER_HOME="${RUNNER_HOME:-./devnet-home/runner}"
RUNNER_VALIDATOR_RPC="${RUNNER_VALIDATOR_RPC:-http://127.0.0.1:4000}"
RUNNER_STAKE="${RUNNER_STAKE:-1000000000000000000}"
RUNNER_FUND="${RUNNER_FUND:-2000000000000000000}"
RUNNER_FAUCET_KEY="${RUNNER_FAUCET_KEY:-./devnet-home/keys/faucet.key}"
RUNNER_WAIT_S="${RUNNER_WAIT_S:-60}"

# The executable given in $1 if set, else this checkout's .venv copy of $2, else $2 on PATH.
find_tool() {
    local given="$1" name="$2"
    if [[ -n "$given" ]]; then
        printf '%s' "$given"
    elif [[ -x "$repo_root/.venv/bin/$name" ]]; then
        printf '%s' "$repo_root/.venv/bin/$name"
    else
        printf '%s' "$name"
    fi
}
COWBOY_NODE="$(find_tool "${COWBOY_NODE:-}" cowboy-node)"
COWBOY_RUNNER="$(find_tool "${COWBOY_RUNNER:-}" cowboy-runner)"
for tool in "$COWBOY_NODE" "$COWBOY_RUNNER"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "error: $tool not found; run 'make install' (or set COWBOY_NODE / COWBOY_RUNNER)" >&2
        exit 1
    fi
done
for number in "$RUNNER_STAKE" "$RUNNER_FUND" "$RUNNER_WAIT_S"; do
    if [[ ! "$number" =~ ^[0-9]+$ ]]; then
        echo "error: RUNNER_STAKE, RUNNER_FUND and RUNNER_WAIT_S must be decimal integers, got '$number'" >&2
        exit 2
    fi
done

waited=0
until "$COWBOY_NODE" status --rpc "$RUNNER_VALIDATOR_RPC" >/dev/null 2>&1; do
    if (( waited >= RUNNER_WAIT_S )); then
        echo "error: the node at $RUNNER_VALIDATOR_RPC did not answer within ${RUNNER_WAIT_S}s" >&2
        exit 1
    fi
    sleep 1
    waited=$((waited + 1))
done

if [[ ! -f "$RUNNER_HOME/runner.toml" ]]; then
    echo "runner: initialising $RUNNER_HOME (validator $RUNNER_VALIDATOR_RPC)"
    "$COWBOY_RUNNER" init --home "$RUNNER_HOME" --validator-rpc "$RUNNER_VALIDATOR_RPC"
    if [[ -n "${RUNNER_QUIC_ENDPOINT:-}" ]]; then
        # The template carries the key commented out; set it in place (the only edit made to runner.toml).
        tmp="$RUNNER_HOME/runner.toml.tmp"
        awk -v ep="$RUNNER_QUIC_ENDPOINT" '
            !done && /^#[[:space:]]*quic_endpoint[[:space:]]*=/ { print "quic_endpoint = \"" ep "\""; done = 1; next }
            { print }
            END { if (!done) exit 1 }
        ' "$RUNNER_HOME/runner.toml" > "$tmp" || {
            rm -f "$tmp"
            echo "error: no quic_endpoint line in $RUNNER_HOME/runner.toml to set" >&2
            exit 1
        }
        mv "$tmp" "$RUNNER_HOME/runner.toml"
    fi
fi
address="$("$COWBOY_NODE" keys show "$RUNNER_HOME/keys/runner.key")"

if "$COWBOY_NODE" query runner "$address" --rpc "$RUNNER_VALIDATOR_RPC" >/dev/null 2>&1; then
    echo "runner: $address is already registered"
else
    if [[ -f "$RUNNER_FAUCET_KEY" ]]; then
        echo "runner: funding $address with $RUNNER_FUND from $RUNNER_FAUCET_KEY"
        "$COWBOY_NODE" tx transfer --key "$RUNNER_FAUCET_KEY" --to "$address" --amount "$RUNNER_FUND" \
            --rpc "$RUNNER_VALIDATOR_RPC" --wait
    fi
    echo "runner: registering $address with stake $RUNNER_STAKE"
    set +e
    out="$("$COWBOY_RUNNER" register --home "$RUNNER_HOME" --stake "$RUNNER_STAKE" 2>&1)"
    status=$?
    set -e
    printf '%s\n' "$out"
    if [[ $status -ne 0 ]]; then
        # Another setup registered it between the query and the transaction: that is the state we want.
        if grep -qiE 'already[ _-]registered' <<<"$out"; then
            echo "runner: $address is already registered"
        else
            echo "error: cowboy-runner register failed (exit $status)" >&2
            exit "$status"
        fi
    fi
fi

if [[ "$mode" == "setup" ]]; then
    exit 0
fi
exec "$COWBOY_RUNNER" run --home "$RUNNER_HOME"
