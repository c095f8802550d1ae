# acceltrial operator image. Multi-stage: dependencies are built into a virtualenv, which alone is
# copied into a slim runtime image that runs as an unprivileged user.
# Not built in this project's CI (no container engine there); see the README.

FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
RUN pip install --upgrade pip && pip install .

FROM python:3.11-slim-bookworm AS runtime
LABEL org.opencontainers.image.title="acceltrial" \
      org.opencontainers.image.description="Trial Inferentia2/Trainium variants of model servers beside their GPU Deployments" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 acceltrial \
 && useradd --system --uid 10001 --gid acceltrial --no-create-home --shell /usr/sbin/nologin acceltrial
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
EXPOSE 8080 8081
# The chart passes the same flags explicitly (and --namespace for restricted installs).
ENTRYPOINT ["kopf"]
CMD ["run", "--standalone", "--all-namespaces", "--log-format=json", \
     "--liveness=http://0.0.0.0:8081/healthz", "-m", "acceltrial.handlers"]
