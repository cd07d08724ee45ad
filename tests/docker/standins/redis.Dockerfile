# Stand-in for redis:7-alpine (Docker Hub) from Debian's redis-server 7.0, for the
# docker-compose test on machines without Docker Hub. Compose gives the command line.
ARG BASE_IMAGE=millstream-test-base:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends redis-server \
    && rm -rf /var/lib/apt/lists/*
COPY redis-entrypoint.sh /usr/local/bin/redis-entrypoint.sh
USER redis
WORKDIR /var/lib/redis
ENTRYPOINT ["/usr/local/bin/redis-entrypoint.sh"]
CMD ["redis-server"]
