"""Shapes of product, organisation and place names that string and embedding similarity miss: versions and
editions, release names, brand prefixes, short forms made of the words' beginnings, acronyms written with symbols
or from the capitals of a compound, standard abbreviations of words ("St." for Saint)."""

from __future__ import annotations

import re
from functools import cache, lru_cache

from service.identity.names import STOP_WORDS, canonical, fold, name_key, words

# a version or edition after a product's name: "3", "3.11", "v2", "2019", "Pro", "Community Edition"
_VERSION = re.compile(r"v?\d+(?:\.\d+)*[a-z]?")
_EDITIONS = frozenset({"pro", "plus", "lite", "ce", "ee", "community", "enterprise", "edition", "ultimate",
                       "professional", "premium", "standard", "express", "lts", "beta", "alpha", "preview",
                       "classic", "max", "mini", "home", "server", "desktop", "cloud", "os", "release", "version"})
_GLUED_VERSION = re.compile(r"([a-z]{3,})(\d+(?:\.\d+)*)")
# standard abbreviations of a name's words, each written for one word only
_ABBREVIATIONS = {"st": "saint", "ste": "sainte", "mt": "mount", "ft": "fort", "pt": "point", "univ": "university",
                  "intl": "international", "natl": "national", "corp": "corporation", "co": "company",
                  "bros": "brothers", "dept": "department", "assn": "association", "assoc": "association",
                  "inst": "institute", "govt": "government", "ltd": "limited", "inc": "incorporated"}


@lru_cache(maxsize=65536)
def versioned(name: str) -> tuple[str, str]:
    """(the name without a trailing version or edition, that version or edition) - ("Python", "3.11") for
    "Python 3.11", ("Python", "3") for "python3", (name, "") when there is none."""
    ws = re.findall(r"[^\s\-_/()]+", fold(name))
    tail: list[str] = []
    while len(ws) > 1 and (_VERSION.fullmatch(ws[-1].strip(".,")) or ws[-1].strip(".,") in _EDITIONS):
        tail.insert(0, ws.pop().strip(".,"))
    if not tail and len(ws) == 1 and (m := _GLUED_VERSION.fullmatch(ws[0])):
        return m[1], m[2]
    return " ".join(ws), " ".join(tail)


def _same_base(a: str, b: str) -> bool:
    ca, cb = canonical(a), canonical(b)
    return name_key(a) == name_key(b) or (ca is not None and ca == cb)


@lru_cache(maxsize=65536)
def version_relation(a: str, b: str) -> tuple[str | None, str | None]:
    """(variant, conflict): "version" for a name with a version or edition against the bare name ("PostgreSQL
    15" / "Postgres", "IntelliJ IDEA Ultimate" / "IntelliJ IDEA"); "other_version" for two different ones of one
    name ("Python 2" / "Python 3"; "3" and "3.11" agree)."""
    (ba, va), (bb, vb) = versioned(a), versioned(b)
    if not (va or vb) or not _same_base(ba if va else a, bb if vb else b):
        return None, None
    if va and vb and va != vb and not (va.startswith(vb + ".") or vb.startswith(va + ".")):
        return None, "other_version"
    return ("version" if not (va and vb) else None), None


def release_name(a: str, b: str) -> bool:
    """One name is a product's name and a version number, the other the same name and one word in its place: the
    release's name ("Android 10" / "Android Q", "macOS 14" / "macOS Sonoma"). Two release names ("Debian
    Bookworm" / "Debian Bullseye") are not related by this."""
    for x, y in ((a, b), (b, a)):
        bx, vx = versioned(x)
        if not vx or not any(ch.isdigit() for ch in vx):
            continue
        wy = fold(y).split()
        if len(wy) == len(bx.split()) + 1 and name_key(" ".join(wy[:-1])) == name_key(bx) and wy[-1].isalpha():
            return True
    return False


def word_prefixes(short: str, ws: list[str]) -> bool:
    """`short` is a beginning of two or more of the words, in order, the first word's among them, words may be
    skipped ("FedEx" / "Federal Express", "VSCode" / "Visual Studio Code", "Caltech" / "California Institute of
    Technology"); at least one piece is longer than a letter (else it is an acronym)."""
    @cache  # a fresh closure per call, freed with it
    def fits(i: int, j: int, used: int, long_piece: bool) -> bool:
        if i == len(short):
            return used >= 2 and long_piece
        for w in range(j, len(ws)):
            word = ws[w]
            for n in range(min(len(word), len(short) - i), 0, -1):
                if word[:n] == short[i:i + n] and fits(i + n, w + 1, used + 1, long_piece or n >= 2):
                    return True
            if used == 0:  # the first piece begins the first word
                return False
        return False
    return 3 <= len(short) <= 16 and 2 <= len(ws) <= 8 and fits(0, 0, 0, False)


def prefix(short: str, long: str) -> bool:
    """A brand's short form that begins the longer name or one of its words, at least half of it ("Dynamo" /
    "DynamoDB", "Dynamo" / "Amazon DynamoDB", "Elastic" / "Elasticsearch")."""
    sk = name_key(short)
    if len(sk) < 3 or len(words(short)) != 1:
        return False
    targets = [name_key(long)] + (words(long) if len(words(long)) <= 3 else [])
    return any(t != sk and t.startswith(sk) and len(sk) * 2 >= len(t) for t in targets)


def numeronym(short: str, long: str) -> bool:
    """"i18n" / "internationalization", "k8s" / "kubernetes": first letter, the count of the letters between,
    last letter."""
    m = re.fullmatch(r"([a-z])(\d{1,2})([a-z])", short)
    return m is not None and len(long) == int(m[2]) + 2 and long[0] == m[1] and long[-1] == m[3]


def _compound_words(name: str) -> list[str]:
    """The words of a name, a word written in camel case taken apart ("PricewaterhouseCoopers" -> pricewaterhouse,
    coopers)."""
    parts = re.findall(r"[A-Z][a-z]+|[a-z]+|[A-Z]+(?![a-z])", name)
    return [fold(p) for p in parts]


def symbol_acronym(short: str, long: str) -> bool:
    """A short form written with symbols or in mixed case whose letters, or whose capitals, are the initials of
    the longer name's words, a camel-case word taken apart ("P&G" / "Procter & Gamble", "AT&T" / "American
    Telephone & Telegraph", "PwC" / "PricewaterhouseCoopers"), or in capitals against one camel-case word ("GSK" /
    "GlaxoSmithKline")."""
    raw = short.strip()
    if not 2 <= len(raw) <= 8 or " " in raw:
        return False
    letters = "".join(ch for ch in fold(raw) if ch.isalpha())
    capitals = fold("".join(ch for ch in raw if ch.isupper()))
    mixed = raw[0].isupper() and raw != raw.upper() and len(capitals) >= 2
    symbols = any(ch in "&+." for ch in raw) and len(letters) >= 2
    compound = raw.isalpha() and raw.isupper() and len(words(long)) == 1  # "GSK" / "GlaxoSmithKline"
    if not (mixed or symbols or compound):
        return False
    lw = [w for w in _compound_words(long) if w not in STOP_WORDS]
    if len(lw) < 2:
        return False
    wanted = "".join(w[0] for w in lw)
    return ((symbols or compound) and letters == wanted) or (mixed and capitals == wanted)


def expand_abbreviations(name: str) -> str:
    """The name's words with standard abbreviations written out ("St. Petersburg" -> "saint petersburg")."""
    return " ".join(_ABBREVIATIONS.get(w, w) for w in words(name))


def abbreviation(a: str, b: str) -> bool:
    """The same words once a standard abbreviation of one of them is written out ("St. Petersburg" / "Saint
    Petersburg", "Mt. Everest" / "Mount Everest"); a one-word name is not abbreviated."""
    if len(words(a)) < 2 or len(words(b)) < 2 or words(a) == words(b):
        return False
    return expand_abbreviations(a) == expand_abbreviations(b)
