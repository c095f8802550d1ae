"""Asking the model servers for the quality check: the OpenAI-compatible API as vLLM and TGI
serve it (``openai``). The comparison itself is the engine's (engine/quality)."""
