"""OpenAI-compatible servers (the `openai` SDK): the chat client with our retries and structured-output modes, the
extractor, the summarizers and the embedder (docs/llm.md)."""
