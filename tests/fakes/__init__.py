"""In-process fakes of external services (real clients, fake servers on 127.0.0.1)."""
