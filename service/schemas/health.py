"""What /health says about the LLM provider (docs/llm.md): the provider and models the start-up built, and for an
OpenAI-compatible server the structured-output mode each model's answers came back in."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class LLMHealth(BaseModel):
    """The LLM provider the start-up built (docs/llm.md): gemini, openai or offline, its models, and per model the
    structured-output mode its answers came back in (json_schema, json_object or text; none yet before the first)."""

    provider: str
    model: str | None = None
    fallback_model: str | None = None
    server: str | None = None  # the OpenAI-compatible server's URL: admin keys only
    structured_output: dict[str, str] | None = None


async def describe_llm(extractor: Any, admin: bool = False, llm: Any = None) -> LLMHealth:
    """`extractor`: the one the start-up built (service/deps.py build_ai); `admin` adds the server's URL; `llm`: the
    OpenAI-compatible provider (service/ai/openai/provider.py), whose modes the worker processes share in Redis."""
    provider = str(getattr(extractor, "name", "offline"))
    model, fallback = getattr(extractor, "model", None), getattr(extractor, "fallback_model", None)
    if provider == "openai":
        chat = getattr(extractor, "chat", None)
        modes = await llm.modes() if llm is not None else (chat.modes.snapshot() if chat is not None else {})
        return LLMHealth(provider="openai", model=model, fallback_model=fallback,
                         server=getattr(chat, "server", None) if admin else None, structured_output=modes)
    if provider == "gemini":
        return LLMHealth(provider="gemini", model=model, fallback_model=fallback,
                         structured_output={model: "json_schema"} if model else None)
    return LLMHealth(provider=provider)
