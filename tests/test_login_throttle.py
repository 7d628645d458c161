"""The login throttle locks out the client that guesses, not the right password from others."""

from __future__ import annotations

from typing import Any

from pawwake.dashboard import dashboard_keys as dkeys
from pawwake.dashboard.login import DEVICE_COOKIE
from pawwake.dashboard.login_throttle import LoginClient, LoginThrottle
from tests.dashboard_support import PASSWORD, dashboard_client, login, set_cookie


def quick_throttle(client: Any) -> LoginThrottle:
    throttle = client.app[dkeys.APP][dkeys.LOGIN_THROTTLE]
    throttle.delay_seconds = 0
    return throttle


async def guess_until_locked(client: Any, throttle: LoginThrottle, **headers: str) -> None:
    for _ in range(throttle.max_failures):
        assert (await login(client, "a-wrong-guess", **headers)).status == 401
    assert (await login(client, PASSWORD, **headers)).status == 429


async def known_browser(client: Any) -> str:
    """Sign in once and out again: the browser keeps its device cookie."""
    response = await login(client)
    assert response.status == 303
    device = set_cookie(response, DEVICE_COOKIE)[DEVICE_COOKIE]
    assert device["httponly"] is True and device["samesite"] == "Strict"
    assert PASSWORD not in device.value
    client.session.cookie_jar.clear()
    return device.value


async def test_a_browser_that_signed_in_before_is_not_locked_by_a_neighbour(
        make_client: Any) -> None:
    """Same address (one NAT / one proxy): the guesser is locked, the known browser is not."""
    client = await dashboard_client(make_client)
    throttle = quick_throttle(client)
    device = await known_browser(client)
    await guess_until_locked(client, throttle)  # the attacker, no device cookie
    response = await login(client, PASSWORD, Cookie=f"{DEVICE_COOKIE}={device}")
    assert response.status == 303
    client.session.cookie_jar.clear()
    assert (await login(client, PASSWORD)).status == 429  # the attacker stays locked


async def test_a_forged_device_cookie_does_not_escape_the_lockout(make_client: Any) -> None:
    client = await dashboard_client(make_client)
    throttle = quick_throttle(client)
    await guess_until_locked(client, throttle)
    forged = await login(client, PASSWORD, Cookie=f"{DEVICE_COOKIE}=made-up.value")
    assert forged.status == 429


async def test_a_known_browser_that_guesses_is_locked_itself(make_client: Any) -> None:
    client = await dashboard_client(make_client)
    throttle = quick_throttle(client)
    device = await known_browser(client)
    await guess_until_locked(client, throttle, Cookie=f"{DEVICE_COOKIE}={device}")


async def test_clients_behind_a_trusted_proxy_are_told_apart(make_client: Any) -> None:
    client = await dashboard_client(make_client, TRUSTED_PROXIES="127.0.0.1")
    throttle = quick_throttle(client)
    await guess_until_locked(client, throttle, **{"X-Forwarded-For": "203.0.113.5"})
    other = await login(client, PASSWORD, **{"X-Forwarded-For": "198.51.100.7"})
    assert other.status == 303


async def test_ipv6_neighbours_in_one_prefix_share_a_counter(make_client: Any) -> None:
    client = await dashboard_client(make_client, TRUSTED_PROXIES="127.0.0.1")
    throttle = quick_throttle(client)
    for n in range(throttle.max_failures):
        response = await login(client, "guess", **{"X-Forwarded-For": f"2001:db8:1:2::{n + 1}"})
        assert response.status == 401
    locked = await login(client, PASSWORD, **{"X-Forwarded-For": "2001:db8:1:2::ffff"})
    assert locked.status == 429


async def test_many_addresses_guessing_slow_everyone_without_a_known_browser() -> None:
    throttle = LoginThrottle(delay_seconds=0, global_failures=20, global_interval=60)
    for n in range(20):
        client = LoginClient(address=f"198.51.100.{n}", device=None)
        assert await throttle.wait_seconds(None, client) == 0
        await throttle.failed(None, client)
    fresh = LoginClient(address="192.0.2.1", device=None)
    assert await throttle.wait_seconds(None, fresh) == 0  # one attempt per interval still gets through
    assert await throttle.wait_seconds(None, LoginClient(address="192.0.2.2", device=None)) > 0
    assert await throttle.wait_seconds(None, LoginClient(address="192.0.2.3", device="known-1")) == 0


async def test_throttle_memory_is_bounded() -> None:
    throttle = LoginThrottle(delay_seconds=0, max_clients=50, global_failures=10_000)
    for n in range(500):
        await throttle.failed(None, LoginClient(address=f"10.0.{n // 250}.{n % 250}", device=None))
    assert throttle.tracked_clients() <= 50
