"""The offline extractor (no network, no model): text segmentation, category rules, entity mentions,
relations, and the extractor over them. See docs/offline-extractor.md."""

from service.ai.offline.extractor import OfflineExtractor, RuleLinkFinder, graph_links
from service.ai.offline.text import PROJECT_ENTITY, USER_ENTITY

__all__ = ["PROJECT_ENTITY", "USER_ENTITY", "OfflineExtractor", "RuleLinkFinder", "graph_links"]
