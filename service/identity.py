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
  miss (an acronym, a brand prefix, a version suffix, a nickname of the given name...; `_variant`). It only ever
  proposes (it sits in the review band), it never merges on its own.
- `conflict` is evidence that the names are two things: people whose parsed parts disagree ("Emma Hart" /
  "Emily Hart": same surname, two given names), two versions of one product ("Python 2" / "Python 3"), two
  different terms of the lexicon ("Java" / "JavaScript"). A conflict keeps the pair apart (create).

score = max(exact, variant, 0.45 * fuzzy + 0.55 * semantic), then per type family (`Band`): merge at or above the
family's auto-merge threshold, pending review at or above its pending threshold, else create. Precision first, a
wrong merge joins two people's facts, so some pairs never merge whatever their score: one side of a generic type
(thing, concept, none: an exact name is not proof then), and people whose names are not spelled the same
(a different spelling of a person's name is at best a proposal). Types of different families never match (a
person is not a tool); a generic type matches any. A pair a reviewer rejected is never proposed again. When
several candidates score within `ambiguity_margin` of the best (two "Chris"es), the new name merges into none:
it gets a pending pair to each.
"""

from __future__ import annotations

import re
import unicodedata
from array import array
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache

import numpy as np
from nameparser import HumanName
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
MAX_AMBIGUOUS = 5  # pending pairs written for one ambiguous name at most

FAMILIES = ("person", "organization", "place", "technology", "thing")
GENERIC = "thing"
GENERIC_TYPES = frozenset({"", "thing", "concept", "none", "unknown", "entity", "other", "misc"})
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
# a version or edition after a product's name: "3", "3.11", "v2", "2019", "Pro", "Community Edition"
_VERSION = re.compile(r"v?\d+(?:\.\d+)*[a-z]?")
_EDITIONS = frozenset({"pro", "plus", "lite", "ce", "ee", "community", "enterprise", "edition", "ultimate",
                       "professional", "premium", "standard", "express", "lts", "beta", "alpha", "preview",
                       "classic", "max", "mini", "home", "server", "desktop", "cloud", "os", "release", "version"})
_GLUED_VERSION = re.compile(r"([a-z]{3,})(\d+(?:\.\d+)*)")
_DIMINUTIVE_ENDINGS = ("y", "ie", "i", "e")


@lru_cache(maxsize=4096)
def type_family(entity_type: str) -> str:
    """person, organization, place, thing (generic: thing, concept, none...), or technology (every other type:
    tool, library, database, service, language, project...), which extractors name inconsistently for one thing."""
    t = entity_type.strip().casefold()
    if t in GENERIC_TYPES:
        return GENERIC
    return _FAMILIES.get(t, "technology")


def compatible(a: str, b: str) -> bool:
    fa, fb = type_family(a), type_family(b)
    return fa == fb or GENERIC in (fa, fb)


def same_node(new_type: str, held_type: str) -> bool:
    """Whether a name the graph already holds (the same spelling) is the same entity for a write of this type:
    only within one family. A generic type on one side only is no proof ("Mercury" the thing and "Mercury" the
    tool): the write gets its own node, and the gate proposes the pair."""
    return type_family(new_type) == type_family(held_type)


def pair_family(a: str, b: str) -> str:
    """The family whose thresholds decide a pair of compatible types: the specific one, if any."""
    fa, fb = type_family(a), type_family(b)
    return fb if fa == GENERIC else fa


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


# --- people: names by parts -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Parts:
    given: str
    middle: tuple[str, ...]
    surname: str
    suffix: str
    surnames: frozenset[str] = frozenset()  # the words of a double surname ("Smith-Jones")


@lru_cache(maxsize=65536)
def _person_parts(name: str) -> _Parts | None:
    """Given name, middle names, surname and suffix of a full name (titles left out), folded; None unless the
    name has both a given name and a surname."""
    h = HumanName(name)
    given, surname = name_key(h.first), name_key(h.last)
    if not given or not surname or not given.isalpha():
        return None
    middle = tuple(k for w in _WORD.findall(_fold(h.middle)) if (k := name_key(w)))
    return _Parts(given, middle, surname, name_key(h.suffix), frozenset(_WORD.findall(_fold(h.last))))


def _distinct_names(a: str, b: str) -> bool:
    """Two given names in their own right, not one's short form: they begin alike but neither begins the other,
    they are about as long, and the shorter does not end as a diminutive does ("Emma" / "Emily", "Maria" /
    "Mario"; but "Danny" / "Daniel", "Dave" / "David"); or one is the other's feminine or masculine form."""
    short, long = sorted((a, b), key=len)
    gendered = long == short + "a" or (len(a) == len(b) and a[:-1] == b[:-1] and {a[-1], b[-1]} == {"a", "o"})
    if len(short) >= 3 and gendered:
        return True  # the feminine or masculine form: "Paul" / "Paula", "Giuliano" / "Giuliana"
    if min(len(a), len(b)) < 4 or a.startswith(b) or b.startswith(a) or a[:2] != b[:2] or abs(len(a) - len(b)) > 2:
        return False
    shorter = [n for n in (a, b) if len(n) == min(len(a), len(b))]
    return not any(n.endswith(_DIMINUTIVE_ENDINGS) for n in shorter)


@lru_cache(maxsize=65536)
def _skeleton(name: str) -> str:
    """A rough transliteration key: spellings of one sound unified, doubled letters and vowels after the first
    letter dropped ("Aleksandr" / "Alexander", "Mohammed" / "Muhammad", "Sergei" / "Sergey")."""
    s = name
    for old, new in (("ph", "f"), ("ks", "x"), ("kh", "h"), ("ck", "k"), ("q", "k"), ("c", "k"), ("w", "v"),
                     ("z", "s"), ("y", "i")):
        s = s.replace(old, new)
    s = s[:1] + s[1:].replace("h", "")
    s = re.sub(r"(.)\1+", r"\1", s)
    return s[:1] + re.sub(r"[aeiou]", "", s[1:])


def _ending(name: str) -> str:
    last = name[-1:].replace("y", "i")
    return last if last in "aeiou" else "consonant"


def _given_relation(a: str, b: str) -> str | None:
    """How two given names (folded) can be one person's: same, an initial, a listed nickname, a short form, a
    transliteration or a one-letter typo; None for two different names."""
    if a == b:
        return "same"
    if min(len(a), len(b)) == 1:
        return "initial" if a[0] == b[0] else None
    distinct = _distinct_names(a, b)
    if _nicknames(a, b) and not distinct:
        return "nickname"
    if min(len(a), len(b)) >= 3 and abs(len(a) - len(b)) >= 2 and (a.startswith(b) or b.startswith(a)):
        return "short_name"  # "Rob" / "Robert"; one letter more is another name ("Paul" / "Paula") or a typo
    sa, sb = _skeleton(a), _skeleton(b)
    if min(len(a), len(b)) >= 4 and len(sa) >= 3 and sa == sb and _ending(a) == _ending(b):
        return "transliteration"
    if min(len(a), len(b)) >= 3 and OSA.distance(a, b) <= 1 and not distinct:
        return "typo"
    return None


def _middles_agree(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    if not a or not b:
        return True
    return len(a) == len(b) and all(x == y or (min(len(x), len(y)) == 1 and x[0] == y[0])
                                    for x, y in zip(a, b, strict=True))


@lru_cache(maxsize=65536)
def _person_pair(a: str, b: str) -> tuple[str | None, str | None]:
    """(variant, conflict) of two full names of people, by parts; (None, None) unless both have a given name
    and a surname."""
    pa, pb = _person_parts(a), _person_parts(b)
    if pa is None or pb is None:
        return None, None
    sur = _given_relation(pa.surname, pb.surname) if min(len(pa.surname), len(pb.surname)) > 1 else None
    if sur not in ("same", "typo", "transliteration") and (pa.surnames < pb.surnames or pb.surnames < pa.surnames):
        sur = "double_surname"  # "Mary Smith" / "Mary Smith-Jones"
    if sur not in ("same", "typo", "transliteration", "double_surname"):
        if pa.given == pb.surname and pa.surname == pb.given:
            return "name_order", None  # "Wei Zhang" / "Zhang Wei"
        wa, wb = set(_words(a, True)), set(_words(b, True))
        if wa < wb or wb < wa:  # one name's words all in the other: "Ana Garcia" / "Ana Garcia Lopez"
            return "contained_words", None
        return None, "other_surname"
    given = _given_relation(pa.given, pb.given)
    if given is None:
        return None, "other_given_name"
    if sur != "same" and given != "same":
        return None, "other_name"
    if not _middles_agree(pa.middle, pb.middle):
        return None, "other_middle_name"
    if pa.suffix and pb.suffix and pa.suffix != pb.suffix:
        return None, "other_suffix"  # Jr. / Sr.
    if given != "same":
        return given, None
    if sur != "same":
        return sur, None
    return ("middle_name" if pa.middle != pb.middle else "suffix" if pa.suffix != pb.suffix else "title"), None


# --- products and organisations: versions, prefixes, short forms -------------------------------------------------

@lru_cache(maxsize=65536)
def _versioned(name: str) -> tuple[str, str]:
    """(the name without a trailing version or edition, that version or edition) - ("Python", "3.11") for
    "Python 3.11", ("Python", "3") for "python3", (name, "") when there is none."""
    words = re.findall(r"[^\s\-_/()]+", _fold(name))
    tail: list[str] = []
    while len(words) > 1 and (_VERSION.fullmatch(words[-1].strip(".,")) or words[-1].strip(".,") in _EDITIONS):
        tail.insert(0, words.pop().strip(".,"))
    if not tail and len(words) == 1 and (m := _GLUED_VERSION.fullmatch(words[0])):
        return m[1], m[2]
    return " ".join(words), " ".join(tail)


def _same_base(a: str, b: str) -> bool:
    ca, cb = _canonical(a), _canonical(b)
    return name_key(a) == name_key(b) or (ca is not None and ca == cb)


@lru_cache(maxsize=65536)
def _version_relation(a: str, b: str) -> tuple[str | None, str | None]:
    """(variant, conflict): "version" for a name with a version or edition against the bare name ("PostgreSQL
    15" / "Postgres", "IntelliJ IDEA Ultimate" / "IntelliJ IDEA"); "other_version" for two different ones of one
    name ("Python 2" / "Python 3"; "3" and "3.11" agree)."""
    (ba, va), (bb, vb) = _versioned(a), _versioned(b)
    if not (va or vb) or not _same_base(ba if va else a, bb if vb else b):
        return None, None
    if va and vb and va != vb and not (va.startswith(vb + ".") or vb.startswith(va + ".")):
        return None, "other_version"
    return ("version" if not (va and vb) else None), None


def _word_prefixes(short: str, words: list[str]) -> bool:
    """`short` is a beginning of two or more of the words, in order, the first word's among them, words may be
    skipped ("FedEx" / "Federal Express", "VSCode" / "Visual Studio Code", "Caltech" / "California Institute of
    Technology"); at least one piece is longer than a letter (else it is an acronym)."""
    @cache  # a fresh closure per call, freed with it
    def fits(i: int, j: int, used: int, long_piece: bool) -> bool:
        if i == len(short):
            return used >= 2 and long_piece
        for w in range(j, len(words)):
            word = words[w]
            for n in range(min(len(word), len(short) - i), 0, -1):
                if word[:n] == short[i:i + n] and fits(i + n, w + 1, used + 1, long_piece or n >= 2):
                    return True
            if used == 0:  # the first piece begins the first word
                return False
        return False
    return 3 <= len(short) <= 16 and 2 <= len(words) <= 8 and fits(0, 0, 0, False)


def _prefix(short: str, long: str) -> bool:
    """A brand's short form that begins the longer name or one of its words, at least half of it ("Dynamo" /
    "DynamoDB", "Dynamo" / "Amazon DynamoDB", "Elastic" / "Elasticsearch")."""
    sk = name_key(short)
    if len(sk) < 3 or len(_words(short)) != 1:
        return False
    targets = [name_key(long)] + (_words(long) if len(_words(long)) <= 3 else [])
    return any(t != sk and t.startswith(sk) and len(sk) * 2 >= len(t) for t in targets)


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
    - not people: "version" (`_version_relation`), "prefix" (`_prefix`), "word_prefixes" (`_word_prefixes`);
    - people only (titles such as Dr. or Ms. left out): two full names by parts (`_person_pair`: "nickname",
      "initial", "short_name", "transliteration", "typo" of the given name, "middle_name", "title",
      "name_order"); "part_name", one word equal to a word of the other ("Wei" / "Zhang Wei", "Dr. Rao" /
      "Priya Rao"); "nickname", first names listed as one name's forms by the `nicknames` dataset ("Bob" /
      "Robert"); "short_name", one word of at least 3 letters sharing its first 3 letters with a longer
      single-word name ("Mel" / "Melanie")."""
    if person:
        shape, conflict = _person_pair(a, b)
        if shape or conflict:
            return shape
    ka, kb = name_key(a), name_key(b)
    edits = OSA.distance(ka, kb)
    shortest = min(len(ka), len(kb))
    digits_differ = sorted(c for c in ka if c.isdigit()) != sorted(c for c in kb if c.isdigit())
    if not digits_differ and ((edits <= 1 and shortest >= 5) or (edits <= 2 and shortest >= 7)):
        return "typo"  # (a different number is another version: "Python 2" / "Python 3")
    if not person and (shape := _version_relation(a, b)[0]):
        return shape
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
        if not person and len(name_key(short)) < len(name_key(long)):
            if _prefix(short, long):
                return "prefix"
            if len(sw) <= 2 and _word_prefixes(name_key(short), [w for w in lw if w not in _STOP_WORDS]):
                return "word_prefixes"
    return None


@lru_cache(maxsize=65536)
def _conflict(a: str, b: str, person: bool) -> str | None:
    """Evidence that two names (not spelled alike) are two things: full names of people whose parts disagree,
    two versions of one product, two different terms of the offline lexicon."""
    if person:
        return _person_pair(a, b)[1]
    if conflict := _version_relation(a, b)[1]:
        return conflict
    ca, cb = _canonical(a), _canonical(b)
    if ca is not None and cb is not None and ca != cb:
        return "other_lexicon_term"  # "Java" / "JavaScript", "GitHub" / "GitHub Actions"
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
    conflict: str | None = None
    generic: bool = False  # one side's type is generic: no proof of identity
    person: bool = False
    use_fuzzy: bool = True

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
        return not self.generic and not (self.conflict and self.exact < 1.0) and (self.exact >= 1.0 or not self.person)

    @property
    def match_type(self) -> str:
        if self.exact >= 1.0:
            return "exact"
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
        return text + (", generic type" if self.generic else "")


@lru_cache(maxsize=65536)
def _forms(names: tuple[str, ...]) -> tuple[str, ...]:
    """The names and the lexicon's canonical names for them ("Mongo" -> also "MongoDB")."""
    out = list(dict.fromkeys(n for n in names if n.strip()))
    for n in list(out):
        term = lookup(n.strip())
        if term is not None and term.canonical not in out:
            out.append(term.canonical)
    return tuple(out)


def signals(name: str, entity_type: str, vector: Sequence[float] | None, cand: Candidate,
            use_fuzzy: bool = True) -> Signals:
    key = name_key(name)
    names = (cand.name, *cand.aliases)
    canon = _canonical(name)
    exact = 1.0 if any(name_key(n) == key for n in names) or (
        canon is not None and any(_canonical(n) == canon for n in names)) else 0.0
    fuzzy = fuzz.ratio(key, name_key(cand.name)) / 100.0
    fa, fb = type_family(entity_type), type_family(cand.type)
    person = "person" in (fa, fb)
    generic = GENERIC in (fa, fb)
    variant = conflict = None
    if exact < 1.0:  # evidence of two things outweighs a shape ("GitHub" / "GitHub Actions": two lexicon terms)
        conflict = _conflict(name, cand.name, person)
        mine, theirs = _forms((name,)), _forms(names)
        variant = None if conflict else next((v for a in mine for n in theirs if (v := _variant(a, n, person))
                                              and (use_fuzzy or v != "typo")), None)
    return Signals(exact, fuzzy, cosine(vector, cand.vector), variant, conflict, generic, person, use_fuzzy)


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

    def band(self, family: str) -> Band:
        return self.bands.get(family) or Band(self.auto_merge_threshold, self.pending_match_threshold)

    def decide(self, name: str, entity_type: str, vector: Sequence[float] | None,
               candidates: Sequence[Candidate]) -> Resolution:
        """The best compatible candidate decides (ties go to the lower id: the same answer on a replay), unless
        others score within the ambiguity margin of it: then a pending pair to each, never a merge."""
        key = name_key(name)
        scored: list[tuple[float, Candidate, Signals, str]] = []
        for cand in sorted(candidates, key=lambda c: c.id):
            if not compatible(entity_type, cand.type) or key in cand.rejected:
                continue
            sig = signals(name, entity_type, vector, cand, self.fuzzy_matching)
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

    def same_node(self, new_type: str, held_type: str) -> bool:
        return same_node(new_type, held_type)

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
