"""Gemini backends (google-genai): the client with our own retries, the LLM extractor, the embedder and
the extraction prompt."""
