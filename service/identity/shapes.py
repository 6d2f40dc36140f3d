"""The candidate rules per type family: the known *shape* relating two names (`variant`) and the evidence that two
names are two things (`conflict`)."""

from __future__ import annotations

from functools import lru_cache

from rapidfuzz.distance import OSA

from service.identity.names import STOP_WORDS, canonical, initials, name_key, words
from service.identity.people import nicknames, person_pair
from service.identity.places import other_name
from service.identity.products import (
    abbreviation,
    numeronym,
    prefix,
    release_name,
    symbol_acronym,
    version_relation,
    versioned,
    word_prefixes,
)


def _contained(sw: list[str], lw: list[str]) -> bool:
    """`lw` is `sw` with one or two words more before or after."""
    extra = len(lw) - len(sw)
    return bool(sw) and 1 <= extra <= 2 and (lw[: len(sw)] == sw or lw[extra:] == sw)


@lru_cache(maxsize=65536)
def variant(a: str, b: str, person: bool, place: bool = False) -> str | None:
    """The known shape relating two names, if any (checked both ways round):
    - "typo": keys one edit apart (a transposition counts one) when both have at least 5 characters, or two
      edits apart when both have at least 7, with the same digits ("Kuberentes" / "Kubernetes");
    - "acronym": one word that is the initials of the other's words, stop words left out, or of all but the
      first ("NYC" / "New York City", "MIT" / "Massachusetts Institute of Technology", "EKS" / "Amazon
      Elastic Kubernetes Service"), or its numeronym ("i18n" / "internationalization"), or (not people) a short
      form written with symbols or in mixed case ("P&G" / "Procter & Gamble", "PwC" / "PricewaterhouseCoopers");
    - "contained_words": the other name is this one's words with one or two more before or after ("Stripe" /
      "Stripe, Inc.", "Excel" / "Microsoft Excel", "Melanie" / "Melanie Smith");
    - places: "place_name", another name of one city (`places.other_name`: "Bombay" / "Mumbai");
    - not people: "version" (`version_relation`), "release_name" (`release_name`), "abbreviation"
      (`abbreviation`), "prefix" (`prefix`), "word_prefixes" (`word_prefixes`);
    - people only (titles such as Dr. or Ms. left out): two full names by parts (`person_pair`: "nickname",
      "initial", "short_name", "transliteration", "typo" of the given name, "middle_name", "title",
      "name_order"); "part_name", one word equal to a word of the other ("Wei" / "Zhang Wei", "Dr. Rao" /
      "Priya Rao"); "nickname", first names listed as one name's forms ("Bob" / "Robert"); "short_name", one word
      of at least 3 letters sharing its first 3 letters with a longer single-word name ("Mel" / "Melanie")."""
    if person:
        shape, conflict = person_pair(a, b)
        if shape or conflict:
            return shape
    ka, kb = name_key(a), name_key(b)
    edits = OSA.distance(ka, kb)
    shortest = min(len(ka), len(kb))
    digits_differ = sorted(c for c in ka if c.isdigit()) != sorted(c for c in kb if c.isdigit())
    if not digits_differ and ((edits <= 1 and shortest >= 5) or (edits <= 2 and shortest >= 7)):
        return "typo"  # (a different number is another version: "Python 2" / "Python 3")
    if place and other_name(a, b):
        return "place_name"
    if not person:
        if shape := version_relation(a, b)[0]:
            return shape
        if release_name(a, b):
            return "release_name"
        for x, y in ((a, b), (b, a)):  # a version and a brand word at once: "Office 365" / "Microsoft Office"
            (bx, vx), vy = versioned(x), versioned(y)[1]
            if any(ch.isdigit() for ch in vx) and not vy and _contained(words(bx), words(y)):
                return "version"
        if abbreviation(a, b):
            return "abbreviation"
    for short, long in ((a, b), (b, a)):
        if numeronym(name_key(short), name_key(long)):
            return "acronym"
        sw, lw = words(short, person), words(long, person)
        if len(sw) == 1 and len(lw) >= 2 and len(sw[0]) >= 2 and sw[0] in (initials(lw), initials(lw[1:])):
            return "acronym"
        if _contained(sw, lw):
            return "contained_words"
        if person and len(sw) == 1:
            if len(lw) >= 2 and sw[0] in lw:
                return "part_name"
            if lw and nicknames(sw[0], lw[0]):
                return "nickname"
            if len(lw) == 1 and len(sw[0]) >= 3 and len(lw[0]) > len(sw[0]) and lw[0][:3] == sw[0][:3]:
                return "short_name"
        if not person and len(name_key(short)) < len(name_key(long)):
            if prefix(short, long):
                return "prefix"
            if len(sw) <= 2 and word_prefixes(name_key(short), [w for w in lw if w not in STOP_WORDS]):
                return "word_prefixes"
            if symbol_acronym(short, long):
                return "acronym"
    return None


@lru_cache(maxsize=65536)
def conflict(a: str, b: str, person: bool) -> str | None:
    """Evidence that two names (not spelled alike) are two things: full names of people whose parts disagree,
    two versions of one product, two different terms of the offline lexicon."""
    if person:
        return person_pair(a, b)[1]
    if found := version_relation(a, b)[1]:
        return found
    ca, cb = canonical(a), canonical(b)
    if ca is not None and cb is not None and ca != cb:
        return "other_lexicon_term"  # "Java" / "JavaScript", "GitHub" / "GitHub Actions"
    return None
