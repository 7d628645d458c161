"""The fleet recipe (compose.yaml, docs/SCALING.md) agrees with what the gateway needs.

Docker does not run here: the file is parsed and checked against the settings table, the
image, the health route and the connection budget, and its haproxy configuration is checked by
haproxy itself."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from pawwake.settings import BY_NAME
from pawwake.settings.values import parse_value
from pawwake.tasks import SHUTDOWN_SECONDS

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parent.parent
HAPROXY = shutil.which("haproxy") or ("/usr/sbin/haproxy"
                                      if Path("/usr/sbin/haproxy").exists() else None)
INTERPOLATED = re.compile(r"\$\{([A-Z_]+)(?::?[-?][^}]*)?\}")


def compose() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8")))


def service(name: str) -> dict[str, Any]:
    return dict(compose()["services"][name])


def gateway_env() -> dict[str, str]:
    return {key: str(value) for key, value in service("gateway")["environment"].items()}


def literal(value: str) -> bool:
    return "${" not in value


def test_the_gateway_is_built_from_this_image_with_several_replicas() -> None:
    gateway = service("gateway")
    assert gateway["build"] == "."
    assert gateway["deploy"]["replicas"] >= 2
    assert gateway["volumes"] == ["gateway-data:/data"]  # the image's PAWWAKE_DATA_DIR
    assert "PAWWAKE_DATA_DIR=/data" in (ROOT / "Dockerfile").read_text()


def test_every_gateway_variable_is_a_setting_with_a_valid_value() -> None:
    for name, value in gateway_env().items():
        assert name in BY_NAME, f"compose.yaml sets {name}, which is not a setting"
        if literal(value):
            parse_value(BY_NAME[name], value)
    for name in ("GATEWAY_SECRET", "SESSION_SECRET", "DASHBOARD_PASSWORD", "API_KEY"):
        assert gateway_env()[name] == f"${{{name}:?set {name} in .env}}", name


def test_the_gateways_reach_postgresql_through_the_transaction_pooler() -> None:
    url = urlsplit(gateway_env()["DATABASE_URL"])
    assert url.hostname == "pgbouncer" and url.port == 5432
    bouncer = service("pgbouncer")["environment"]
    assert bouncer["POOL_MODE"] == "transaction"
    assert urlsplit(bouncer["DATABASE_URL"]).hostname == "postgres"
    assert url.path == urlsplit(bouncer["DATABASE_URL"]).path == "/pawwake"
    assert "pgvector" in service("postgres")["image"]


def test_the_connection_budget_fits() -> None:
    """Client side: every replica's pool fits PgBouncer's client limit (also with the
    replicas a scale-up adds); server side: PgBouncer's pool leaves room under
    max_connections for maintenance."""
    replicas = service("gateway")["deploy"]["replicas"]
    pool = int(gateway_env()["DATABASE_POOL_SIZE"])
    bouncer = service("pgbouncer")["environment"]
    assert 3 * replicas * pool <= int(bouncer["MAX_CLIENT_CONN"])
    command = service("postgres")["command"]
    limit = int(next(arg.split("=")[1] for arg in command if arg.startswith("max_connections")))
    assert int(bouncer["DEFAULT_POOL_SIZE"]) + 10 <= limit


def test_a_stopping_replica_gets_more_than_its_shutdown_budget() -> None:
    """Replies in flight get SHUTDOWN_GRACE_SECONDS, the rest of the shutdown SHUTDOWN_SECONDS:
    Docker must wait for both before it kills the process."""
    grace = service("gateway")["stop_grace_period"]
    replies = parse_value(BY_NAME["SHUTDOWN_GRACE_SECONDS"],
                          gateway_env()["SHUTDOWN_GRACE_SECONDS"])
    assert grace.endswith("s") and float(grace[:-1]) > replies + SHUTDOWN_SECONDS


def test_the_balancer_checks_the_health_route_on_the_gateway_port() -> None:
    config = compose()["configs"]["haproxy"]["content"]
    assert "option httpchk GET /" in config
    assert re.search(r"server-template gateway \d+ gateway:8000", config)
    assert "EXPOSE 8000" in (ROOT / "Dockerfile").read_text()
    assert "option forwardfor" in config and gateway_env()["TRUSTED_PROXIES"] == "private"
    assert service("balancer")["configs"][0]["source"] == "haproxy"


@pytest.mark.skipif(HAPROXY is None, reason="haproxy is not installed (apt-get install haproxy)")
def test_haproxy_accepts_the_balancer_configuration(tmp_path: Path) -> None:
    path = tmp_path / "haproxy.cfg"
    path.write_text(compose()["configs"]["haproxy"]["content"])
    assert HAPROXY is not None
    result = subprocess.run([HAPROXY, "-c", "-f", str(path)], capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_variable_the_file_asks_for_is_explained_in_the_scaling_guide() -> None:
    asked = set(INTERPOLATED.findall((ROOT / "compose.yaml").read_text(encoding="utf-8")))
    guide = (ROOT / "docs" / "SCALING.md").read_text(encoding="utf-8")
    zh_start, en_start = guide.index("\n## 中文"), guide.index("\n## English")
    assert zh_start < en_start, "the Chinese part comes first"
    for name in sorted(asked):
        for part in (guide[zh_start:en_start], guide[en_start:]):
            assert f"`{name}`" in part, f"docs/SCALING.md does not explain {name}"
