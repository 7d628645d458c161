"""Past conversation fragments recalled into the current turn in partition mode."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pawwake.db.pool import cursor, execute
from pawwake.services import services_of
from tests.gateway_support import GATEWAY_KEY, chat_body, settle

HEADERS = {"X-Gateway-Key": GATEWAY_KEY}
RECALL_ON = {"GATEWAY_SECRET": GATEWAY_KEY, "JOB_WORKERS": 0, "MEMORY_ENABLED": False,
             "CONVERSATION_RECALL_ENABLED": True, "CACHE_PARTITION_ENABLED": True,
             "MAX_CONVERSATIONS_INJECT": 3, "CONVERSATION_SEEN_TTL_HOURS": 6,
             "TIMEZONE_HOURS": 8}


async def store_turn(client: Any, session: str, turn: str, user: str, reply: str) -> None:
    response = await client.post("/api/conversations/turn", headers=HEADERS, json={
        "turn_id": turn, "session_id": session, "source": "test",
        "occurred_at": datetime(2026, 1, 5, 2, 30, tzinfo=UTC).isoformat(),
        "messages": [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]})
    assert response.status == 201


def current_turn(upstream: Any) -> str:
    content = upstream.requests[-1].body["messages"][-1]["content"]
    return content if isinstance(content, str) else str(content)


async def ask(client: Any, text: str, thread: str) -> None:
    """Partition mode: every client continues the active thread (PARTITION_SESSION_ID)."""
    await services_of(client.server.app).config.update({"PARTITION_SESSION_ID": thread})
    response = await client.post("/v1/chat/completions", json=chat_body(text), headers=HEADERS)
    assert response.status == 200
    await response.read()
    await settle(client)


async def test_fragments_from_other_sessions_are_recalled_once_within_the_ttl(
        gateway: Any, upstream: Any) -> None:
    client = await gateway(**RECALL_ON)
    await store_turn(client, "trip", "t1", "下个月去京都旅行，清水寺那天怎么安排",
                     "早上七点到清水寺，中午去二年坂吃汤豆腐。")
    await store_turn(client, "now", "n1", "京都清水寺要门票吗", "要的，成人四百日元。")

    await ask(client, "我们上次聊的京都清水寺行程是什么", "now")
    turn = current_turn(upstream)
    assert turn.startswith("<retrieved_conversations>")
    assert "[2026-01-05 10:30] 用户: 下个月去京都旅行" in turn  # local time, UTC+8
    assert "四百日元" not in turn  # the current session is never recalled into itself
    assert turn.endswith("我们上次聊的京都清水寺行程是什么")

    await ask(client, "京都清水寺的行程再说一遍", "now")
    assert "retrieved_conversations" not in current_turn(upstream)  # seen within the TTL

    async with cursor(services_of(client.server.app).database.pool) as cur:
        await execute(cur,
                      "UPDATE conversation_fragment_seen SET seen_at = now() - interval '7 hours'")
    await ask(client, "京都清水寺的行程再说一遍", "now")
    assert "下个月去京都旅行" in current_turn(upstream)


async def test_recall_needs_partition_mode_and_its_switch(gateway: Any, upstream: Any) -> None:
    client = await gateway(**{**RECALL_ON, "CACHE_PARTITION_ENABLED": False})
    await store_turn(client, "trip", "t1", "京都清水寺怎么安排", "早上七点出发。")
    await ask(client, "京都清水寺怎么安排来着", "now")
    assert "retrieved_conversations" not in str(upstream.requests[-1].body)


async def test_the_current_thread_is_recalled_only_after_it_slid_out_of_the_live_zones(
        gateway: Any, upstream: Any) -> None:
    client = await gateway(**{**RECALL_ON, "CACHE_PARTITION_X": 2, "CACHE_SUMMARY_MODEL": ""})
    await ask(client, "我计划明年二月去冰岛看极光", "now")
    await ask(client, "冰岛的极光计划怎么样", "now")
    assert "retrieved_conversations" not in current_turn(upstream)  # still in zone A
    await ask(client, "今天午饭吃了面条", "now")
    await ask(client, "下午有点困", "now")
    # B holds X rounds now: this request rotates zone A (the Iceland rounds) out of the context,
    # so recall may bring them back from the same thread.
    await ask(client, "冰岛极光的计划还记得吗", "now")
    turn = current_turn(upstream)
    assert "<retrieved_conversations>" in turn and "冰岛看极光" in turn
    assert "今天午饭吃了面条" not in turn  # live zone messages are never recalled


async def test_recall_searches_the_users_words_not_the_clients_reminders(
        gateway: Any, upstream: Any) -> None:
    """Claude Code wraps the user's words in ``<system-reminder>`` blocks (environment, todo
    lists): recall looks for what the user asked, as memory search does."""
    client = await gateway(**RECALL_ON)
    await store_turn(client, "trip", "t1", "下个月去京都旅行，清水寺那天怎么安排",
                     "早上七点到清水寺，中午去二年坂吃汤豆腐。")
    await store_turn(client, "shell", "s1", "bash shell environment todo list git branch working"
                     " directory tools", "Use git branch to see the working directory's branch.")
    reminder = ("<system-reminder>\n# Environment\nShell: bash. Working directory: /home/me."
                " Git branch: main. The user has a todo list. Tools: bash shell, git, todo list"
                " environment.\n</system-reminder>\n")
    await ask(client, reminder + "我们上次聊的京都清水寺行程是什么", "now")
    turn = current_turn(upstream)
    assert "下个月去京都旅行" in turn
    assert "git branch" not in turn.split("</retrieved_conversations>")[0]
