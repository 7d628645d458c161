"""Index terms for search: jieba loaded once, off the event loop, and terms cut off the loop.

Memory writes, memory search, the keyword re-index and the conversation index all cut their
text into terms through here, so both searches share one tokenizer and one loading rule.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from pawwake.llm.embeddings.engine_memory import trim_heap
from pawwake.text import offload, tokens


async def ensure_tokenizer(data_dir: str) -> None:
    """Load jieba off the event loop if nothing has yet (it takes ~0.6 s); the user words
    live in ``data_dir``."""
    if not tokens.is_loaded():
        await asyncio.get_running_loop().run_in_executor(None, _load_tokenizer, data_dir)


def _load_tokenizer(data_dir: str) -> None:
    tokens.load(data_dir)
    trim_heap()  # loading frees ~10 MB of buffers that glibc would otherwise keep resident


async def terms_for(data_dir: str, texts: Sequence[str], *,
                    budget: int | None = None) -> list[list[str]]:
    """Index terms for each text, cut off the event loop from a bounded part of each text
    (with ``budget``, the texts share that many characters); the tokenizer's user words
    live in ``data_dir``."""
    await ensure_tokenizer(data_dir)
    return await offload.index_terms(texts, budget=budget)
