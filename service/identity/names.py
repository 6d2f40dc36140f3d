"""Names as the gate compares them: type families, keys, words, the offline lexicon's canonical names.

Pure functions, cached. A *key* is the spelling two forms of one name share (accents dropped, case-folded,
separators and whitespace removed; "+" and "#" kept, so "C" is not "C++"). Keys are stored on the graph's entities
(`keys`) and indexed: changing `name_key` changes what existing graphs are found by.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

from nameparser.config import CONSTANTS

from service.ai.offline.lexicon import lookup

FAMILIES = ("person", "organization", "place", "technology", "thing")
GENERIC = "thing"
GENERIC_TYPES = frozenset({"", "thing", "concept", "none", "unknown", "entity", "other", "misc"})
_FAMILIES: dict[str, str] = {  # the graph vocabulary's synonyms (service/graph_api/vocabulary.py) and common subtypes
    **dict.fromkeys(("person", "user", "people", "human"), "person"),
    **dict.fromkeys(("organisation", "organization", "company", "team", "org", "institution", "university",
                     "school", "agency", "nonprofit", "ngo", "government", "band", "club", "bank", "firm",
                     "corporation", "department"), "organization"),
    **dict.fromkeys(("place", "location", "city", "country", "region", "state", "province", "county", "town",
                     "village", "continent", "neighborhood", "neighbourhood", "district", "address"), "place"),
}
TITLES = frozenset(CONSTANTS.titles)  # nameparser's list: Dr, Ms, Sra, Herr, Prof, ...
STOP_WORDS = frozenset({"of", "the", "and", "for", "de", "du", "der", "la", "le", "von", "van"})
_SEPARATORS = re.compile(r"[\s\-_.'\u2019/]+")
WORD = re.compile(r"[^\W_]+")
# letters NFKD does not take apart, and the two-letter ASCII renderings of umlauts ("Jürgen" / "Juergen")
_LETTERS = str.maketrans({"ø": "o", "æ": "ae", "œ": "oe", "ß": "ss", "đ": "d", "ł": "l", "þ": "th", "\u0131": "i"})
_UMLAUTS = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue"})


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
def fold(name: str) -> str:
    """Compatibility forms unified, accents dropped ("München" -> "munchen"), case-folded."""
    decomposed = unicodedata.normalize("NFKD", name)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


@lru_cache(maxsize=65536)
def name_key(name: str) -> str:
    """The key two spellings of one name share: accents dropped, case-folded, separators and whitespace removed."""
    return _SEPARATORS.sub("", fold(name))


@lru_cache(maxsize=65536)
def ascii_keys(name: str) -> frozenset[str]:
    """The name's key and its keys in the ASCII renderings of letters NFKD leaves whole or that are written with two
    letters ("Søren" -> "soren", "Jürgen" -> "jurgen" and "juergen", "Straße" -> "strasse"): one spelling, written
    on another keyboard. Not stored (the stored key is `name_key`); the gate compares them."""
    lowered = unicodedata.normalize("NFC", name).casefold()
    keys = {name_key(name), name_key(lowered.translate(_LETTERS)),
            name_key(lowered.translate(_UMLAUTS).translate(_LETTERS))}
    return frozenset(k for k in keys if k)


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
def canonical(name: str) -> str | None:
    """The offline lexicon's canonical name for this one (case-folded), if it lists it."""
    term = lookup(name.strip())
    return term.canonical.casefold() if term is not None else None


@lru_cache(maxsize=65536)
def forms(names: tuple[str, ...]) -> tuple[str, ...]:
    """The names and the lexicon's canonical names for them ("Mongo" -> also "MongoDB")."""
    out = list(dict.fromkeys(n for n in names if n.strip()))
    for n in list(out):
        term = lookup(n.strip())
        if term is not None and term.canonical not in out:
            out.append(term.canonical)
    return tuple(out)


@lru_cache(maxsize=65536)
def plain(name: str) -> str:
    """`fold` with the letters NFKD leaves whole written in ASCII ("Małgorzata" -> "malgorzata")."""
    return fold(name).translate(_LETTERS)


@lru_cache(maxsize=65536)
def words(name: str, person: bool = False) -> list[str]:
    found = WORD.findall(plain(name))
    if person:  # "Dr. Rao" is Rao
        found = [w for w in found if w not in TITLES] or found
    return found


def initials(ws: list[str]) -> str:
    return "".join(w[0] for w in ws if w not in STOP_WORDS)
