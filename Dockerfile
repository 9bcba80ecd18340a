# placement-broker: one image for the API (scale it) and the worker.
FROM python:3.11-slim AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
# git: GitOps dispatch clones, commits and pushes tenants' repositories
RUN apt-get update && apt-get install -y --no-install-recommends curl git && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md constraints.txt ./
COPY api ./api
COPY broker ./broker
COPY providers ./providers
COPY pricing ./pricing
COPY migrations ./migrations
RUN pip install -c constraints.txt '.[postgres]' && useradd --system --uid 10001 broker && mkdir -p /data && chown broker /data
USER broker
ENV BROKER_AUTH=required BROKER_CATALOG_CACHE_DIR=/data/catalog-cache BROKER_DATA_DIR=/data PROMETHEUS_MULTIPROC_DIR=/tmp/prom
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
  CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1
# migrate and load the catalog once, then serve with several worker processes; the metrics samples
# an earlier run left (a container restart keeps /tmp, a pod's emptyDir too) go before they start
CMD ["sh", "-c", "mkdir -p $PROMETHEUS_MULTIPROC_DIR && broker migrate && rm -f $PROMETHEUS_MULTIPROC_DIR/*.db && exec uvicorn api.main:app --host 0.0.0.0 --port 8080 --workers ${WEB_CONCURRENCY:-2} --timeout-keep-alive 5 --limit-concurrency 200"]
