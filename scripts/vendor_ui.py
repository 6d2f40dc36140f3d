"""Vendor the web console's JavaScript and CSS from their npm packages (maintainers only; no Node at install).

Runs `npm pack NAME@VERSION` for each package below, copies only the listed files into
service/ui/static/vendor/<dir>/, and writes service/ui/static/vendor/manifest.json with each package's version,
licence, tarball sha256 and the sha256 of every copied file. tests/unit/test_ui_vendor.py checks the files against
the manifest. To upgrade a library: change its version here, run `python scripts/vendor_ui.py`, commit.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENDOR = ROOT / "service" / "ui" / "static" / "vendor"

# dir -> (npm package, version, files inside the package's tarball)
PACKAGES: dict[str, tuple[str, str, list[str]]] = {
    "htmx": ("htmx.org", "2.0.4", ["dist/htmx.min.js", "LICENSE"]),
    "cytoscape": ("cytoscape", "3.30.4", ["dist/cytoscape.min.js", "LICENSE"]),
    "swagger-ui": ("swagger-ui-dist", "5.18.2", ["swagger-ui-bundle.js", "swagger-ui.css", "LICENSE", "NOTICE"]),
    "redoc": ("redoc", "2.4.0", ["bundles/redoc.standalone.js", "bundles/redoc.standalone.js.LICENSE.txt",
                                 "LICENSE"]),
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> int:
    manifest: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for folder, (name, version, files) in PACKAGES.items():
            out = subprocess.run(["npm", "pack", f"{name}@{version}", "--pack-destination", tmp],
                                 capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
            tgz = Path(tmp) / out
            unpacked = Path(tmp) / folder
            with tarfile.open(tgz) as tar:
                tar.extractall(unpacked, filter="data")
            package = json.loads((unpacked / "package" / "package.json").read_text())
            target = VENDOR / folder
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            copied = {}
            for rel in files:
                dest = target / Path(rel).name
                shutil.copyfile(unpacked / "package" / rel, dest)
                copied[Path(rel).name] = sha256(dest)
            manifest[folder] = {"package": name, "version": package["version"], "license": package["license"],
                                "tarball_sha256": sha256(tgz), "files": copied, "from": files}
            print(f"{name}@{version}: {len(files)} files", file=sys.stderr)
    (VENDOR / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
