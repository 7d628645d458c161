"""A fake OpenAI-compatible embeddings server: a real aiohttp app on loopback.

Vectors are deterministic bags of hashed words and characters (similar texts get similar
vectors), sized by the request's ``dimensions`` or ``natural_dim``. Tests script failures
(``fail_next``), can make it reject ``dimensions`` and read back every request.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from aiohttp import web

from tests.fake_upstream import on_loopback

_WORD = re.compile(r"[A-Za-z]+|\d+|[\u3400-\u9fff]")


def fake_vector(text: str, dim: int) -> list[float]:
    vector = np.zeros(dim, dtype=np.float64)
    for token in _WORD.findall(text.lower()):
        digest = hashlib.sha256(token.encode()).digest()
        slot = int.from_bytes(digest[:4], "little") % dim
        vector[slot] += 1.0 if digest[4] % 2 else -1.0
    vector[0] += 0.05  # never all zeros
    return (vector / np.linalg.norm(vector)).tolist()


@dataclass
class FakeEmbeddings:
    natural_dim: int = 64
    reject_dimensions: int | None = None  # status for requests that send ``dimensions``
    ignore_dimensions: bool = False
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    failures: list[tuple[int, Any]] = field(default_factory=list)  # served before any success
    fail_after: int | None = None  # successes before every later request fails with 500
    successes: int = 0
    delay: float = 0.0  # seconds before every answer (a slow provider)
    server: Any = None

    @property
    def base_url(self) -> str:
        return str(self.server.make_url("/v1"))

    def fail_next(self, status: int, body: Any = None) -> None:
        self.failures.append((status, body or {"error": {"message": f"scripted {status}"}}))

    @property
    def inputs(self) -> list[str]:
        """Every text successfully embedded, in order."""
        return [text for request in self.requests if request.get("_ok")
                for text in request["input"]]

    async def embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        if self.delay:
            await asyncio.sleep(self.delay)
        self.headers.append(dict(request.headers))
        if self.failures:
            status, payload = self.failures.pop(0)
            headers = {"Retry-After": "7"} if status == 429 else {}
            return web.json_response(payload, status=status, headers=headers)
        if self.fail_after is not None and self.successes >= self.fail_after:
            return web.json_response({"error": {"message": "server exploded"}}, status=500)
        if "dimensions" in body and self.reject_dimensions:
            return web.json_response(
                {"error": {"message": "This model does not support 'dimensions'"}},
                status=self.reject_dimensions)
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dim = self.natural_dim
        if "dimensions" in body and not self.ignore_dimensions:
            dim = int(body["dimensions"])
        data = [{"object": "embedding", "index": i, "embedding": fake_vector(t, dim)}
                for i, t in reversed(list(enumerate(texts)))]  # out of order on purpose
        tokens = sum(len(t) for t in texts)
        body["_ok"] = True
        self.successes += 1
        return web.json_response({"object": "list", "data": data, "model": body["model"],
                                  "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    def build_app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/embeddings", self.embeddings)
        return app


async def serve_embeddings(aiohttp_server: Any) -> FakeEmbeddings:
    """A ``FakeEmbeddings`` provider listening on loopback (``aiohttp_server`` is the fixture
    of the same name)."""
    return await on_loopback(FakeEmbeddings(), aiohttp_server)
