"""A small fake of the Gemini Developer API, for testing the real google-genai client offline.

    with FakeGemini() as fake:
        fake.respond_with({"facts": [{"content": "User prefers tabs", "category": "preference", ...}]})
        fake.script("gemini-3-flash-preview", [503, 503, "ok"])   # per-model queue, then the default
        client = make_client("test-key", base_url=fake.base_url)
        ...
        assert fake.models("generateContent") == ["gemini-3-flash-preview", ...]

Endpoints (what google-genai 3.x sends with `vertexai=False`):
  POST /v1beta/models/{model}:generateContent     -> candidates[0].content.parts[0].text = JSON string
  POST /v1beta/models/{model}:batchEmbedContents  -> {"embeddings": [{"values": [...]}, ...]}
  POST /v1beta/models/{model}:embedContent        -> {"embedding": {"values": [...]}}

Script items (consumed one per request to that model, any endpoint):
  int            an error with Google's body, e.g. 503 -> {"error": {"code": 503, "status": "UNAVAILABLE", ...}}
  "ok"           the default answer (the responder / fixed payload; embeddings for embed endpoints)
  "malformed"    200 with candidate text that is not JSON
  "empty"        200 with no candidates (a blocked prompt)
  "hang"         sleep `hang_seconds`, then answer "ok" (for client timeouts)
  dict           this facts payload for this one call
  other str      returned verbatim as the candidate text
Embeddings are deterministic per text and NOT unit length (like Gemini's non-default dimensions).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.fakes.scripted import ScriptedServer, fake_embedding

STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
STATUS_MESSAGES = {
    400: "Request contains an invalid argument.",
    404: "models/{model} is not found for API version v1beta.",
    429: "Resource has been exhausted (e.g. check quota).",
    500: "An internal error has occurred.",
    503: "The model is overloaded. Please try again later.",
}


@dataclass
class RecordedRequest:
    model: str
    action: str  # generateContent | batchEmbedContents | embedContent | ...
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    answered: str = ""  # what the fake did: "ok", "503", "malformed", ...

    @property
    def prompt(self) -> str:
        """All user-turn text of a generateContent request."""
        parts = [p.get("text", "") for c in self.body.get("contents", []) for p in c.get("parts", [])]
        return "\n".join(parts)

    @property
    def system_instruction(self) -> str:
        si = self.body.get("systemInstruction") or {}
        return "\n".join(p.get("text", "") for p in si.get("parts", []))


def _approx_tokens(text: str) -> int:
    return max(1, len(text) // 4)


@dataclass
class FakeGemini(ScriptedServer[RecordedRequest]):
    hang_seconds: float = 5.0
    default_dim: int = 3072  # gemini-embedding-001 without outputDimensionality
    # Fixed usage per generateContent call, e.g. (100, 20); None = ~chars/4 of prompt and answer.
    usage: tuple[int, int] | None = None
    name = "fake Gemini"

    def __post_init__(self) -> None:
        ScriptedServer.__init__(self)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    def routes(self) -> list[Route]:
        return [Route("/{version}/models/{target}", self._handle, methods=["POST"])]

    def reset(self) -> None:
        super().reset()
        self.usage = None

    def calls(self, action: str | None = None) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if action is None or r.action == action]

    def models(self, action: str | None = None) -> list[str]:
        return [r.model for r in self.calls(action)]

    # --- HTTP ---------------------------------------------------------------------------

    @staticmethod
    def _error(code: int, model: str) -> JSONResponse:
        message = STATUS_MESSAGES.get(code, "Error.").format(model=model)
        body = {"error": {"code": code, "message": message, "status": STATUS_NAMES.get(code, "UNKNOWN")}}
        return JSONResponse(body, status_code=code)

    async def _handle(self, request: Request) -> JSONResponse:
        target = request.path_params["target"]
        model, _, action = target.partition(":")
        try:
            body = await request.json()
        except json.JSONDecodeError:
            body = {}
        item = self._next(model)
        record = RecordedRequest(
            model=model,
            action=action,
            path=request.url.path,
            body=body,
            headers={k.lower(): v for k, v in request.headers.items()},
            answered=str(item) if not isinstance(item, dict) else "payload",
        )
        self._keep(record)

        if isinstance(item, int):
            return self._error(item, model)
        if item == "hang":
            await asyncio.sleep(self.hang_seconds)
            item = "ok"

        if action == "batchEmbedContents":
            embeddings = []
            for req in body.get("requests", []):
                text = " ".join(p.get("text", "") for p in req.get("content", {}).get("parts", []))
                dim = int(req.get("outputDimensionality") or self.default_dim)
                embeddings.append({"values": fake_embedding(text, dim)})
            return JSONResponse({"embeddings": embeddings})
        if action == "embedContent":
            text = " ".join(p.get("text", "") for p in body.get("content", {}).get("parts", []))
            dim = int(body.get("outputDimensionality") or self.default_dim)
            return JSONResponse({"embedding": {"values": fake_embedding(text, dim)}})
        if action != "generateContent":
            return self._error(404, model)

        if item == "empty":
            return JSONResponse({"promptFeedback": {"blockReason": "OTHER"}, "modelVersion": model})
        if item == "malformed":
            text = '{"facts": [{"content": "User prefers tabs", "category": '  # cut off: not JSON
        elif isinstance(item, dict):
            text = json.dumps(item)
        elif item == "ok":
            text = json.dumps(self._responder(body, model))
        else:
            text = item
        if self.usage is not None:
            prompt_tokens, output_tokens = self.usage
        else:
            prompt_tokens = _approx_tokens(record.system_instruction + record.prompt)
            output_tokens = _approx_tokens(text)
        return JSONResponse(
            {
                "candidates": [
                    {"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": "STOP", "index": 0}
                ],
                "usageMetadata": {
                    "promptTokenCount": prompt_tokens,
                    "candidatesTokenCount": output_tokens,
                    "totalTokenCount": prompt_tokens + output_tokens,
                },
                "modelVersion": model,
                "responseId": hashlib.md5(f"{model}{time.time_ns()}".encode()).hexdigest()[:16],
            }
        )
