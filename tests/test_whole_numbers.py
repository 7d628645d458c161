"""Numbers in URLs, queries and forms: only ASCII digits count. ``'²'.isdigit()`` is true but
``int('²')`` fails, so a superscript in ``?page=``, a job id or a form id used to answer 500;
``int()`` alone takes ``'٣'``, ``' 7'`` and ``'1_0'``. Every such parse now goes through one
helper and answers a clear 4xx."""

from __future__ import annotations

from typing import Any

import pytest

from pawwake.text.numbers import whole_number
from tests.dashboard_support import dashboard_client, login, same_origin
from tests.gateway_support import GATEWAY_KEY

HEADERS = {"X-Gateway-Key": GATEWAY_KEY}
ODD = ["²", "٣", "１", " 7", "1_0", "+7", "-1", "7.0", "", "9" * 19]


@pytest.mark.parametrize("text", ODD)
def test_only_plain_ascii_digits_are_whole_numbers(text: str) -> None:
    assert whole_number(text) is None


def test_plain_digits_are_read() -> None:
    assert whole_number("0") == 0
    assert whole_number("0042") == 42
    assert whole_number("9" * 18) == int("9" * 18)
    assert whole_number("1234", max_digits=3) is None


API_GETS = ["/api/conversations?limit=²", "/api/conversations?offset=²",
            "/api/memories/²", "/api/memories/²/sources", "/api/memories/²/versions",
            "/api/jobs/²", "/api/jobs?limit=²", "/api/memories/search?q=x&limit=²",
            "/api/conversations/messages/²"]
API_POSTS = ["/api/jobs/²/retry", "/api/jobs/²/discard", "/api/memories/²/restore",
             "/api/memories/²/revert-merge", "/api/conversations/messages/²/restore"]


async def test_api_answers_4xx_for_unicode_digits(make_client: Any) -> None:
    client = await make_client(GATEWAY_SECRET=GATEWAY_KEY)
    for path in API_GETS:
        response = await client.get(path, headers=HEADERS)
        assert 400 <= response.status < 500, (path, response.status, await response.text())
    for path in API_POSTS:
        response = await client.post(path, headers=HEADERS, json={})
        assert 400 <= response.status < 500, (path, response.status, await response.text())
    response = await client.put("/api/memories/²", headers=HEADERS, json={"content": "x"})
    assert 400 <= response.status < 500


DASHBOARD_GETS = ["/dashboard/memories?page=²", "/dashboard/conversations?page=²",
                  "/dashboard/usage?page=²", "/dashboard/jobs?done=retried&id=²",
                  "/dashboard?job_done=retried&job=²", "/dashboard/memories/²",
                  "/dashboard/memories/row?id=²&n=²", "/dashboard/memories/edit?id=²",
                  "/dashboard/memories/versions?id=²", "/dashboard/memories/sources?id=²"]
DASHBOARD_FORMS = [
    ("/dashboard/jobs/²/retry", {}), ("/dashboard/jobs/²/discard", {}),
    ("/dashboard/memories/action", {"id": "²", "action": "archive", "n": "²"}),
    ("/dashboard/memories/bulk", {"ids": "²", "action": "archive"}),
    ("/dashboard/memories/edit", {"id": "1", "importance": "²", "layer": "-²",
                                  "content": "x"}),
    ("/dashboard/memories/merge", {"ids": "1", "importance": "²", "layer": "²"}),
    ("/dashboard/memories/drafts", {"confirm": "²"}),
    ("/dashboard/conversations/message", {"message": "²", "number": "²", "action": "x"}),
    ("/dashboard/conversations/search", {"page": "²", "q": "x"}),
]


async def test_dashboard_answers_4xx_or_a_page_for_unicode_digits(make_client: Any) -> None:
    client = await dashboard_client(make_client)
    assert (await login(client)).status == 303
    for path in DASHBOARD_GETS:
        response = await client.get(path, allow_redirects=False)
        assert response.status < 500, (path, response.status, await response.text())
    for path, form in DASHBOARD_FORMS:
        response = await client.post(path, data=form, headers=same_origin(client),
                                     allow_redirects=False)
        assert response.status < 500, (path, response.status, await response.text())
