# Stand-in for prom/prometheus (Docker Hub) from Debian's prometheus package, for the
# docker-compose test on machines without Docker Hub. Like the official image, the
# binary is the entrypoint (compose gives only its flags) and it runs unprivileged
# with /prometheus as its storage.
ARG BASE_IMAGE=millstream-test-base:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends prometheus \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /prometheus && chown nobody:nogroup /prometheus
USER nobody
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
