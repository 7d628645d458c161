"""The long-dialogue recall dev set: multi-session chats between two named people, generated
from the hand-written sources in ``tests/data/recall`` (``en.json``, ``zh.json``).

Each dialogue has a few dozen sessions of everyday talk (openers, small talk with varied slot
values, closers) in which facts are planted: one message (two for ``multi``, in sessions far
apart) is the evidence a question asks about, while near-miss distractors on the same topic
sit in other sessions (for ``anchored`` facts the distractors have the same shape with other
values, in other months, so only the question's date tells them apart). Questions paraphrase
the evidence. Categories: ``fact``, ``detail``, ``date`` ("when did ..."), ``anchored`` (the
question names a month), ``multi`` (inference across two sessions).

Generation is deterministic (``random.Random`` seeded per dialogue), so the set is stored as
its sources; ``digest()`` names the generated text. Used by ``bench/recall_quality.py`` (the
whole set) and ``tests/test_recall_long_dialogue.py`` (one small dialogue).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("data") / "recall"
LANGUAGES = ("en", "zh")
SESSIONS = 32
FACTS = 28
MULTI_GAP = 4  # sessions at least between the two parts of a multi fact
MONTHS_EN = ("January", "February", "March", "April", "May", "June", "July", "August",
             "September", "October", "November", "December")


@dataclass(frozen=True)
class Message:
    role: str  # "user" (the first person of the pair) or "assistant" (the second)
    text: str
    at: datetime


@dataclass(frozen=True)
class Session:
    session_id: str
    messages: tuple[Message, ...]


@dataclass(frozen=True)
class Question:
    text: str
    category: str
    fact: str
    evidence: tuple[tuple[int, int], ...]  # (session index, message index) pairs


@dataclass(frozen=True)
class Dialogue:
    name: str
    lang: str
    people: tuple[str, str]
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    def messages(self) -> list[tuple[str, Message]]:
        return [(s.session_id, m) for s in self.sessions for m in s.messages]

    def evidence_messages(self, question: Question) -> list[Message]:
        return [self.sessions[s].messages[m] for s, m in question.evidence]


def sources(lang: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"{lang}.json").read_text(encoding="utf-8"))
    return data


def _fill(text: str, values: dict[str, Any]) -> str:
    return text.format(**values)


def _pick_values(slots: dict[str, list[Any]], rng: random.Random) -> dict[str, Any]:
    """One value per slot, plus ``NAME_alt`` and ``NAME_alt2``: other values of that slot."""
    values: dict[str, Any] = {}
    for name, options in slots.items():
        order = rng.sample(range(len(options)), len(options))
        values[name] = options[order[0]]
        values[name + "_alt"] = options[order[1 % len(options)]]
        values[name + "_alt2"] = options[order[2 % len(options)]]
    return values


def _lines(exchange: list[list[Any]], values: dict[str, Any], owner: str,
           rng: random.Random) -> list[tuple[str, str, bool]]:
    """(role, text, is evidence) for each line; ``X`` is the fact's owner (a role). A line
    written as a list of texts says the same thing in other words: one is picked."""
    other = "assistant" if owner == "user" else "user"
    out = []
    for speaker, text in exchange:
        evidence = speaker.startswith("*")
        role = owner if speaker.lstrip("*") == "X" else other
        said = rng.choice(text) if isinstance(text, list) else text
        out.append((role, _fill(said, values), evidence))
    return out


class _Deck:
    """Draws exchanges without putting them back until all were used (people rarely say the
    same thing twice in a month), reshuffled when it runs out."""

    def __init__(self, items: list[Any], rng: random.Random) -> None:
        self.items, self.rng, self.left = items, rng, []

    def draw(self) -> Any:
        if not self.left:
            self.left = self.rng.sample(self.items, len(self.items))
        return self.left.pop()


def _when(lang: str, at: datetime) -> str:
    if lang == "zh":
        return f"{at.year}年{at.month}月"
    return f"in {MONTHS_EN[at.month - 1]} {at.year}"


def generate(lang: str, index: int, *, sessions: int = SESSIONS, facts: int = FACTS
             ) -> Dialogue:
    """Dialogue ``index`` (0-based) of ``lang``; the same arguments give the same text."""
    src = sources(lang)
    rng = random.Random(f"pawwake-recall-{lang}-{index}")
    first, second = src["people"][index % len(src["people"])]
    names = {"user": first, "assistant": second}
    start = datetime(2024, 1, 2, tzinfo=UTC) + timedelta(days=11 * index)
    days, dates = 0, []
    for _ in range(sessions):
        dates.append(start + timedelta(days=days, hours=rng.randint(8, 21),
                                       minutes=rng.randint(0, 59)))
        days += rng.randint(2, 7)
    placed: list[list[tuple[list[tuple[str, str, bool]], str | None]]] = [
        [] for _ in range(sessions)]
    chosen = rng.sample(src["facts"], min(facts, len(src["facts"])))
    plans = []
    for number, fact in enumerate(chosen):
        owner = rng.choice(("user", "assistant"))
        values = {**_one_each(src["slots"], rng), **_pick_values(fact.get("slots", {}), rng)}
        values.update(X=names[owner], Y=names["assistant" if owner == "user" else "user"])
        key = f"{fact['id']}#{number}"
        if fact["cat"] == "multi":
            a = rng.randrange(0, sessions - MULTI_GAP - 1)
            b = rng.randrange(a + MULTI_GAP, sessions)
            homes = [a, b]
            for home, part in zip(homes, fact["parts"], strict=True):
                placed[home].append((_lines(part, values, owner, rng), key))
        else:
            homes = [rng.randrange(sessions)]
            placed[homes[0]].append((_lines(fact["say"], values, owner, rng), key))
        for near in fact.get("near", []):
            away = [s for s in range(sessions) if s not in homes and (
                fact["cat"] != "anchored" or dates[s].month != dates[homes[0]].month)]
            placed[rng.choice(away)].append((_lines(near, values, owner, rng), None))
        plans.append((fact, values, key, homes))
    built, evidence_at = [], {}
    fillers, openers, closers = (_Deck(src[k], rng) for k in ("fillers", "openers", "closers"))
    for number in range(sessions):
        owner = rng.choice(("user", "assistant"))
        values = {**_one_each(src["slots"], rng),
                  "X": names[owner], "Y": names["assistant" if owner == "user" else "user"]}
        middle: list[tuple[list[tuple[str, str, bool]], str | None]] = [
            (_lines(fillers.draw(), _refresh(values, src, rng), owner, rng), None)
            for _ in range(rng.randint(4, 7))]
        for item in placed[number]:
            middle.insert(rng.randint(0, len(middle)), item)
        parts = [(_lines(openers.draw(), values, owner, rng), None), *middle,
                 (_lines(closers.draw(), values, owner, rng), None)]
        at = dates[number]
        messages = []
        for lines, key in parts:
            for role, text, is_evidence in lines:
                at += timedelta(minutes=rng.randint(1, 4), seconds=rng.randint(0, 59))
                if is_evidence and key is not None:
                    evidence_at.setdefault(key, []).append((number, len(messages)))
                messages.append(Message(role, text, at))
        built.append(Session(f"{lang}{index:02d}-s{number:02d}", tuple(messages)))
    questions = []
    for fact, values, key, _homes in plans:
        evidence = tuple(evidence_at[key])
        when_at = built[evidence[0][0]].messages[evidence[0][1]].at
        text = _fill(rng.choice(fact["ask"]), {**values, "when": _when(lang, when_at)})
        questions.append(Question(text, fact["cat"], fact["id"], evidence))
    return Dialogue(f"{lang}{index:02d}", lang, (first, second), tuple(built), tuple(questions))


def _one_each(slots: dict[str, list[Any]], rng: random.Random) -> dict[str, Any]:
    """One value of each shared slot (a food, a weekday...)."""
    return {k: rng.choice(v) for k, v in slots.items()}


def _refresh(values: dict[str, Any], src: dict[str, Any], rng: random.Random
             ) -> dict[str, Any]:
    """The session's names with fresh slot values for each small-talk exchange."""
    return {**values, **_one_each(src["slots"], rng)}


def load(per_language: int = 6, sessions: int = SESSIONS) -> list[Dialogue]:
    """The whole dev set: ``per_language`` dialogues of each language (``sessions`` other
    than the default make other dialogues, for timing at a size)."""
    return [generate(lang, i, sessions=sessions) for lang in LANGUAGES
            for i in range(per_language)]


def digest(dialogues: list[Dialogue]) -> str:
    """A short name of the generated text and questions (changes when a source does)."""
    payload = [[d.name, [[m.role, m.text, m.at.isoformat()] for _, m in d.messages()],
                [[q.text, q.category, list(map(list, q.evidence))] for q in d.questions]]
               for d in dialogues]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()[:12]
