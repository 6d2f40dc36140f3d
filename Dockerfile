# Multi-stage build: dependencies are built in a builder stage, the runtime image runs as a
# non-root user. Build arg EXTRAS=local bundles the local embedder (torch, large);
# EXTRAS="" builds a slim image for EMBEDDER=gemini.
ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS builder
ARG EXTRAS=local
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
COPY pyproject.toml README.md ./
COPY service ./service
COPY worker ./worker
RUN if [ -n "$EXTRAS" ]; then pip install ".[${EXTRAS}]"; else pip install .; fi

FROM python:${PYTHON_VERSION}-slim AS runtime
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 \
    HOST=0.0.0.0 PORT=8199 DATA_DIR=/data LOG_FORMAT=json
RUN groupadd --system app && useradd --system --gid app --home /app app \
    && mkdir -p /data /app && chown app:app /data /app
COPY --from=builder /opt/venv /opt/venv
WORKDIR /app
USER app
EXPOSE 8199
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=5 \
    CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8199/health', timeout=4).status == 200 else 1)"
CMD ["python", "-m", "service"]
