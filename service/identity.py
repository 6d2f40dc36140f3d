"""The entity resolution gate: is a newly written entity one the user's graph already holds?

Pure scoring, no I/O. The graph store fetches the candidates (same user, same group, by index) and applies the
decision. For one new surface form and one candidate:

- `exact` is 1.0 when the two names, or the new name and one of the candidate's aliases, have the same *key*
  (NFKC, case-folded, separators - _ . ' / and whitespace removed: "Type Script" = "TypeScript",
  "Node.js" = "NodeJS"; "+" and "#" stay, so "C" is not "C++"), or when the technology lexicon of the offline
  extractor names both as spellings of one canonical name ("k8s" and "Kubernetes").
- `fuzzy` is RapidFuzz's normalised Indel similarity (`fuzz.ratio`) of the keys;
- `semantic` is the cosine of the two names' embeddings (the service's embedder);
- `variant` is `VARIANT_SCORE` for a *known shape* of one name as another that string and embedding similarity
  miss: an acronym of the other's words ("NYC" / "New York City"), or, for people, a short first name that
  begins the other ("Mel" / "Melanie") or a name that is the other's first name ("Melanie" /
  "Melanie Smith"). It only ever proposes (it sits in the review band), it never merges on its own.

score = max(exact, variant, 0.45 * fuzzy + 0.55 * semantic): merge at or above the auto-merge threshold, pending
review at or above the pending threshold, else create. Types of different families never match (a person is
not a tool); "thing" (type unknown) matches any. A pair a reviewer rejected is never proposed again.
"""

from __future__ import annotations

import re
import unicodedata
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from nameparser.config import CONSTANTS
from nicknames import NickNamer
from rapidfuzz import fuzz
from rapidfuzz.distance import OSA

from service.ai.embeddings import Embedder
from service.ai.offline.lexicon import lookup
from service.stores.graph import CREATE, MERGE, PENDING, Candidate, Resolution

FUZZY_WEIGHT = 0.45
SEMANTIC_WEIGHT = 0.55
VARIANT_SCORE = 0.9  # a known shape of a name: always the review band (0.85 <= 0.9 < 0.95 by default)

_FAMILIES: dict[str, str] = {
    "person": "person", "user": "person", "people": "person",
    "organisation": "organization", "organization": "organization", "company": "organization", "team": "organization",
    "place": "place", "location": "place", "city": "place", "country": "place",
}
_TITLES = frozenset(CONSTANTS.titles)  # nameparser's list: Dr, Ms, Sra, Herr, Prof, ...
_STOP_WORDS = frozenset({"of", "the", "and", "for", "de", "du", "der", "la", "le", "von", "van"})
_NICKNAMES = NickNamer()
_SEPARATORS = re.compile(r"[\s\-_.'\u2019/]+")
_WORD = re.compile(r"[^\W_]+")


def type_family(entity_type: str) -> str:
    """person, organization, place, thing (unknown), or technology (every other type: tool, library, database,
    service, language, project, concept...), which extractors name inconsistently for one thing."""
    t = entity_type.strip().casefold()
    if not t or t == "thing":
        return "thing"
    return _FAMILIES.get(t, "technology")


def compatible(a: str, b: str) -> bool:
    fa, fb = type_family(a), type_family(b)
    return fa == fb or "thing" in (fa, fb)


@lru_cache(maxsize=65536)
def _fold(name: str) -> str:
    """Compatibility forms unified, accents dropped ("München" -> "munchen"), case-folded."""
    decomposed = unicodedata.normalize("NFKD", name)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


@lru_cache(maxsize=65536)
def name_key(name: str) -> str:
    """The key two spellings of one name share: accents dropped, case-folded, separators and whitespace removed."""
    return _SEPARATORS.sub("", _fold(name))


def keys_of(names: Sequence[str]) -> list[str]:
    """Every key an entity is found by: each name's and alias's key, and the key of the lexicon's canonical
    name for it (so "k8s" and "Kubernetes" share one)."""
    keys: set[str] = set()
    for n in names:
        if key := name_key(n):
            keys.add(key)
        term = lookup(n.strip())
        if term is not None:
            keys.add(name_key(term.canonical))
    return sorted(keys)


@lru_cache(maxsize=65536)
def _canonical(name: str) -> str | None:
    term = lookup(name.strip())
    return term.canonical.casefold() if term is not None else None


@lru_cache(maxsize=65536)
def _words(name: str, person: bool = False) -> list[str]:
    words = _WORD.findall(_fold(name))
    if person:  # "Dr. Rao" is Rao
        words = [w for w in words if w not in _TITLES] or words
    return words


def _initials(words: list[str]) -> str:
    return "".join(w[0] for w in words if w not in _STOP_WORDS)


def _numeronym(short: str, long: str) -> bool:
    """"i18n" / "internationalization", "k8s" / "kubernetes": first letter, the count of the letters between,
    last letter."""
    m = re.fullmatch(r"([a-z])(\d{1,2})([a-z])", short)
    return m is not None and len(long) == int(m[2]) + 2 and long[0] == m[1] and long[-1] == m[3]


def _nicknames(a: str, b: str) -> bool:
    """One first name is a listed nickname of the other, or both are of one name (the `nicknames` dataset)."""
    ca, cb = _NICKNAMES.canonicals_of(a) | {a}, _NICKNAMES.canonicals_of(b) | {b}
    return a != b and bool(ca & cb)


@lru_cache(maxsize=65536)
def _variant(a: str, b: str, person: bool) -> str | None:
    """The known shape relating two names, if any (checked both ways round):
    - "typo": keys one edit apart (a transposition counts one) when both have at least 5 characters, or two
      edits apart when both have at least 7, with the same digits ("Kuberentes" / "Kubernetes");
    - "acronym": one word that is the initials of the other's words, stop words left out, or of all but the
      first ("NYC" / "New York City", "MIT" / "Massachusetts Institute of Technology", "EKS" / "Amazon
      Elastic Kubernetes Service"), or its numeronym ("i18n" / "internationalization");
    - "contained_words": the other name is this one's words with one or two more before or after ("Stripe" /
      "Stripe, Inc.", "Excel" / "Microsoft Excel", "Melanie" / "Melanie Smith");
    - people only (titles such as Dr. or Ms. left out): "part_name", one word equal to a word of the other
      ("Wei" / "Zhang Wei", "Dr. Rao" / "Priya Rao"); "nickname", first names listed as one name's forms by the
      `nicknames` dataset ("Bob" / "Robert"); "short_name", one word of at least 3 letters sharing its first 3
      letters with a longer single-word name ("Mel" / "Melanie")."""
    ka, kb = name_key(a), name_key(b)
    edits = OSA.distance(ka, kb)
    shortest = min(len(ka), len(kb))
    digits_differ = sorted(c for c in ka if c.isdigit()) != sorted(c for c in kb if c.isdigit())
    if not digits_differ and ((edits <= 1 and shortest >= 5) or (edits <= 2 and shortest >= 7)):
        return "typo"  # (a different number is another version: "Python 2" / "Python 3")
    for short, long in ((a, b), (b, a)):
        if _numeronym(name_key(short), name_key(long)):
            return "acronym"
        sw, lw = _words(short, person), _words(long, person)
        if len(sw) == 1 and len(lw) >= 2 and len(sw[0]) >= 2 and sw[0] in (_initials(lw), _initials(lw[1:])):
            return "acronym"
        extra = len(lw) - len(sw)
        if sw and 1 <= extra <= 2 and (lw[: len(sw)] == sw or lw[extra:] == sw):
            return "contained_words"
        if person and len(sw) == 1:
            if len(lw) >= 2 and sw[0] in lw:
                return "part_name"
            if lw and _nicknames(sw[0], lw[0]):
                return "nickname"
            if len(lw) == 1 and len(sw[0]) >= 3 and len(lw[0]) > len(sw[0]) and lw[0][:3] == sw[0][:3]:
                return "short_name"
    return None


def cosine(u: Sequence[float] | None, v: Sequence[float] | None) -> float:
    if u is None or v is None or len(u) == 0 or len(u) != len(v):
        return 0.0
    a, b = np.asarray(u, dtype=np.float64), np.asarray(v, dtype=np.float64)
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    return max(0.0, float(a @ b) / norms) if norms else 0.0


@dataclass(frozen=True)
class Signals:
    exact: float
    fuzzy: float
    semantic: float
    variant: str | None

    @property
    def score(self) -> float:
        return max(self.exact, VARIANT_SCORE if self.variant else 0.0,
                   FUZZY_WEIGHT * self.fuzzy + SEMANTIC_WEIGHT * self.semantic)

    @property
    def match_type(self) -> str:
        if self.exact >= 1.0:
            return "exact"
        blended = FUZZY_WEIGHT * self.fuzzy + SEMANTIC_WEIGHT * self.semantic
        if self.variant and blended <= VARIANT_SCORE:
            return self.variant
        return "fuzzy" if FUZZY_WEIGHT * self.fuzzy >= SEMANTIC_WEIGHT * self.semantic else "semantic"

    @property
    def reason(self) -> str:
        text = f"exact={self.exact:.2f}, fuzzy={self.fuzzy:.2f}, semantic={self.semantic:.2f}"
        return text + (f", variant={self.variant}" if self.variant else "")


def signals(name: str, entity_type: str, vector: Sequence[float] | None, cand: Candidate) -> Signals:
    key = name_key(name)
    names = (cand.name, *cand.aliases)
    canon = _canonical(name)
    exact = 1.0 if any(name_key(n) == key for n in names) or (
        canon is not None and any(_canonical(n) == canon for n in names)) else 0.0
    fuzzy = fuzz.ratio(key, name_key(cand.name)) / 100.0
    person = type_family(entity_type) == "person" or type_family(cand.type) == "person"
    variant = next((v for n in names if (v := _variant(name, n, person))), None)
    return Signals(exact, fuzzy, cosine(vector, cand.vector), variant)


@dataclass(frozen=True)
class ResolutionGate:
    auto_merge_threshold: float = 0.95
    pending_match_threshold: float = 0.85

    def decide(self, name: str, entity_type: str, vector: Sequence[float] | None,
               candidates: Sequence[Candidate]) -> Resolution:
        """The best compatible candidate decides; ties go to the lower id (the same answer on a replay)."""
        key = name_key(name)
        best: tuple[float, Candidate, Signals] | None = None
        for cand in sorted(candidates, key=lambda c: c.id):
            if not compatible(entity_type, cand.type) or key in cand.rejected:
                continue
            sig = signals(name, entity_type, vector, cand)
            if best is None or sig.score > best[0]:
                best = (sig.score, cand, sig)
        if best is None:
            return Resolution(CREATE)
        score, cand, sig = best
        action = (MERGE if score >= self.auto_merge_threshold
                  else PENDING if score >= self.pending_match_threshold else CREATE)
        return Resolution(action, round(score, 4), sig.match_type, sig.reason, cand.id, cand.name)



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

    def type_family(self, entity_type: str) -> str:
        return type_family(entity_type)

    def decide(self, name: str, entity_type: str, vector: Sequence[float] | None,
               candidates: Sequence[Candidate]) -> Resolution:
        return Resolution(CREATE)

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

    def decide(self, name: str, entity_type: str, vector: Sequence[float] | None,
               candidates: Sequence[Candidate]) -> Resolution:
        return self.gate.decide(name, entity_type, vector, candidates)

    async def vectors(self, names: Sequence[str]) -> dict[str, list[float]]:
        """name key -> the embedding of the name (one embed call for the names not cached)."""
        wanted = {name_key(n): n.strip() for n in names if name_key(n)}
        missing = [k for k in wanted if k not in self._cache]
        out: dict[str, list[float]] = {}
        if missing:
            for key, vec in zip(missing, await self.embedder.embed([wanted[k] for k in missing]), strict=True):
                self._cache[key] = array("f", vec)  # float32 as the model gives them
        for key in wanted:
            self._cache.move_to_end(key)
            out[key] = self._cache[key].tolist()
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return out
