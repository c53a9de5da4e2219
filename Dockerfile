# ragd's server image: the REST API and MCP over HTTP, against an external PostgreSQL with pgvector
# (RAGD_DATABASE_URL). Models ship inside the pip packages: nothing is downloaded at run time.
FROM python:3.11-slim
ENV PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1
WORKDIR /app
# --build-arg LEGACY_OFFICE=1 adds LibreOffice (headless) for legacy .doc/.ppt files (about 300 MB more)
ARG LEGACY_OFFICE=0
RUN if [ "$LEGACY_OFFICE" = "1" ]; then apt-get update && apt-get install -y --no-install-recommends \
        libreoffice-writer-nogui libreoffice-impress-nogui && rm -rf /var/lib/apt/lists/*; fi
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install . && useradd --create-home --uid 10001 ragd
USER ragd
ENV RAGD_HOME=/home/ragd/.ragd
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --retries=6 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=2)"
ENTRYPOINT ["ragd"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000", "--no-migrate"]
