# syntax=docker/dockerfile:1
# Sursis as an image: the wheel and its dependencies built in one stage, installed as a non-root
# user in the next. `docker compose up` (compose.yaml) runs it on PostgreSQL with several processes.

# Any image with `python` and `pip` on PATH will do: `--build-arg PYTHON_IMAGE=...` picks another.
ARG PYTHON_IMAGE=python:3.12-slim

# Model providers beyond OpenAI: extras of sursis, comma-separated (`anthropic`, `google`, `groq`,
# `mistral`, `bedrock`, `cohere`, `huggingface`, `all-models`); e.g. --build-arg SURSIS_EXTRAS=anthropic.
ARG SURSIS_EXTRAS=""

FROM ${PYTHON_IMAGE} AS build
ARG SURSIS_EXTRAS
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY sursis ./sursis
# The project's wheel, then wheels of everything it depends on, so the runtime stage installs offline.
RUN pip wheel --no-deps --wheel-dir /wheels . \
 && pip wheel --wheel-dir /wheels "$(ls /wheels/sursis-*.whl)${SURSIS_EXTRAS:+[$SURSIS_EXTRAS]}"

FROM ${PYTHON_IMAGE} AS runtime
ARG SURSIS_EXTRAS
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    SURSIS_HOST=0.0.0.0 \
    SURSIS_LOG_JSON=true
RUN groupadd --system --gid 10001 sursis \
 && useradd --system --uid 10001 --gid sursis --home-dir /home/sursis --create-home sursis
COPY --from=build /wheels /tmp/wheels
RUN pip install --no-index --find-links /tmp/wheels "sursis${SURSIS_EXTRAS:+[$SURSIS_EXTRAS]}" \
 && rm -rf /tmp/wheels
USER sursis
WORKDIR /home/sursis
EXPOSE 8000
ENTRYPOINT ["sursis"]
CMD ["serve"]
