"""The hooks lose nothing: the final reply, seen marks after the turn, a local spool while
Pawwake is unreachable, and Codex's Stop JSON. Real subprocesses, real app, recorded payloads."""

from __future__ import annotations

import importlib
import json
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.hook_support import (
    CLAUDE,
    CODEX,
    HOOK_SETTINGS,
    KEY,
    ROOT,
    base_url,
    env_for,
    payload,
    run_hook,
    seed,
    seen_ids,
    spool_dir,
    spooled,
    stored,
    write_config,
)

CLAUDE_USER = "帮我看看清水寺那天的行程，顺便查一下天气"
CLAUDE_FINAL = "那天晴天，建议早上七点到清水寺，避开人潮，中午去二年坂吃汤豆腐。"
CLAUDE_PROMPT = "我们之前聊过的京都旅行计划，清水寺那天怎么安排？"
CODEX_USER = "京都旅行清水寺那天的安排还记得吗？"
CODEX_FINAL = "记得：早上七点到清水寺，中午在二年坂吃汤豆腐。"
PROMPT_ID = "5547d94d-8a98-45b0-912d-a30c926c39cc"  # as recorded from Claude Code 2.1.332
PARTIAL = ["claude_transcript_partial.jsonl", "claude_transcript_split_partial.jsonl"]


@pytest.fixture
async def client(make_client: Any) -> Any:
    return await make_client(**HOOK_SETTINGS)


@pytest.fixture
def down(unused_tcp_port: int) -> dict[str, str]:
    return env_for(f"http://127.0.0.1:{unused_tcp_port}")


async def claude_stop(home: Path, env: dict[str, str], transcript: str | None,
                      stop: str = "claude_stop.json") -> tuple[int, str, str]:
    path = home / "transcript.jsonl"
    if transcript is not None:
        path.write_text(payload(transcript))
    return await run_hook(CLAUDE / "pawwake_turn_writer.py",
                          payload(stop, TRANSCRIPT_PATH=str(path)), home, env)


def pairs(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(r["role"], r["content"]) for r in rows]


@pytest.mark.parametrize("transcript", [*PARTIAL, "claude_transcript_split.jsonl"])
async def test_claude_writer_prefers_last_assistant_message(client: Any, tmp_path: Path,
                                                            transcript: str) -> None:
    """The transcript may not hold the final reply yet when Stop fires."""
    code, out, err = await claude_stop(tmp_path, env_for(base_url(client)), transcript)
    assert (code, out, err) == (0, "", "")
    rows = await stored(client)
    assert pairs(rows) == [("user", CLAUDE_USER), ("assistant", CLAUDE_FINAL)]
    assert rows[0]["turn_id"] == PROMPT_ID and rows[1]["model"] == "claude-sonnet-4-5"


@pytest.mark.parametrize("transcript", ["claude_transcript.jsonl",
                                        "claude_transcript_split.jsonl"])
async def test_claude_writer_falls_back_to_the_transcript(client: Any, tmp_path: Path,
                                                          transcript: str) -> None:
    code, out, err = await claude_stop(tmp_path, env_for(base_url(client)), transcript,
                                       "claude_stop_without_last_message.json")
    assert (code, out, err) == (0, "", "")
    rows = await stored(client)
    assert pairs(rows) == [("user", CLAUDE_USER), ("assistant", CLAUDE_FINAL)]
    assert rows[0]["turn_id"] == "u1"  # no prompt_id: the user entry names the turn


@pytest.mark.parametrize("transcript", PARTIAL)
async def test_claude_writer_never_stores_an_intermediate_reply(client: Any, tmp_path: Path,
                                                                transcript: str) -> None:
    """Without last_assistant_message a transcript that ends mid-turn holds no reply."""
    code, _, _ = await claude_stop(tmp_path, env_for(base_url(client)), transcript,
                                   "claude_stop_without_last_message.json")
    assert code == 0
    assert await stored(client) == []


async def test_claude_writer_uses_the_kept_prompt_without_a_transcript(
        client: Any, tmp_path: Path) -> None:
    env = env_for(base_url(client))
    recall = await run_hook(CLAUDE / "pawwake_recall.py",
                            payload("claude_user_prompt_submit.json"), tmp_path, env)
    assert recall[0] == 0
    code, out, err = await claude_stop(tmp_path, env, transcript=None)  # file not written yet
    assert (code, out, err) == (0, "", "")
    rows = await stored(client)
    assert pairs(rows) == [("user", CLAUDE_PROMPT), ("assistant", CLAUDE_FINAL)]
    code, _, _ = await claude_stop(tmp_path, env, transcript=None)  # a repeated Stop
    assert code == 0 and len(await stored(client)) == 2


async def test_claude_writer_ignores_a_transcript_of_an_earlier_prompt(
        client: Any, tmp_path: Path) -> None:
    """The transcript's last prompt has another promptId: its reply is not this turn's."""
    env = env_for(base_url(client))
    await run_hook(CLAUDE / "pawwake_recall.py",
                   payload("claude_user_prompt_submit.json", **{PROMPT_ID: "next-prompt"}),
                   tmp_path, env)
    code, out, err = await claude_stop(tmp_path, env, "claude_transcript_split.jsonl",
                                       "claude_stop_without_last_message.json")
    assert (code, out, err) == (0, "", "")
    assert await stored(client) == []  # no reply for the new prompt yet: nothing mixed up
    stop = payload("claude_stop.json", TRANSCRIPT_PATH=str(tmp_path / "transcript.jsonl"),
                   **{PROMPT_ID: "next-prompt"})
    assert await run_hook(CLAUDE / "pawwake_turn_writer.py", stop, tmp_path, env) == (0, "", "")
    rows = await stored(client)
    assert pairs(rows) == [("user", CLAUDE_PROMPT), ("assistant", CLAUDE_FINAL)]
    assert rows[0]["turn_id"] == "next-prompt"


async def test_codex_stop_prints_empty_json_on_every_path(client: Any, tmp_path: Path,
                                                          down: dict[str, str]) -> None:
    up = env_for(base_url(client))
    await run_hook(CODEX / "pawwake_recall.py", payload("codex_user_prompt_submit.json"),
                   tmp_path, up)
    stop = payload("codex_stop.json")
    unsafe_home = tmp_path / "unsafe"
    write_config(unsafe_home, base_url(client), mode=0o644)
    cases = [
        ("writes the turn", stop, up, tmp_path),
        ("repeated Stop", stop, up, tmp_path),
        ("no reply", payload("codex_stop_no_message.json"), up, tmp_path),
        ("no kept prompt", payload("codex_stop.json", **{"0199a213-9f4e": "0199a213-0000"}),
         up, tmp_path),
        ("not JSON", "{not json", up, tmp_path),
        ("empty stdin", "", up, tmp_path),
        ("unreachable", stop, down, tmp_path),
        ("no configuration", stop, {}, tmp_path / "empty-home"),
        ("config others can read", stop, {}, unsafe_home),
    ]
    for name, stdin, env, home in cases:
        code, out, err = await run_hook(CODEX / "pawwake_turn_writer.py", stdin, home, env)
        assert code == 0, name
        assert out.strip() == "{}" and json.loads(out) == {}, name
        assert KEY not in err, name
    assert pairs(await stored(client, "source = 'codex'")) == [("user", CODEX_USER),
                                                                ("assistant", CODEX_FINAL)]


async def test_codex_subagent_prompt_is_not_kept(client: Any, tmp_path: Path) -> None:
    env = env_for(base_url(client))
    code, out, err = await run_hook(CODEX / "pawwake_recall.py",
                                    payload("codex_user_prompt_submit_subagent.json"),
                                    tmp_path, env)
    assert (code, out, err) == (0, "", "")
    assert not (tmp_path / ".cache" / "pawwake" / "pending.json").exists()


async def search_ids(client: Any, query: str) -> set[str]:
    resp = await client.post("/api/chat/search-fragments", headers={"X-Gateway-Key": KEY},
                             json={"q": query, "max_sessions": 3, "context": 1})
    return set((await resp.json())["fragment_ids"])


async def test_claude_seen_marks_are_written_by_the_stop_writer(client: Any,
                                                                tmp_path: Path) -> None:
    await seed(client)
    env = env_for(base_url(client))
    prompt = payload("claude_user_prompt_submit.json")
    for _ in range(2):  # no Stop yet (an interrupted turn): the fragment is offered again
        code, out, _ = await run_hook(CLAUDE / "pawwake_recall.py", prompt, tmp_path, env)
        assert code == 0 and "早上七点到清水寺" in out
        assert seen_ids(tmp_path) == set()
    code, _, _ = await claude_stop(tmp_path, env, transcript=None)
    assert code == 0
    marked = seen_ids(tmp_path)
    assert marked and marked <= await search_ids(client, CLAUDE_PROMPT)
    code, out, _ = await run_hook(CLAUDE / "pawwake_recall.py", prompt, tmp_path, env)
    assert code == 0 and "早上七点到清水寺" not in out and "用户计划三月去京都旅行" in out


async def test_codex_seen_marks_are_written_by_the_stop_writer(client: Any, tmp_path: Path,
                                                               down: dict[str, str]) -> None:
    await seed(client)
    up = env_for(base_url(client))
    code, out, _ = await run_hook(CODEX / "pawwake_recall.py",
                                  payload("codex_user_prompt_submit.json"), tmp_path, up)
    assert code == 0 and "早上七点到清水寺" in out
    assert seen_ids(tmp_path) == set()
    # the model answered: the fragments are marked even while Pawwake is unreachable
    code, out, _ = await run_hook(CODEX / "pawwake_turn_writer.py", payload("codex_stop.json"),
                                  tmp_path, down)
    assert code == 0 and json.loads(out) == {}
    assert seen_ids(tmp_path) and seen_ids(tmp_path) <= await search_ids(client, CODEX_USER)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_unreachable_turns_are_spooled_then_delivered_once(
        client: Any, tmp_path: Path, down: dict[str, str]) -> None:
    up = env_for(base_url(client))
    assert await run_hook(CODEX / "pawwake_recall.py", payload("codex_user_prompt_submit.json"),
                          tmp_path, down) == (0, "", "")
    code, out, err = await run_hook(CODEX / "pawwake_turn_writer.py",
                                    payload("codex_stop.json"), tmp_path, down)
    assert (code, json.loads(out), err) == (0, {}, "")
    for _ in range(2):  # a repeated Stop spools the same turn once
        assert await claude_stop(tmp_path, down, "claude_transcript.jsonl") == (0, "", "")
    files = spooled(tmp_path)
    assert len(files) == 2
    assert mode_of(spool_dir(tmp_path)) == 0o700
    assert all(mode_of(path) == 0o600 for path in files)
    assert await stored(client) == []
    # the next hook run, whatever it is, delivers what waited
    code, _, err = await run_hook(CODEX / "pawwake_recall.py",
                                  payload("codex_user_prompt_submit.json"), tmp_path, up)
    assert (code, err) == (0, "")
    assert spooled(tmp_path) == []
    expected = {("codex", "user", CODEX_USER), ("codex", "assistant", CODEX_FINAL),
                ("claude-code", "user", CLAUDE_USER), ("claude-code", "assistant", CLAUDE_FINAL)}
    rows = await stored(client)
    assert sorted((r["source"], r["role"], r["content"]) for r in rows) == sorted(expected)
    # later hook runs (and a resent Stop) store nothing twice
    assert await claude_stop(tmp_path, up, "claude_transcript.jsonl") == (0, "", "")
    await run_hook(CODEX / "pawwake_turn_writer.py", payload("codex_stop.json"), tmp_path, up)
    assert len(await stored(client)) == 4


def load_spool_module(monkeypatch: pytest.MonkeyPatch, home: Path) -> Any:
    """The hooks' own spool code, to fill the spool quickly (HOME points at ``home``)."""
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.syspath_prepend(str(ROOT / "integrations" / "common"))
    return importlib.import_module("pawwake_spool")


def spool_turn_body(number: int) -> dict[str, Any]:
    return {"turn_id": f"t-{number:03d}", "session_id": "spool-session", "source": "codex",
            "occurred_at": f"2026-03-01T02:{number // 60:02d}:{number % 60:02d}Z",
            "messages": [{"role": "user", "content": f"问题 {number}"},
                         {"role": "assistant", "content": f"回答 {number}"}]}


async def test_the_spool_is_bounded_and_keeps_the_oldest(
        client: Any, tmp_path: Path, down: dict[str, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    hook = load_spool_module(monkeypatch, tmp_path)
    cap = hook.SPOOL_MAX_FILES
    for number in range(cap):
        assert hook.spool_turn(spool_turn_body(number))
    assert not hook.spool_turn({**spool_turn_body(999), "messages": [
        {"role": "user", "content": "x" * (hook.SPOOL_MAX_BYTES + 1)}]})
    code, out, err = await claude_stop(tmp_path, down, "claude_transcript.jsonl")
    assert (code, out) == (0, "")
    assert "spool" in err and KEY not in err  # a turn that cannot be kept is said, not hidden
    assert len(spooled(tmp_path)) == cap
    assert all(json.loads(path.read_text())["source"] == "codex" for path in spooled(tmp_path))
    up = env_for(base_url(client))
    for _ in range(cap):  # each run delivers what its time budget allows, oldest first
        if not spooled(tmp_path):
            break
        await run_hook(CODEX / "pawwake_turn_writer.py", payload("codex_stop_no_message.json"),
                       tmp_path, up)
    assert spooled(tmp_path) == []
    rows = await stored(client)
    assert len(rows) == 2 * cap
    user_turns = [r["turn_id"] for r in rows if r["role"] == "user"]
    assert user_turns == [f"t-{number:03d}" for number in range(cap)]


async def test_a_continued_turn_keeps_its_final_reply(client: Any, tmp_path: Path) -> None:
    """stop_hook_active: another Stop hook made the turn go on; the turn keeps the final reply
    in place of the first one (same turn, same user text, no extra row)."""
    up = env_for(base_url(client))
    more = "补充：记得带伞，傍晚可能有阵雨。"
    active = {'"stop_hook_active": false': '"stop_hook_active": true'}
    await run_hook(CODEX / "pawwake_recall.py", payload("codex_user_prompt_submit.json"),
                   tmp_path, up)
    transcript = str(tmp_path / "transcript.jsonl")
    for _ in range(2):  # every Stop may come twice
        assert await claude_stop(tmp_path, up, "claude_transcript.jsonl") == (0, "", "")
        further = payload("claude_stop.json", TRANSCRIPT_PATH=transcript, **active,
                          **{CLAUDE_FINAL: more})
        assert await run_hook(CLAUDE / "pawwake_turn_writer.py", further, tmp_path, up
                              ) == (0, "", "")
        for stop in (payload("codex_stop.json"),
                     payload("codex_stop.json", **active, **{CODEX_FINAL: more})):
            code, out, _ = await run_hook(CODEX / "pawwake_turn_writer.py", stop, tmp_path, up)
            assert (code, json.loads(out)) == (0, {})
    claude_rows = await stored(client, "source = 'claude-code'")
    assert pairs(claude_rows) == [("user", CLAUDE_USER), ("assistant", more)]
    assert pairs(await stored(client, "source = 'codex'")) == [
        ("user", CODEX_USER), ("assistant", more)]
    assert [r["turn_id"] for r in claude_rows] == [PROMPT_ID, None]


async def test_a_continued_turn_spooled_while_away_is_delivered_with_its_final_reply(
        client: Any, tmp_path: Path, down: dict[str, str]) -> None:
    """Both Stops of a continued turn happen while Pawwake is away: the spool keeps one file
    (the final reply) and delivers it once; a first Stop delivered earlier is replaced."""
    up = env_for(base_url(client))
    more = "补充：记得带伞，傍晚可能有阵雨。"
    active = {'"stop_hook_active": false': '"stop_hook_active": true'}
    await run_hook(CODEX / "pawwake_recall.py", payload("codex_user_prompt_submit.json"),
                   tmp_path, down)
    for stop in (payload("codex_stop.json"),
                 payload("codex_stop.json", **active, **{CODEX_FINAL: more})):
        code, out, _ = await run_hook(CODEX / "pawwake_turn_writer.py", stop, tmp_path, down)
        assert (code, json.loads(out)) == (0, {})
    files = spooled(tmp_path)
    assert len(files) == 1 and more in json.loads(files[0].read_text())["messages"][-1]["content"]
    await run_hook(CODEX / "pawwake_recall.py", payload("codex_user_prompt_submit.json"),
                   tmp_path, up)
    assert spooled(tmp_path) == []
    assert pairs(await stored(client)) == [("user", CODEX_USER), ("assistant", more)]

    # Claude Code: the first Stop reached Pawwake, the continuation waited in the spool.
    assert await claude_stop(tmp_path, up, "claude_transcript.jsonl") == (0, "", "")
    transcript = str(tmp_path / "transcript.jsonl")
    further = payload("claude_stop.json", TRANSCRIPT_PATH=transcript, **active,
                      **{CLAUDE_FINAL: more})
    assert await run_hook(CLAUDE / "pawwake_turn_writer.py", further, tmp_path, down
                          ) == (0, "", "")
    assert len(spooled(tmp_path)) == 1
    assert pairs(await stored(client, "source = 'claude-code'")) == [
        ("user", CLAUDE_USER), ("assistant", CLAUDE_FINAL)]
    await run_hook(CODEX / "pawwake_recall.py", payload("codex_user_prompt_submit.json"),
                   tmp_path, up)
    assert spooled(tmp_path) == []
    assert pairs(await stored(client, "source = 'claude-code'")) == [
        ("user", CLAUDE_USER), ("assistant", more)]


async def test_a_refused_key_or_a_database_outage_spools_the_turn(
        make_client: Any, client: Any, tmp_path: Path) -> None:
    """401 (a key the person can fix) and 503 (Pawwake without its database) keep the turn."""
    no_database = await make_client(**{**HOOK_SETTINGS, "DATABASE_ENABLED": False})
    wrong_key = {"PAWWAKE_URL": base_url(client), "PAWWAKE_GATEWAY_KEY": "not-the-key"}
    code, out, err = await claude_stop(tmp_path, wrong_key, "claude_transcript.jsonl")
    assert (code, out) == (0, "") and "refused the gateway key" in err and KEY not in err
    await run_hook(CODEX / "pawwake_recall.py", payload("codex_user_prompt_submit.json"),
                   tmp_path, env_for(base_url(no_database)))
    code, out, err = await run_hook(CODEX / "pawwake_turn_writer.py",
                                    payload("codex_stop.json"), tmp_path,
                                    env_for(base_url(no_database)))
    assert (code, json.loads(out), err) == (0, {}, "")
    assert len(spooled(tmp_path)) == 2 and await stored(client) == []
    await run_hook(CODEX / "pawwake_turn_writer.py", payload("codex_stop_no_message.json"),
                   tmp_path, env_for(base_url(client)))
    assert spooled(tmp_path) == []
    assert len(await stored(client)) == 4


async def test_a_turn_pawwake_refuses_is_set_aside_not_resent(
        client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spool = load_spool_module(monkeypatch, tmp_path)
    assert spool.spool_turn({**spool_turn_body(1), "bogus": True})  # 400 unknown_field
    assert spool.spool_turn(spool_turn_body(2))
    errors = []
    for _ in range(2):
        code, out, err = await run_hook(CODEX / "pawwake_turn_writer.py",
                                        payload("codex_stop_no_message.json"), tmp_path,
                                        env_for(base_url(client)))
        assert (code, json.loads(out)) == (0, {})
        errors.append(err)
    assert "HTTP 400" in errors[0] and errors[1] == ""  # said once, not sent again
    assert [r["turn_id"] for r in await stored(client) if r["role"] == "user"] == ["t-002"]
    assert spooled(tmp_path) == []
    (rejected,) = spool_dir(tmp_path).glob("*.rejected")
    assert mode_of(rejected) == 0o600 and json.loads(rejected.read_text())["turn_id"] == "t-001"
