"""Logging out ends the session on the server: a copied cookie is worthless afterwards."""

from __future__ import annotations

import time
from typing import Any

import psycopg2

from pawwake.dashboard.security import SESSION_COOKIE, SESSION_MAX_AGE
from pawwake.dashboard.session_revocations import SessionRevocations
from pawwake.db.pool import create_pool
from tests.dashboard_support import (
    SECRET,
    dashboard_client,
    login,
    same_origin,
    session_payload,
    set_cookie,
)


def with_cookie(value: str) -> dict[str, str]:
    return {"Cookie": f"{SESSION_COOKIE}={value}"}


async def replay(client: Any, cookie: str) -> Any:
    client.session.cookie_jar.clear()
    return await client.get("/dashboard", headers=with_cookie(cookie), allow_redirects=False)


async def logged_in_cookie(client: Any) -> str:
    response = await login(client)
    assert response.status == 303
    return set_cookie(response)[SESSION_COOKIE].value


async def test_an_old_cookie_replayed_after_logout_is_not_logged_in(make_client: Any) -> None:
    client = await dashboard_client(make_client)
    cookie = await logged_in_cookie(client)
    assert (await replay(client, cookie)).status == 200
    response = await client.post("/dashboard/logout", headers={**same_origin(client),
                                                               **with_cookie(cookie)},
                                 allow_redirects=False)
    assert response.status == 303
    replayed = await replay(client, cookie)
    assert replayed.status == 303
    assert replayed.headers["Location"].startswith("/dashboard/login")
    write = await client.post("/dashboard/settings", data={"_group": "basic"},
                              headers={**same_origin(client), **with_cookie(cookie)},
                              allow_redirects=False)
    assert write.status == 303 and "/dashboard/login" in write.headers["Location"]


async def test_logout_holds_in_another_gateway_process_and_after_a_restart(
        make_client: Any, database_url: str) -> None:
    first = await dashboard_client(make_client)
    second = await dashboard_client(make_client)
    cookie = await logged_in_cookie(first)
    assert (await replay(second, cookie)).status == 200
    await first.post("/dashboard/logout", headers={**same_origin(first), **with_cookie(cookie)})
    assert (await replay(second, cookie)).status == 303
    restarted = await dashboard_client(make_client)
    assert (await replay(restarted, cookie)).status == 303
    conn = psycopg2.connect(database_url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM dashboard_revoked_sessions")
            assert cur.fetchone()[0] == 1
            cur.execute("SELECT sid_hash FROM dashboard_revoked_sessions")
            assert session_payload(cookie)["sid"] not in cur.fetchone()[0]
    finally:
        conn.close()


async def test_logout_without_a_database_still_revokes_in_this_process(make_client: Any
                                                                       ) -> None:
    client = await dashboard_client(make_client, DATABASE_ENABLED=False)
    cookie = await logged_in_cookie(client)
    await client.post("/dashboard/logout", headers={**same_origin(client), **with_cookie(cookie)})
    assert (await replay(client, cookie)).status == 303


async def test_signing_in_again_ends_the_previous_session(make_client: Any) -> None:
    client = await dashboard_client(make_client)
    first = await logged_in_cookie(client)
    second = await logged_in_cookie(client)
    assert (await replay(client, second)).status == 200
    assert (await replay(client, first)).status == 303


async def test_a_new_session_secret_ends_every_session(make_client: Any) -> None:
    client = await dashboard_client(make_client)
    cookie = await logged_in_cookie(client)
    rotated = await dashboard_client(make_client, SESSION_SECRET=SECRET[::-1])
    assert (await replay(rotated, cookie)).status == 303


async def test_revocations_answer_from_memory_when_the_database_is_away(
        database_url: str, caplog: Any) -> None:
    pool = await create_pool(database_url, maxsize=1)
    revocations = SessionRevocations(SESSION_MAX_AGE)
    await revocations.revoke(pool, "sid-before-the-outage", int(time.time()))
    pool.close()
    await pool.wait_closed()
    await revocations.revoke(pool, "sid-during-the-outage", int(time.time()))
    assert await revocations.is_revoked(pool, "sid-before-the-outage")
    assert await revocations.is_revoked(pool, "sid-during-the-outage")
    assert not await revocations.is_revoked(pool, "sid-never-revoked")
    assert "could not" in caplog.text
    assert "sid-" not in caplog.text
