#!/usr/bin/env bash
# Container entrypoint of the cowboy-node image.
#
#   cowboy-entrypoint SUBCOMMAND [ARGS...]   -> cowboy-node SUBCOMMAND ARGS  (run, init, status, ...)
#   cowboy-entrypoint PROGRAM [ARGS...]      -> PROGRAM ARGS  (cowboy-runner, cowboy-compose, sh, ...)
#
# First raises the soft file-descriptor limit to COWBOY_NOFILE (default 65536; CIP-11 §6.6 wants at least
# 2 x the number of runners). A container's hard limit is set by its engine and host; when it is lower, the
# limit is raised to the hard limit instead and a line on stderr says so, rather than failing to start as a
# compose `ulimits:` entry above the host's limit does.
set -euo pipefail

want="${COWBOY_NOFILE:-65536}"
if [[ ! "$want" =~ ^[0-9]+$ || "$want" -lt 64 ]]; then
    echo "cowboy-entrypoint: COWBOY_NOFILE must be a whole number >= 64, got '$want'" >&2
    exit 2
fi
hard="$(ulimit -Hn)"
if [[ "$hard" == unlimited || "$hard" -ge "$want" ]]; then
    ulimit -Sn "$want"
else
    ulimit -Sn "$hard"
    echo "cowboy-entrypoint: file-descriptor limit is $hard, lower than COWBOY_NOFILE=$want (the container's hard" \
         "limit); running with $hard — enough for about $((hard / 2)) runner sessions" >&2
fi

if [[ $# -eq 0 ]]; then
    set -- run --home /data
fi
if [[ "$1" != */* ]] && ! command -v "$1" >/dev/null 2>&1; then
    set -- cowboy-node "$@"  # `docker run IMAGE init --home /data` keeps working
fi
exec "$@"
