# bosun as a second scheduler (deploy/). Build: docker build -t bosun-scheduler:0.1.0 .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Only the core dependencies of pyproject.toml: bosun serve needs no optional extra
# (tests/live/test_deploy_manifests.py checks that it starts without them).
COPY pyproject.toml README.md /src/
COPY src /src/src
RUN pip install /src && rm -rf /src

# The non-root user deploy/deployment.yaml runs as (runAsUser: 65532).
RUN groupadd --gid 65532 bosun && useradd --uid 65532 --gid 65532 --no-create-home bosun
USER 65532:65532
WORKDIR /

EXPOSE 10251
CMD ["bosun", "serve", "--config", "/etc/bosun/config.yaml"]
