"""In-process fakes of external services (real clients, fake servers on 127.0.0.1)."""

from tests.fakes.gemini_server import FakeGemini, RecordedRequest, fake_embedding

__all__ = ["FakeGemini", "RecordedRequest", "fake_embedding"]
