"""A small fake of an OpenAI-compatible server, for testing the real `openai` client offline.

    with FakeOpenAI() as fake:
        fake.respond_with({"facts": [...]})
        fake.script("small-model", [503, 503, "ok"])      # per-model queue, then the default
        fake.reject_formats = {"json_schema"}             # a JSON-mode-only server: 400 for json_schema
        client = make_client(fake.base_url, None)
        ...
        assert fake.models("chat") == ["small-model", ...]

Endpoints (what the `openai` SDK sends to `base_url` = http://host:port/v1):
  POST /v1/chat/completions  -> choices[0].message.content = the answer text, usage = token counts
  POST /v1/embeddings        -> data[i].embedding, deterministic per text, `embedding_dim` long (or `dimensions`)

Script items (consumed one per request to that model, either endpoint):
  int            an error with OpenAI's body; a 429 carries `Retry-After: <retry_after>` when that is set
  "ok"           the default answer (the responder / fixed payload; embeddings for /embeddings)
  "malformed"    200 with content that is not JSON
  "fenced"       200 with the default payload inside prose and a ```json fenced block
  "hang"         sleep `hang_seconds`, then answer "ok"
  dict           this payload (as JSON) for this one call
  other str      returned verbatim as the content
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.fakes.scripted import ScriptedServer, ScriptItem, fake_embedding

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
               429: "rate_limit_exceeded", 500: "server_error", 502: "server_error", 503: "server_error"}


@dataclass
class RecordedRequest:
    model: str
    endpoint: str  # chat | embeddings
    body: dict[str, Any]
    headers: dict[str, str]
    at: float
    answered: str = ""

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def system(self) -> str:
        return "\n".join(str(m.get("content", "")) for m in self.messages if m.get("role") == "system")

    @property
    def prompt(self) -> str:
        """The first user turn (the conversation); a repair request adds more turns after it."""
        users = [str(m.get("content", "")) for m in self.messages if m.get("role") == "user"]
        return users[0] if users else ""

    @property
    def format(self) -> str:
        """The response_format type asked for: json_schema, json_object or text (none)."""
        fmt = self.body.get("response_format") or {}
        return str(fmt.get("type", "text"))


@dataclass
class FakeOpenAI(ScriptedServer[RecordedRequest]):
    hang_seconds: float = 5.0
    embedding_dim: int = 64
    retry_after: str | None = None  # the Retry-After header of a scripted 429
    usage: tuple[int, int] | None = None  # fixed (prompt, completion) tokens per chat call; None = ~chars/4
    reject_formats: set[str] = field(default_factory=set)  # response_format types answered with reject_status
    reject_status: int = 400  # llama-cpp-python's server answers 500
    refuse_max_tokens: bool = False  # as OpenAI's reasoning models: 400, use max_completion_tokens
    refuse_temperature: bool = False  # as OpenAI's reasoning models: 400 for a temperature other than 1
    drop_system: bool = False  # as llama-cpp-python's Gemma chat format: the system message is not in the prompt
    name = "fake OpenAI"

    def __post_init__(self) -> None:
        ScriptedServer.__init__(self)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def routes(self) -> list[Route]:
        return [Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/embeddings", self._embeddings, methods=["POST"])]

    def reset(self) -> None:
        super().reset()
        self.usage = None
        self.retry_after = None
        self.reject_formats = set()
        self.reject_status = 400
        self.refuse_max_tokens = False
        self.refuse_temperature = False
        self.drop_system = False

    def calls(self, endpoint: str | None = None) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if endpoint is None or r.endpoint == endpoint]

    def models(self, endpoint: str | None = None) -> list[str]:
        return [r.model for r in self.calls(endpoint)]

    # --- HTTP ---------------------------------------------------------------------------

    def _error(self, code: int, message: str) -> JSONResponse:
        headers = {"retry-after": self.retry_after} if code == 429 and self.retry_after is not None else None
        body = {"error": {"message": message, "type": ERROR_TYPES.get(code, "error"), "param": None,
                          "code": None}}
        return JSONResponse(body, status_code=code, headers=headers)

    async def _record(self, request: Request, endpoint: str) -> tuple[RecordedRequest, ScriptItem]:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            body = {}
        model = str(body.get("model", ""))
        item = self._next(model)
        record = RecordedRequest(model=model, endpoint=endpoint, body=body, at=time.monotonic(),
                                 headers={k.lower(): v for k, v in request.headers.items()},
                                 answered=str(item) if not isinstance(item, dict) else "payload")
        self._keep(record)
        return record, item

    async def _chat(self, request: Request) -> JSONResponse:
        record, item = await self._record(request, "chat")
        model = record.model
        if record.format in self.reject_formats:
            record.answered = f"{self.reject_status} {record.format}"
            self._put_back(model, item)
            return self._error(self.reject_status,
                               f"response_format type '{record.format}' is not supported by this server")
        if self.refuse_max_tokens and "max_tokens" in record.body:
            record.answered = "400 max_tokens"
            self._put_back(model, item)
            return self._error(400, "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                    "Use 'max_completion_tokens' instead.")
        if self.refuse_temperature and record.body.get("temperature") not in (None, 1):
            record.answered = "400 temperature"
            self._put_back(model, item)
            return self._error(400, "Unsupported value: 'temperature' does not support 0.0 with this model. "
                                    "Only the default (1) value is supported.")
        if isinstance(item, int):
            return self._error(item, f"scripted {item} for {model}")
        if item == "hang":
            await asyncio.sleep(self.hang_seconds)
            item = "ok"
        if item == "malformed":
            text = '{"facts": [{"content": "User prefers tabs", "category": '  # cut off: not JSON
        elif item == "fenced":
            text = "Here are the facts:\n```json\n" + json.dumps(self._responder(record.body, model)) + "\n```\nDone."
        elif isinstance(item, dict):
            text = json.dumps(item)
        elif item == "ok":
            text = json.dumps(self._responder(record.body, model))
        else:
            text = str(item)
        if self.usage is not None:
            prompt_tokens, output_tokens = self.usage
        else:
            prompt_tokens = max(1, sum(len(str(m.get("content", ""))) for m in record.messages
                                       if not (self.drop_system and m.get("role") == "system")) // 4)
            output_tokens = max(1, len(text) // 4)
        return JSONResponse({
            "id": "chatcmpl-" + hashlib.md5(f"{model}{time.time_ns()}".encode()).hexdigest()[:16],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": output_tokens,
                      "total_tokens": prompt_tokens + output_tokens},
        })

    async def _embeddings(self, request: Request) -> JSONResponse:
        record, item = await self._record(request, "embeddings")
        if isinstance(item, int):
            return self._error(item, f"scripted {item} for {record.model}")
        raw = record.body.get("input")
        texts = [raw] if isinstance(raw, str) else list(raw or [])
        dim = int(record.body.get("dimensions") or self.embedding_dim)
        data = [{"object": "embedding", "index": i, "embedding": fake_embedding(str(t), dim)}
                for i, t in enumerate(texts)]
        tokens = sum(len(str(t)) for t in texts) // 4 + 1
        return JSONResponse({"object": "list", "data": data, "model": record.model,
                             "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})
