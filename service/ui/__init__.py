"""The web console (docs/console.md): server-rendered pages over the same service objects as the API."""
