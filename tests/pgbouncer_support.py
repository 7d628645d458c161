"""Start PgBouncer (Debian's package) on loopback in front of the test's embedded server, in
transaction pooling mode: the shape of Supabase's and Neon's poolers."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

PGBOUNCER = shutil.which("pgbouncer") or (
    "/usr/sbin/pgbouncer" if os.path.exists("/usr/sbin/pgbouncer") else None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Bouncer:
    def __init__(self, port: int, log: Path, process: subprocess.Popen[bytes]) -> None:
        self.port = port
        self.log = log
        self.process = process

    def url(self, database: str, user: str, query: str) -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}?{query}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@contextmanager
def pgbouncer(server_uri: str, *, pool_size: int = 2, port: int | None = None
              ) -> Iterator[Bouncer]:
    """PgBouncer for every database of the server behind ``server_uri`` (a unix socket, trust
    auth), ``pool_size`` server connections per database: fewer than the app's pool, so
    client connections really share server connections between transactions. ``port``: a
    given one (to start it again where clients already point), else a free one."""
    assert PGBOUNCER is not None
    parts = urlsplit(server_uri)
    socket_dir = parse_qs(parts.query)["host"][0]
    user = parts.username or "postgres"
    folder = Path(tempfile.mkdtemp(prefix="pawwake-pgbouncer-"))
    folder.chmod(0o755)  # run as root, PgBouncer drops to another user, who must read these
    port = port or free_port()
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={socket_dir} port={parts.port or 5432} user={user}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {folder / 'users.txt'}\n"
        f"pool_mode = transaction\ndefault_pool_size = {pool_size}\nmax_client_conn = 200\n"
        f"logfile = {folder / 'pgbouncer.log'}\n")
    for name in ("users.txt", "pgbouncer.ini"):
        (folder / name).chmod(0o644)
    log = folder / "pgbouncer.log"
    log.touch()
    log.chmod(0o666)
    command = [PGBOUNCER, str(folder / "pgbouncer.ini")]
    if os.geteuid() == 0:  # PgBouncer refuses to run as root: run as the server's own user,
        # the only one that may open its socket (it lives in the 0700 data folder)
        command[1:1] = ["-u", pwd.getpwuid(os.stat(socket_dir).st_uid).pw_name]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(200):  # readiness: the port accepts connections
            if process.poll() is not None:
                raise RuntimeError("pgbouncer exited: "
                                   + (process.stderr.read() if process.stderr else b"").decode())
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.05)
        else:
            raise RuntimeError("pgbouncer did not listen")
        yield Bouncer(port, log, process)
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stderr:
            process.stderr.close()
        shutil.rmtree(folder, ignore_errors=True)
