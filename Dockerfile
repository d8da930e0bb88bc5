# syntax=docker/dockerfile:1
# One image for every LarkBot service. The entrypoint is the `larkbot` CLI:
#   docker run IMAGE run <service>     ingress-feishu | ingress-telegram | pipeline | driver | media | llm-gateway
#   docker run IMAGE bootstrap         declare streams, consumers and buckets (the init job; idempotent)
#   docker run IMAGE config check F    validate a configuration file
# The configuration is read from $LARKBOT_CONFIG (/etc/larkbot/config.yaml): mount it, the image ships none.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder

# uv from PyPI (the only registry the build may need), the version the lockfile was written with.
ARG UV_VERSION=0.13.9
RUN pip install --no-cache-dir "uv==${UV_VERSION}"

# The virtual environment lives at its final path so the runtime stage copies it unchanged; the
# interpreter is the base image's (same path in both stages), never a downloaded one.
ENV UV_PROJECT_ENVIRONMENT=/opt/larkbot \
    UV_PYTHON_DOWNLOADS=never \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy

WORKDIR /src

# Third-party dependencies first, from the lockfile and the members' manifests alone: a code change
# rebuilds only the layer below. Every member's manifest is needed for `--locked`, the testkit's too;
# the testkit itself (test doubles, harnesses, `larkbot bench`) is a development dependency, which
# `--no-dev` leaves out of the image.
COPY pyproject.toml uv.lock ./
COPY libs/canonical/pyproject.toml libs/canonical/
COPY libs/runtime/pyproject.toml libs/runtime/
COPY libs/cli/pyproject.toml libs/cli/
COPY libs/testkit/pyproject.toml libs/testkit/
COPY services/ingress-feishu/pyproject.toml services/ingress-feishu/
COPY services/ingress-telegram/pyproject.toml services/ingress-telegram/
COPY services/pipeline/pyproject.toml services/pipeline/
COPY services/driver/pyproject.toml services/driver/
COPY services/media/pyproject.toml services/media/
COPY services/llm-gateway/pyproject.toml services/llm-gateway/
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --locked --no-dev --no-install-workspace

# The workspace members, installed as wheels (not editable), so /src is not needed at run time. The
# packages carry their data files (Alembic migrations) with them.
COPY libs/ libs/
COPY services/ services/
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --locked --no-dev --no-editable


FROM ${PYTHON_IMAGE}

RUN groupadd --system --gid 10001 larkbot \
    && useradd --system --uid 10001 --gid larkbot --home-dir /var/lib/larkbot --no-create-home \
        --shell /usr/sbin/nologin larkbot \
    && install -d -o larkbot -g larkbot -m 0750 /var/lib/larkbot \
    && install -d -m 0755 /etc/larkbot

COPY --from=builder /opt/larkbot /opt/larkbot

ENV PATH=/opt/larkbot/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    LARKBOT_CONFIG=/etc/larkbot/config.yaml

# data_dir of the compose configuration: an empty named volume mounted here starts owned by larkbot.
WORKDIR /var/lib/larkbot
USER 10001:10001

# Ops endpoints (/healthz, /readyz, /metrics), one per service: ingress-feishu 9101, ingress-telegram
# 9102, pipeline 9103, driver 9104, media 9105, llm-gateway 9106. No HEALTHCHECK here because the port
# depends on the service; docker-compose.yml declares it per service.
EXPOSE 9101 9102 9103 9104 9105 9106

ENTRYPOINT ["larkbot"]
CMD ["run", "pipeline"]
