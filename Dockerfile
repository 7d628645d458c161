# Pawwake gateway image: python:3.11-slim, running as an unprivileged user.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PAWWAKE_DATA_DIR=/data \
    PORT=8000

# Run as root, the embedded PostgreSQL would create a system user and widen the permissions of
# every parent folder of its data; an unprivileged user owning /data avoids both.
RUN groupadd --system --gid 10001 pawwake \
    && useradd --system --uid 10001 --gid pawwake --home-dir /data --no-create-home \
        --shell /usr/sbin/nologin pawwake \
    && mkdir -p /data \
    && chown pawwake:pawwake /data \
    && chmod 0750 /data

WORKDIR /app

COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt

# The code stays owned by root: the gateway only reads it.
COPY . .

USER 10001:10001

EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/' % os.environ.get('PORT', '8000'), timeout=4)"]

# pawwake.py listens on $PORT (Render and similar platforms set it).
CMD ["python", "pawwake.py"]
