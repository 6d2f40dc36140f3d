"""People's names by parts: given name, middle names, surname, suffix (nameparser), and how two given names can be
one person's (a listed nickname or diminutive, an initial, a short form, a transliteration, a typo) or two people's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files

from nameparser import HumanName
from nicknames import NickNamer
from rapidfuzz.distance import OSA

from service.identity.names import WORD, name_key, plain, words

_NICKNAMES = NickNamer()
_DIMINUTIVE_ENDINGS = ("y", "ie", "i", "e")


def _load_diminutives() -> dict[str, frozenset[str]]:
    """diminutive -> the full names it is a form of (`diminutives.txt`: other languages' conventional forms)."""
    out: dict[str, set[str]] = {}
    for line in (files("service.identity") / "diminutives.txt").read_text(encoding="utf-8").splitlines():
        full, sep, shorts = line.partition(":")
        if line.startswith("#") or not sep:
            continue
        for short in shorts.split(","):
            if key := name_key(plain(short)):
                out.setdefault(key, set()).add(name_key(plain(full)))
    return {k: frozenset(v) for k, v in out.items()}


_DIMINUTIVES = _load_diminutives()


@lru_cache(maxsize=65536)
def skeleton(name: str) -> str:
    """A rough transliteration key: spellings of one sound unified, doubled letters and vowels after the first
    letter dropped ("Aleksandr" / "Alexander", "Mohammed" / "Muhammad", "Sergei" / "Sergey", "Tchaikovsky" /
    "Chaikovsky", "Rachmaninoff" / "Rachmaninov")."""
    s = re.sub(r"ff$", "v", name)  # the old -off for -ov
    for old, new in (("tch", "ch"), ("ph", "f"), ("ks", "x"), ("kh", "h"), ("ck", "k"), ("q", "k"), ("c", "k"),
                     ("w", "v"), ("z", "s"), ("y", "i")):
        s = s.replace(old, new)
    s = s[:1] + s[1:].replace("h", "")
    s = re.sub(r"(.)\1+", r"\1", s)
    return s[:1] + re.sub(r"[aeiou]", "", s[1:])


def _ending(name: str) -> str:
    last = name[-1:].replace("y", "i")
    return last if last in "aeiou" else "consonant"


def spelled_alike(a: str, b: str) -> bool:
    """Two spellings of one name in another script's romanisation: one skeleton, the same kind of ending."""
    sa, sb = skeleton(a), skeleton(b)
    return min(len(a), len(b)) >= 4 and len(sa) >= 3 and sa == sb and _ending(a) == _ending(b)


def _diminutive(short: str, full: str) -> bool:
    """`short` is a listed diminutive of `full` or of another spelling of it ("Sasha" / "Aleksandr" and
    "Alexander", "Beppe" / "Giuseppe")."""
    return any(f == full or spelled_alike(f, full) for f in _DIMINUTIVES.get(short, ()))


def nicknames(a: str, b: str) -> bool:
    """One first name is a listed nickname or diminutive of the other, or both are of one name (the `nicknames`
    dataset; `diminutives.txt` for other languages)."""
    if a == b:
        return False
    ca, cb = _NICKNAMES.canonicals_of(a) | {a}, _NICKNAMES.canonicals_of(b) | {b}
    return bool(ca & cb) or _diminutive(a, b) or _diminutive(b, a)


@dataclass(frozen=True)
class Parts:
    given: str
    middle: tuple[str, ...]
    surname: str
    suffix: str
    surnames: frozenset[str] = frozenset()  # the words of a double surname ("Smith-Jones")


@lru_cache(maxsize=65536)
def person_parts(name: str) -> Parts | None:
    """Given name, middle names, surname and suffix of a full name (titles left out), folded; None unless the
    name has both a given name and a surname."""
    h = HumanName(name)
    given, surname = name_key(plain(h.first)), name_key(plain(h.last))
    if not given or not surname or not given.isalpha():
        return None
    middle = tuple(k for w in WORD.findall(plain(h.middle)) if (k := name_key(w)))
    return Parts(given, middle, surname, name_key(h.suffix), frozenset(WORD.findall(plain(h.last))))


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


def given_relation(a: str, b: str) -> str | None:
    """How two given names (folded) can be one person's: same, an initial, a listed nickname, a short form, a
    transliteration or a one-letter typo; None for two different names."""
    if a == b:
        return "same"
    if min(len(a), len(b)) == 1:
        return "initial" if a[0] == b[0] else None
    distinct = _distinct_names(a, b)
    if nicknames(a, b) and not distinct:
        return "nickname"
    if min(len(a), len(b)) >= 3 and abs(len(a) - len(b)) >= 2 and (a.startswith(b) or b.startswith(a)):
        return "short_name"  # "Rob" / "Robert"; one letter more is another name ("Paul" / "Paula") or a typo
    if spelled_alike(a, b):
        return "transliteration"
    if min(len(a), len(b)) >= 3 and OSA.distance(a, b) <= 1 and not distinct:
        return "typo"
    return None


_SPELLINGS = ("same", "typo", "transliteration")


def _middles_agree(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    if not a or not b:
        return True
    return len(a) == len(b) and all(x == y or (min(len(x), len(y)) == 1 and x[0] == y[0])
                                    for x, y in zip(a, b, strict=True))


@lru_cache(maxsize=65536)
def person_pair(a: str, b: str) -> tuple[str | None, str | None]:
    """(variant, conflict) of two full names of people, by parts; (None, None) unless both have a given name
    and a surname."""
    pa, pb = person_parts(a), person_parts(b)
    if pa is None or pb is None:
        return None, None
    sur = given_relation(pa.surname, pb.surname) if min(len(pa.surname), len(pb.surname)) > 1 else None
    if sur not in _SPELLINGS and (pa.surnames < pb.surnames or pb.surnames < pa.surnames):
        sur = "double_surname"  # "Mary Smith" / "Mary Smith-Jones"
    if sur not in (*_SPELLINGS, "double_surname"):
        if pa.given == pb.surname and pa.surname == pb.given:
            return "name_order", None  # "Wei Zhang" / "Zhang Wei"
        wa, wb = set(words(a, True)), set(words(b, True))
        if wa < wb or wb < wa:  # one name's words all in the other: "Ana Garcia" / "Ana Garcia Lopez"
            return "contained_words", None
        return None, "other_surname"
    given = given_relation(pa.given, pb.given)
    if given is None:
        return None, "other_given_name"
    if sur != "same" and given != "same" and not (sur in _SPELLINGS and given in _SPELLINGS):
        return None, "other_name"  # (both parts spelled otherwise is one name romanised otherwise: "Fyodor
        # Dostoevsky" / "Fiodor Dostoyevsky")
    if not _middles_agree(pa.middle, pb.middle):
        return None, "other_middle_name"
    if pa.suffix and pb.suffix and pa.suffix != pb.suffix:
        return None, "other_suffix"  # Jr. / Sr.
    if given != "same" and sur != "same":
        return "transliteration", None
    if given != "same":
        return given, None
    if sur != "same":
        return sur, None
    return ("middle_name" if pa.middle != pb.middle else "suffix" if pa.suffix != pb.suffix else "title"), None
