# One image for every Millstream container: jobmanager, taskmanager, and the
# Spark standalone master/worker (see docker-compose.yml).
#
#   docker build -t millstream .
#   docker run -e MILLSTREAM_AUTH_TOKEN=... -p 8081:8081 millstream
#   docker run millstream millstream taskmanager --slots 2
#
# BASE_IMAGE is for machines without Docker Hub: tests/docker/make_base_image.sh
# builds an equivalent bookworm + Python 3.11 base from Debian packages alone.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

# Java 17 is what PySpark 4 runs on; procps provides `ps`, which Spark's
# launch scripts call. The man1 directory must exist or the JRE's postinst
# fails on slim images (they strip /usr/share/man).
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*

# PySpark first, in its own layer: it is large (~400 MB of jars) and changes
# far less often than the project, so code edits do not re-download it.
# Keep it equal to the pin of pyproject's `spark` extra (tests/test_compose.py checks).
ARG PYSPARK_VERSION=4.3.0
RUN pip install --no-cache-dir "pyspark==${PYSPARK_VERSION}"

# The pip-installed PySpark is a complete Spark distribution (bin/, jars/).
# Expose it at the conventional /opt/spark so the spark-master and
# spark-worker services run the exact same Spark and Python as the driver in
# the jobmanager (a different Spark version, or a different Python minor
# version on the executors, makes PySpark jobs fail).
RUN SPARK_DIR="$(python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')" \
    && chmod +x "$SPARK_DIR"/bin/* \
    && ln -s "$SPARK_DIR" /opt/spark
ENV SPARK_HOME=/opt/spark \
    PYSPARK_PYTHON=python3 \
    SPARK_WORKER_DIR=/tmp/spark-work

WORKDIR /app
COPY . /app
# The image runs every service, so it takes both extras: Spark for BATCH jobs
# and the Spark master/worker, the PostgreSQL driver for DATABASE_URL.
RUN pip install --no-cache-dir ".[spark,postgres]"

# Run unprivileged. /data and /shared are created here, owned by that user,
# because a new named volume takes its ownership from the image path it is
# mounted on.
RUN groupadd --system --gid 10001 millstream \
    && useradd --system --uid 10001 --gid millstream --create-home --home-dir /home/millstream millstream \
    && mkdir -p /data /shared/checkpoints /shared/savepoints /shared/files \
    && chown -R millstream:millstream /data /shared
USER millstream

# Inside a container the REST server must listen on all interfaces to be
# reachable; the jobmanager then refuses to start without
# MILLSTREAM_AUTH_TOKEN (or --insecure), which is the safe default.
ENV MILLSTREAM_DATA_DIR=/data \
    MILLSTREAM_HOST=0.0.0.0

EXPOSE 8081

# No HEALTHCHECK here: the taskmanager and Spark services share this image
# and serve no REST endpoint. docker-compose.yml defines the jobmanager's.
CMD ["millstream", "jobmanager"]
