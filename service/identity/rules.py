"""What the graph store is handed (`NameRules` of `service/stores/graph.py`): the name rules alone (one entity per
spelling), or with the resolution gate and an LRU of the names' embeddings (`NameVectors`)."""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Sequence

from service.ai.embeddings import Embedder
from service.identity.gate import ResolutionGate
from service.identity.names import compatible, keys_of, name_key, same_node, type_family
from service.identity.roles import disagree, role_key, role_of, role_phrase
from service.stores.graph import CREATE, Candidate, Resolution


class NameRules:
    """The name rules alone (no gate): one entity per spelling; what `service/stores/graph.py` asks for."""

    resolves = False
    model = ""
    dim = 0

    def keys_of(self, names: Sequence[str]) -> list[str]:
        return keys_of(names)

    def name_key(self, name: str) -> str:
        return name_key(name)

    def compatible(self, a: str, b: str) -> bool:
        return compatible(a, b)

    def same_node(self, new_type: str, held_type: str) -> bool:
        return compatible(new_type, held_type)

    def type_family(self, entity_type: str) -> str:
        return type_family(entity_type)

    def decide(self, name: str, entity_type: str, vector: Sequence[float] | None,
               candidates: Sequence[Candidate], roles: Sequence[str] = ()) -> Resolution:
        return Resolution(CREATE)

    def role(self, text: str, name: str, stated: str | None = None) -> str | None:
        return None  # one entity per spelling: no meanings to tell apart

    def other_meaning(self, roles: Sequence[str], held: Sequence[str]) -> str | None:
        return None

    async def vectors(self, names: Sequence[str]) -> dict[str, list[float]]:
        return {}


class NameVectors(NameRules):
    """The name rules with the resolution gate and the embedder of entity names (an LRU of their vectors)."""

    resolves = True

    def __init__(self, embedder: Embedder, gate: ResolutionGate, cache_size: int = 10_000) -> None:
        self.embedder = embedder
        self.gate = gate
        self.model = embedder.name
        self.dim = embedder.dim
        self._cache: OrderedDict[str, array[float]] = OrderedDict()
        self._size = cache_size

    def same_node(self, new_type: str, held_type: str) -> bool:
        return same_node(new_type, held_type)

    def decide(self, name: str, entity_type: str, vector: Sequence[float] | None,
               candidates: Sequence[Candidate], roles: Sequence[str] = ()) -> Resolution:
        return self.gate.decide(name, entity_type, vector, candidates, roles)

    def role(self, text: str, name: str, stated: str | None = None) -> str | None:
        return role_phrase(stated) if stated else role_of(text, name)

    def other_meaning(self, roles: Sequence[str], held: Sequence[str]) -> str | None:
        return role_key(roles[0]) if disagree(roles, held) else None

    async def vectors(self, names: Sequence[str]) -> dict[str, list[float]]:
        """name key -> the embedding of the name (one embed call for the names not cached)."""
        wanted = {name_key(n): n.strip() for n in names if name_key(n)}
        missing = [k for k in wanted if k not in self._cache]
        out: dict[str, list[float]] = {}
        if missing:
            vectors = await self.embedder.embed_symmetric([wanted[k] for k in missing])
            for key, vec in zip(missing, vectors, strict=True):
                self._cache[key] = array("f", vec)  # float32 as the model gives them
        for key in wanted:
            self._cache.move_to_end(key)
            out[key] = self._cache[key].tolist()
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return out
