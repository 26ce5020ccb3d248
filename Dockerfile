# cowboy-node (and cowboy-runner) image.
#
#   make image                       # docker or podman, whichever is installed; tags cowboy-node:local
#   docker run --rm -v cowboy-data:/data cowboy-node:local init --home /data \
#       --rpc-addr 0.0.0.0:4000 --quic-addr 0.0.0.0:4433 --metrics-addr 0.0.0.0:9464
#   docker run -d -v cowboy-data:/data -p 127.0.0.1:4000:4000 -p 4433:4433/udp cowboy-node:local
#   docker run -d -v runner-data:/runner cowboy-node:local cowboy-runner run --home /runner
#
# The entrypoint (deploy/container/entrypoint.sh) raises the file-descriptor limit to COWBOY_NOFILE (default
# 65536), or to the container's hard limit with a message when that is lower, then runs its arguments: a
# cowboy-node subcommand (`run`, `init`, ...) or any program of the image (`cowboy-runner ...`).
# The health check (deploy/container/healthcheck.py) probes what the container runs: a node's RPC /health, a
# runner's `cowboy-runner status`; one-shot helpers count as healthy.
# No VOLUME is declared: mount a named volume on /data (node home) or /runner (runner home) yourself, so that
# no anonymous volume is left behind by containers that do not need one.
#
# The base image is pinned by digest, so two builds start from the same bytes. The digest is one published for
# python:3.11-slim-bookworm; the machine this was written on reaches no registry and could not re-check it. To move
# the pin: `docker buildx imagetools inspect python:3.11-slim-bookworm` and replace the digest below. Override it
# for one build with
#   docker build --build-arg BASE_IMAGE=python:3.11-slim-bookworm .      (or make image BASE_IMAGE=...)
# e.g. on a host whose registry mirror or local stand-in has another digest.
ARG BASE_IMAGE=python:3.11-slim-bookworm@sha256:a36c24f9cbdf4fd0f52d67f0823eeac19c2028c637cecc392d97f980d4fec56b
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Unprivileged user owning the node home and the runner home (a new named volume mounted on /data or /runner
# takes this directory's owner, so the node and the runner can write their keys and data there).
RUN groupadd --system --gid 10001 cowboy \
    && useradd --system --uid 10001 --gid cowboy --home-dir /data --no-create-home \
       --shell /usr/sbin/nologin cowboy \
    && mkdir -p /data /runner \
    && chown cowboy:cowboy /data /runner

WORKDIR /src
COPY requirements.lock ./

# Dependencies only from the hashed lock (`make lock`), in their own layer: a source change does not reinstall
# them. Every locked dependency ships binary wheels for linux/amd64, so normally no compiler is installed. If pip
# has to build something from source (another platform), the build tools are installed, used and purged within
# this one layer; only the LevelDB runtime library stays.
RUN set -eux; \
    if ! pip install --no-cache-dir --require-hashes -r requirements.lock; then \
        apt-get update; \
        apt-get install -y --no-install-recommends build-essential libleveldb-dev; \
        pip install --no-cache-dir --require-hashes -r requirements.lock; \
        apt-get purge -y --auto-remove build-essential libleveldb-dev; \
        apt-get install -y --no-install-recommends libleveldb1d; \
        rm -rf /var/lib/apt/lists/*; \
    fi

# The project itself, resolving nothing (--no-deps): what runs is exactly the lock plus this checkout.
COPY pyproject.toml README.md ./
COPY cowboy_protocol ./cowboy_protocol
COPY cowboy_node ./cowboy_node
COPY cowboy_runner ./cowboy_runner
RUN pip install --no-cache-dir --no-deps . && cd / && rm -rf /src

# Container entrypoint and health check; one-shot helpers of the compose files (devnet, runner setup, testnet).
COPY --chmod=0755 deploy/container/entrypoint.sh /usr/local/bin/cowboy-entrypoint
COPY --chmod=0755 deploy/container/healthcheck.py /usr/local/bin/cowboy-healthcheck
COPY --chmod=0755 deploy/devnet.sh /usr/local/bin/cowboy-devnet
COPY --chmod=0755 deploy/devnet-runner.sh /usr/local/bin/cowboy-devnet-runner
COPY --chmod=0755 deploy/compose/cowboy-compose.sh /usr/local/bin/cowboy-compose
COPY deploy/compose/demo.py /usr/local/lib/cowboy/demo.py

USER cowboy
WORKDIR /data

# HTTP API, CIP-11 QUIC (UDP), Prometheus metrics. `cowboy-node init` in a container must bind 0.0.0.0.
EXPOSE 4000 4433/udp 9464

HEALTHCHECK --interval=30s --timeout=45s --start-period=60s --retries=3 CMD ["cowboy-healthcheck"]

STOPSIGNAL SIGTERM
ENTRYPOINT ["cowboy-entrypoint"]
CMD ["run", "--home", "/data"]
