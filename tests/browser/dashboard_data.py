"""Realistic dashboard data, written in a few SQL statements: sessions with long ids, a month of
usage over several models, twenty failing jobs, memories with a reminder, a thread whose
summary failed. Browser tests seed it once and then look at every page, signed in at a
phone's or a laptop's size (``logged_in``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from pawwake.db.pool import execute, transaction
from tests.dashboard_support import PASSWORD

VIEWPORTS = {"phone": {"width": 390, "height": 844}, "laptop": {"width": 1280, "height": 900}}
ZONE = timezone(timedelta(hours=8))
ZONE_LABEL = "UTC+8"

# Ids with no break opportunity, as clients make them.
LONG_SESSION = "openwebui-" + "c0ffee" * 8
CLAUDE_SESSION = "claude-code:8f14e45f-ceea-467f-a0e5-1c5a7e9c2b31:main-worktree"
SESSIONS = [LONG_SESSION, CLAUDE_SESSION, "kelivo-2026-11-30T21:04:55.123Z-5f2c9a",
            "chatbox", "kyoto-trip"] + [f"session-{n:02d}-{'ab' * 12}" for n in range(20)]
MODELS = ["anthropic/claude-sonnet-4.5", "google/gemini-2.5-flash-preview-09-2025",
          "deepseek/deepseek-chat-v3.1"]
LONG_URL = "https://example.com/" + "very-long-path-segment-" * 6 + "?q=" + "x" * 60

# Job errors as the handlers write them (memory/extraction/job.py, search/embedding_sweep.py,
# jobs.py, db/jobs.py), a few of each.
JOB_ERRORS = [
    ("memory_extract", "pending", "memory model rate limited (429)"),
    ("memory_extract", "pending", "memory model deepseek/deepseek-chat-v3.1 answered 502"),
    ("memory_extract", "dead", "memory model deepseek/deepseek-chat-v3.1 unreachable:"
     " UpstreamTimeout"),
    ("memory_extract", "dead", "memory model deepseek/deepseek-chat-v3.1 answer was truncated"
     " (raise MEMORY_MAX_TOKENS)"),
    ("memory_extract", "failed", "memory model deepseek/deepseek-chat-v3.1 answer unusable:"
     " Expecting value: line 1 column 1 (char 0)"),
    ("memory_embed", "pending", "EmbeddingError: the embeddings API answered 401"),
    ("memory_embed", "dead", "embedding settings changed during the backfill"),
    ("conversation_embed", "pending", "the worker running it stopped before it finished"),
    ("memory_consolidate", "dead", "ValueError: the memory model answered nonsense: "
     + "{\"title\": " * 20),
    ("keyword_reindex", "pending", "OperationalError: server closed the connection"
     " unexpectedly"),
]


def local(days_ago: int, hour: int, minute: int = 0) -> datetime:
    """A UTC instant given as a local (UTC+8) wall time ``days_ago`` days back."""
    day = datetime.now(UTC).astimezone(ZONE).date() - timedelta(days=days_ago)
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=ZONE).astimezone(UTC)


def _values(rows: list[tuple[Any, ...]]) -> tuple[str, list[Any]]:
    width = len(rows[0])
    marks = ", ".join("(" + ", ".join(["%s"] * width) + ")" for _ in rows)
    return marks, [value for row in rows for value in row]


async def seed_dashboard(pool: Any, *, jobs: int = 20) -> None:
    """Write the whole data set in one transaction."""
    messages = []
    for number, session in enumerate(SESSIONS):
        at = local(number % 9, 9 + number % 12, 4)
        texts = [("user", "下个月去京都旅行，清水寺那天怎么安排？"),
                 ("assistant", "早上七点到清水寺，中午去二年坂吃汤豆腐。参考：" + LONG_URL),
                 ("user", "The hotel is near Gion; what about the evening?"),
                 ("assistant", "Walk along Shirakawa, then dinner in Pontocho.")]
        for offset, (role, text) in enumerate(texts[: 2 + number % 3]):
            messages.append((session, role, text, MODELS[number % 3],
                             at + timedelta(minutes=offset)))
    usage = []
    kinds = ["chat", "chat", "extract", "summary", "embed"]
    for day in range(31):
        for n in range(1 + day % 3):
            kind = kinds[(day + n) % len(kinds)]
            prompt, completion = 1200 + 97 * day + 31 * n, 240 + 13 * day
            usage.append((SESSIONS[(day + n) % len(SESSIONS)], MODELS[(day + n) % 3], prompt,
                          completion, prompt + completion, kind,
                          0.0004 * (day + 1) if kind == "chat" else None,
                          local(day, 8 + n * 5, 10)))
    job_rows = []
    for n in range(jobs):
        kind, status, error = JOB_ERRORS[n % len(JOB_ERRORS)]
        updated = local(n % 5, 10, n)
        job_rows.append((kind, status, error, 3 + n % 5, 12, MODELS[n % 3]
                         if kind.startswith("memory") else None, updated - timedelta(hours=2),
                         updated, updated + timedelta(minutes=30)))
    memories = [("用户的猫叫小橘，是一只橘色的公猫", 8, 3, None, None),
                ("用户在上海工作，是一名前端工程师，常用的链接：" + LONG_URL, 7, 1, None, None),
                ("提醒用户给小橘打疫苗", 7, 1, None, local(-1, 9)),
                ("The user prefers short answers with examples", 6, 1, None, None),
                ("用户每年春节回杭州看父母", 6, 2, "2025-01-29", None)]
    async with transaction(pool) as cur:
        marks, params = _values(messages)
        await execute(cur, "INSERT INTO conversations (session_id, role, content, model,"
                      f" created_at) VALUES {marks}", params)
        marks, params = _values(usage)
        await execute(cur, "INSERT INTO token_usage (session_id, model, prompt_tokens,"
                      " completion_tokens, total_tokens, usage_type, cost, created_at)"
                      f" VALUES {marks}", params)
        if job_rows:
            marks, params = _values(job_rows)
            await execute(cur, "INSERT INTO jobs (kind, status, last_error, attempts,"
                          " max_attempts, model, created_at, updated_at, run_after)"
                          f" VALUES {marks}", params)
        marks, params = _values([(content, importance, layer, event_date, remind_at,
                                  local(2, 12)) for content, importance, layer, event_date,
                                 remind_at in memories])
        await execute(cur, "INSERT INTO memories (content, importance, layer, event_date,"
                      f" remind_at, created_at) VALUES {marks}", params)
        await execute(cur, "INSERT INTO partition_state (thread_id, summary_parts,"
                      " last_summary_error) VALUES (%s, %s, %s)",
                      (CLAUDE_SESSION, json.dumps(["用户计划五月去京都，住在祇园附近。"]),
                       "summary model rate limited (429)"))


async def logged_in(browser: Any, base: str, viewport: dict[str, int], lang: str) -> Any:
    context = await browser.new_context(viewport=viewport)
    context.set_default_timeout(10_000)
    await context.add_cookies([{"name": "pawwake_lang", "value": lang,
                                "url": base.rsplit("/dashboard", 1)[0]}])
    page = await context.new_page()
    await page.goto(base + "/login")
    await page.fill("#password", PASSWORD)
    await page.click("form.login-form button[type=submit]")
    await page.wait_for_url(base)
    return page
