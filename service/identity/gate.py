"""The gate: the signals of one new name against one candidate, and the decision per type family (`Band`).

score = max(exact, variant, 0.45 * fuzzy + 0.55 * semantic), 0 on a conflict, where semantic is the names' cosine
on the model's calibrated scale (core/embedding_models.py: `Calibration.semantic`, 0 at the model's unrelated level);
then per type family: merge at or above the family's auto-merge threshold (when the pair may merge at all), pending
review at or above its pending threshold, else create. When several candidates score within `ambiguity_margin` of
the best (two "Chris"es), the new name merges into none: it gets a pending pair to each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from rapidfuzz import fuzz

from service.core.embedding_models import DEFAULT_CALIBRATION, Calibration
from service.identity.names import GENERIC, ascii_keys, canonical, compatible, forms, name_key, pair_family, type_family
from service.identity.roles import disagree
from service.identity.shapes import conflict as find_conflict
from service.identity.shapes import variant as find_variant
from service.stores.graph import CREATE, MERGE, PENDING, Candidate, Resolution

FUZZY_WEIGHT = 0.45
SEMANTIC_WEIGHT = 0.55
VARIANT_SCORE = 0.9  # a known shape of a name: always the review band (0.85 <= 0.9 < 0.95 by default)
MAX_AMBIGUOUS = 5  # pending pairs written for one ambiguous name at most


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
    conflict: str | None = None
    generic: bool = False  # one side's type is generic: no proof of identity
    person: bool = False
    use_fuzzy: bool = True
    other_role: bool = False  # both sides have roles and none agrees ("the plumber" / "our VP of Sales")

    @property
    def blended(self) -> float:
        return FUZZY_WEIGHT * self.fuzzy + SEMANTIC_WEIGHT * self.semantic if self.use_fuzzy else 0.0

    @property
    def score(self) -> float:
        if self.conflict and self.exact < 1.0:
            return 0.0
        return max(self.exact, VARIANT_SCORE if self.variant else 0.0, self.blended)

    @property
    def mergeable(self) -> bool:
        """Whether this pair may merge at all: never on a generic type, never on a conflict, and a person's name
        only when spelled the same."""
        return (not self.generic and not self.other_role and not (self.conflict and self.exact < 1.0)
                and (self.exact >= 1.0 or not self.person))

    @property
    def match_type(self) -> str:
        if self.exact >= 1.0:
            return "other_role" if self.other_role else "exact"
        if self.conflict:
            return self.conflict
        if self.variant and (self.blended <= VARIANT_SCORE or not self.mergeable):
            return self.variant
        return "fuzzy" if FUZZY_WEIGHT * self.fuzzy >= SEMANTIC_WEIGHT * self.semantic else "semantic"

    @property
    def reason(self) -> str:
        text = f"exact={self.exact:.2f}, fuzzy={self.fuzzy:.2f}, semantic={self.semantic:.2f}"
        text += f", variant={self.variant}" if self.variant else ""
        text += f", conflict={self.conflict}" if self.conflict else ""
        text += ", other role" if self.other_role else ""
        return text + (", generic type" if self.generic else "")


def signals(name: str, entity_type: str, vector: Sequence[float] | None, cand: Candidate,
            use_fuzzy: bool = True, roles: Sequence[str] = (), scale: Calibration = DEFAULT_CALIBRATION) -> Signals:
    """exact: the same key, or the same key once letters are written in ASCII ("Søren" / "Soren", "Jürgen" /
    "Juergen"), or one canonical name in the lexicon. other_role: the memories say the two are different things
    (service/identity/roles.py): such a pair may be proposed, never merged."""
    key = name_key(name)
    names = (cand.name, *cand.aliases)
    canon = canonical(name)
    mine = ascii_keys(name)
    exact = 1.0 if any(not mine.isdisjoint(ascii_keys(n)) for n in names) or (
        canon is not None and any(canonical(n) == canon for n in names)) else 0.0
    fuzzy = fuzz.ratio(key, name_key(cand.name)) / 100.0
    fa, fb = type_family(entity_type), type_family(cand.type)
    person = "person" in (fa, fb)
    place = "place" in (fa, fb)
    generic = GENERIC in (fa, fb)
    variant = conflict = None
    if exact < 1.0:  # evidence of two things outweighs a shape ("GitHub" / "GitHub Actions": two lexicon terms)
        conflict = find_conflict(name, cand.name, person)
        ours, theirs = forms((name,)), forms(names)
        variant = None if conflict else next((v for a in ours for n in theirs
                                              if (v := find_variant(a, n, person, place))
                                              and (use_fuzzy or v != "typo")), None)
    return Signals(exact, fuzzy, scale.semantic(cosine(vector, cand.vector)), variant, conflict, generic, person,
                   use_fuzzy,
                   disagree(roles, cand.roles))


@dataclass(frozen=True)
class Band:
    """A type family's thresholds: merge at or above `auto_merge`, pending review at or above `pending`."""

    auto_merge: float = 0.95
    pending: float = 0.85


@dataclass(frozen=True)
class ResolutionGate:
    auto_merge_threshold: float = 0.95
    pending_match_threshold: float = 0.85
    bands: Mapping[str, Band] = field(default_factory=dict)  # per type family; missing = the two above
    fuzzy_matching: bool = True  # False: only exact keys, the lexicon and known shapes (no string/meaning scores)
    ambiguity_margin: float = 0.05
    scale: Calibration = DEFAULT_CALIBRATION  # the name embedder's: where its cosines of unrelated names sit

    def band(self, family: str) -> Band:
        return self.bands.get(family) or Band(self.auto_merge_threshold, self.pending_match_threshold)

    def decide(self, name: str, entity_type: str, vector: Sequence[float] | None,
               candidates: Sequence[Candidate], roles: Sequence[str] = ()) -> Resolution:
        """The best compatible candidate decides (ties go to the lower id: the same answer on a replay), unless
        others score within the ambiguity margin of it: then a pending pair to each, never a merge. `roles`: what
        the new name's memories say it is."""
        key = name_key(name)
        scored: list[tuple[float, Candidate, Signals, str]] = []
        for cand in sorted(candidates, key=lambda c: c.id):
            if not compatible(entity_type, cand.type) or key in cand.rejected:
                continue
            sig = signals(name, entity_type, vector, cand, self.fuzzy_matching, roles, self.scale)
            band = self.band(pair_family(entity_type, cand.type))
            score = sig.score
            action = (MERGE if score >= band.auto_merge and sig.mergeable
                      else PENDING if score >= band.pending else CREATE)
            scored.append((score, cand, sig, action))
        if not scored:
            return Resolution(CREATE)
        rank = {MERGE: 2, PENDING: 1, CREATE: 0}
        scored.sort(key=lambda s: (-rank[s[3]], -s[0]))  # stable: equal ones keep the id order
        score, cand, sig, action = scored[0]
        rivals = [s for s in scored[1:] if s[3] != CREATE and s[0] >= score - self.ambiguity_margin]
        if action == CREATE or not rivals:
            return Resolution(action, round(score, 4), sig.match_type, sig.reason, cand.id, cand.name)
        note = f"; ambiguous: {len(rivals) + 1} candidates within {self.ambiguity_margin:.2f}"
        also = tuple(Resolution(PENDING, round(s, 4), g.match_type, g.reason + note, c.id, c.name)
                     for s, c, g, _ in rivals[: MAX_AMBIGUOUS - 1])
        return Resolution(PENDING, round(score, 4), sig.match_type, sig.reason + note, cand.id, cand.name, also)


