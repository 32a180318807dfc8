# The MissionWeave image for docker-compose.yml: the authority worker (the entry point) and the
# `mwp` command. The embedded stack (`mwp dev`, tests) needs no image. .dockerignore keeps the
# build context to what these COPY lines name: no .venv, no state folders, no keys.
FROM python:3.11.14-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY pyproject.toml README.md ./
# mwp/workflows, mwp/activities and mwp/workers are links to these three folders.
COPY mwp ./mwp
COPY workflows ./workflows
COPY activities ./activities
COPY workers ./workers
RUN pip install . \
    && useradd --system --uid 10001 --home-dir /state --no-create-home mwp \
    && mkdir /state && chown mwp /state
# Not root. A new volume mounted on /state takes this owner, so the key files the worker and
# `mwp registry init` write there (mode 0600) are readable by both.
USER mwp
ENTRYPOINT ["python", "-m", "mwp.workers.authority"]
CMD ["--state-dir=/state"]
