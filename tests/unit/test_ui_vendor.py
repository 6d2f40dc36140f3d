"""The console's vendored JavaScript and CSS are the files of the npm packages the manifest names, unchanged."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

VENDOR = Path(__file__).resolve().parents[2] / "service" / "ui" / "static" / "vendor"


def test_every_vendored_file_matches_its_recorded_sha256_and_licence() -> None:
    manifest = json.loads((VENDOR / "manifest.json").read_text())
    assert set(manifest) == {"htmx", "cytoscape", "swagger-ui", "redoc"}
    on_disk = {str(p.relative_to(VENDOR)) for p in VENDOR.rglob("*") if p.is_file()} - {"manifest.json"}
    recorded = {f"{folder}/{name}" for folder, entry in manifest.items() for name in entry["files"]}
    assert on_disk == recorded  # nothing unrecorded, nothing missing
    for folder, entry in manifest.items():
        assert entry["version"].count(".") == 2 and entry["license"] in {"MIT", "0BSD", "Apache-2.0"}
        assert "LICENSE" in entry["files"]  # the licence text ships beside the code
        for name, digest in entry["files"].items():
            assert hashlib.sha256((VENDOR / folder / name).read_bytes()).hexdigest() == digest, f"{folder}/{name}"


def test_the_pages_load_only_vendored_scripts() -> None:
    """No template or page names another origin: the console and /docs work offline."""
    ui = VENDOR.parents[1]
    texts = [p.read_text() for p in (ui / "templates").glob("*.html")] + [(ui / "web.py").read_text()]
    assert texts and not any("http://" in t or "https://" in t or "//cdn" in t for t in texts)
