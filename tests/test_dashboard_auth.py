"""Dashboard login: password, session cookie, throttling, and the 503 page when unconfigured."""

from __future__ import annotations

from typing import Any

from bs4 import BeautifulSoup

from pawwake.dashboard import dashboard_keys as dkeys
from pawwake.dashboard.security import SESSION_COOKIE
from tests.dashboard_support import (
    PASSWORD,
    SECRET,
    dashboard_client,
    htmx,
    login,
    same_origin,
    session_payload,
    set_cookie,
)


async def test_login_then_pages_then_logout(make_client: Any) -> None:
    client = await dashboard_client(make_client)

    response = await client.get("/dashboard/settings", allow_redirects=False)
    assert response.status == 303
    assert response.headers["Location"] == "/dashboard/login?next=/dashboard/settings"

    form = await client.get("/dashboard/login")
    assert form.status == 200
    page = BeautifulSoup(await form.text(), "html.parser")
    assert page.find("input", attrs={"name": "password", "type": "password"}) is not None
    assert page.html["lang"] == "zh-CN"

    response = await client.post(
        "/dashboard/login", data={"password": PASSWORD, "next": "/dashboard/settings"},
        headers=same_origin(client), allow_redirects=False)
    assert response.status == 303
    assert response.headers["Location"] == "/dashboard/settings"

    page = await client.get("/dashboard")
    assert page.status == 200
    assert "运行状态" in await page.text()

    response = await client.post("/dashboard/logout", headers=same_origin(client),
                                 allow_redirects=False)
    assert response.status == 303
    assert response.headers["Location"].startswith("/dashboard/login")
    cleared = set_cookie(response)[SESSION_COOKIE]
    assert cleared.value == "" and cleared["max-age"] == "0"

    response = await client.get("/dashboard", allow_redirects=False)
    assert response.status == 303
    assert response.headers["Location"].startswith("/dashboard/login")


async def test_wrong_password_is_refused_with_a_clear_message(make_client: Any) -> None:
    client = await dashboard_client(make_client)
    response = await login(client, "not-the-password")
    assert response.status == 401
    assert "Set-Cookie" not in response.headers
    page = BeautifulSoup(await response.text(), "html.parser")
    assert page.find(attrs={"role": "alert"}).get_text(strip=True) == "密码不正确，请重试。"
    follow = await client.get("/dashboard", allow_redirects=False)
    assert follow.status == 303


async def test_session_cookie_flags(make_client: Any) -> None:
    client = await dashboard_client(make_client)
    response = await login(client)
    assert response.status == 303
    cookie = set_cookie(response)[SESSION_COOKIE]
    assert cookie["httponly"] is True
    assert cookie["samesite"] == "Strict"
    assert cookie["max-age"] == str(12 * 60 * 60)
    assert cookie["path"] == "/dashboard"
    assert not cookie["secure"]  # plain http here: a Secure cookie would never come back

    proxied = await dashboard_client(make_client, TRUSTED_PROXIES="127.0.0.1")
    behind_tls = await login(proxied, **{"X-Forwarded-Proto": "https",
                                         "Origin": "https://" + proxied.make_url("/").authority})
    assert behind_tls.status == 303
    assert set_cookie(behind_tls)[SESSION_COOKIE]["secure"] is True


async def test_login_starts_a_brand_new_session(make_client: Any) -> None:
    client = await dashboard_client(make_client)
    first = set_cookie(await login(client))[SESSION_COOKIE].value
    second = set_cookie(await login(client))[SESSION_COOKIE].value
    first_session, second_session = session_payload(first), session_payload(second)
    assert first_session["sid"] != second_session["sid"]
    assert set(second_session) == {"auth", "sid", "login_at"}
    assert PASSWORD not in first + second


async def test_a_session_ends_when_the_password_changes(make_client: Any) -> None:
    client = await dashboard_client(make_client)
    cookie = set_cookie(await login(client))[SESSION_COOKIE].value
    other = await dashboard_client(make_client, DASHBOARD_PASSWORD="a-new-password-now")
    response = await other.get("/dashboard", headers={"Cookie": f"{SESSION_COOKIE}={cookie}"},
                               allow_redirects=False)
    assert response.status == 303
    assert response.headers["Location"].startswith("/dashboard/login")


async def test_htmx_request_without_login_is_told_where_to_go(make_client: Any) -> None:
    client = await dashboard_client(make_client)
    response = await client.post("/dashboard/settings", data={"_group": "basic"},
                                 headers=htmx(client), allow_redirects=False)
    assert response.status == 401
    assert response.headers["HX-Redirect"] == "/dashboard/login?reason=expired"
    assert "登录已过期" in await response.text()


async def test_login_redirect_stays_inside_the_dashboard(make_client: Any) -> None:
    client = await dashboard_client(make_client)
    for target in ("https://evil.example/", "//evil.example/x", "/api/settings"):
        response = await client.post(
            "/dashboard/login", data={"password": PASSWORD, "next": target},
            headers=same_origin(client), allow_redirects=False)
        assert response.headers["Location"] == "/dashboard", target


async def test_repeated_failures_lock_the_address_out(make_client: Any) -> None:
    client = await dashboard_client(make_client)
    throttle = client.app[dkeys.APP][dkeys.LOGIN_THROTTLE]
    throttle.delay_seconds = 0
    for _ in range(throttle.max_failures):
        assert (await login(client, "guess")).status == 401
    locked = await login(client)  # even the right password waits now
    assert locked.status == 429
    assert "尝试次数过多" in await locked.text()
    assert "Set-Cookie" not in locked.headers


async def test_missing_password_gives_503_everywhere_but_api_keeps_working(
        make_client: Any) -> None:
    client = await make_client(DASHBOARD_PASSWORD="", SESSION_SECRET=SECRET)
    for path in ("/dashboard", "/dashboard/login", "/dashboard/settings", "/dashboard/nope"):
        response = await client.get(path, allow_redirects=False)
        assert response.status == 503, path
        text = await response.text()
        assert "DASHBOARD_PASSWORD" in text and "管理面板暂不可用" in text
        assert "Dashboard unavailable" in text
    response = await client.post("/dashboard/login", data={"password": ""},
                                 headers=same_origin(client))
    assert response.status == 503
    assert (await client.get("/api/settings")).status == 200
    assert (await client.get("/api/models")).status == 200
    assert (await client.get("/")).status == 200
    assert (await client.get("/static/css/dashboard.css")).status == 200
    models = await client.get("/v1/models")
    assert models.status not in (503, 500)


async def test_short_session_secret_gives_503_naming_it(make_client: Any) -> None:
    client = await make_client(DASHBOARD_PASSWORD=PASSWORD, SESSION_SECRET="too-short")
    response = await client.get("/dashboard/login")
    assert response.status == 503
    text = await response.text()
    assert "SESSION_SECRET" in text
    assert "DASHBOARD_PASSWORD 未设置" not in text
    assert "too-short" not in text


async def test_dashboard_cookie_never_authorises_the_api(make_client: Any) -> None:
    client = await dashboard_client(make_client, GATEWAY_SECRET="gateway-secret-for-programs")
    cookie = set_cookie(await login(client))[SESSION_COOKIE].value
    assert (await client.get("/dashboard")).status == 200
    with_cookie = {"Cookie": f"{SESSION_COOKIE}={cookie}"}
    response = await client.get("/api/settings", headers=with_cookie)
    assert response.status == 401
    assert (await response.json())["error"]["code"] == "invalid_api_key"
    response = await client.put("/api/settings", json={"DEFAULT_MODEL": "x/y"},
                                headers=with_cookie)
    assert response.status == 401
    keyed = await client.get("/api/settings",
                             headers={"X-Gateway-Key": "gateway-secret-for-programs"})
    assert keyed.status == 200
    page = await client.get("/dashboard/settings")
    assert "gateway-secret-for-programs" not in await page.text()
