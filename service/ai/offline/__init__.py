"""The offline extractor (no network, no model): text segmentation, category rules, entity mentions,
relations, and the extractor over them. See docs/offline-extractor.md."""
