"""The extraction prompt, shared by the LLM providers: it lives in service/ai/llm/prompts.py."""

from service.ai.llm.prompts import (
    CATEGORY_EXAMPLES,
    PROMPT_VERSION,
    RESPONSE_SCHEMA,
    SYSTEM_INSTRUCTION,
    TRUNCATED,
    ExtractionResponse,
    SchemaEntity,
    SchemaFact,
    SchemaRelation,
    render_conversation,
    render_message,
)

__all__ = ["CATEGORY_EXAMPLES", "PROMPT_VERSION", "RESPONSE_SCHEMA", "SYSTEM_INSTRUCTION", "TRUNCATED",
           "ExtractionResponse", "SchemaEntity", "SchemaFact", "SchemaRelation", "render_conversation",
           "render_message"]
