# cowboy-node (and cowboy-runner) image.
#
#   docker build -t cowboy-node .
#   docker run --rm -v cowboy-data:/data cowboy-node init --home /data \
#       --rpc-addr 0.0.0.0:4000 --quic-addr 0.0.0.0:4433 --metrics-addr 0.0.0.0:9464
#   docker run -d -v cowboy-data:/data -p 4000:4000 -p 4433:4433/udp -p 9464:9464 cowboy-node
#   docker run -d -v runner-data:/runner --entrypoint cowboy-runner cowboy-node run --home /runner
#
# The node's home (config.toml, genesis.json, keys/, data/) is the volume /data.
# docker-compose.yml does the init step for you.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Unprivileged user owning the node's data volume and the runner home (a new named volume mounted on
# /runner takes this directory's owner, so the runner can write its key and journal there).
RUN groupadd --system --gid 10001 cowboy \
    && useradd --system --uid 10001 --gid cowboy --home-dir /data --no-create-home \
       --shell /usr/sbin/nologin cowboy \
    && mkdir -p /data /runner \
    && chown cowboy:cowboy /data /runner

WORKDIR /src
COPY pyproject.toml README.md ./
COPY cowboy_protocol ./cowboy_protocol
COPY cowboy_node ./cowboy_node
COPY cowboy_runner ./cowboy_runner

# Every dependency ships binary wheels for linux/amd64 (plyvel, coincurve, uvloop, ...), so normally no
# compiler is installed. If pip has to build something from source (another platform), the build tools
# are installed, used and purged within this one layer; only the LevelDB runtime library stays.
RUN set -eux; \
    if ! pip install --no-cache-dir .; then \
        apt-get update; \
        apt-get install -y --no-install-recommends build-essential libleveldb-dev; \
        pip install --no-cache-dir .; \
        apt-get purge -y --auto-remove build-essential libleveldb-dev; \
        apt-get install -y --no-install-recommends libleveldb1d; \
        rm -rf /var/lib/apt/lists/*; \
    fi; \
    cd /; \
    rm -rf /src

# One-shot helpers used by docker-compose.yml: init the node home if it has no config.toml; init, fund and
# register the devnet runner.
COPY --chmod=0755 deploy/devnet.sh /usr/local/bin/cowboy-devnet
COPY --chmod=0755 deploy/devnet-runner.sh /usr/local/bin/cowboy-devnet-runner

USER cowboy
WORKDIR /data
VOLUME /data

# HTTP API, CIP-11 QUIC (UDP), Prometheus metrics. `cowboy-node init` in a container must bind 0.0.0.0.
EXPOSE 4000 4433/udp 9464

HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:4000/health', timeout=4)"]

STOPSIGNAL SIGTERM
ENTRYPOINT ["cowboy-node"]
CMD ["run", "--home", "/data"]
