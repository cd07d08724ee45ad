# Stand-in for postgres:16-alpine (Docker Hub) from Debian's PostgreSQL 15, for the
# docker-compose test on machines without Docker Hub. postgres-entrypoint.sh honours
# the same POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB variables on first start.
ARG BASE_IMAGE=millstream-test-base:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends postgresql-15 \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/postgresql/data /var/run/postgresql \
    && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql
COPY postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint.sh
ENV PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data
USER postgres
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint.sh"]
