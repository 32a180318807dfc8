# The authority worker (Group Authorities, Organization registry, Group Event log mirror),
# for docker-compose.yml. The embedded stack (`mwp dev`, tests) needs no image.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY mwp ./mwp
COPY workflows ./workflows
COPY activities ./activities
COPY workers ./workers
RUN pip install --no-cache-dir .
ENTRYPOINT ["python", "-m", "mwp.workers.authority"]
