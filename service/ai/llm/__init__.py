"""What every LLM provider shares (Gemini: service/ai/gemini/, OpenAI-compatible servers: service/ai/openai/): the
extraction prompt and response schema, the validation of what comes back, the summary prompts."""
