"""What a memory says an entity *is*: its role ("John Smith, the plumber", "my barber Alex Kim", "Apex is the
climbing gym on 5th Street"). Two entities spelled the same whose roles disagree are two meanings until a
reviewer says otherwise (docs/identity.md, "Meanings").

Only the plainest English shapes are read, next to the name:
- an apposition after it: "NAME, the|my|our|a|X's ROLE," (up to the comma or the sentence's end);
- a possessive before it: "my|our|X's ROLE NAME" ("User's landlord Tomasz Kowalczyk", "Our new VP of Sales, NAME,");
- a copula after it: "NAME is|was the|my|a ROLE ..." ("Chris Taylor is the contractor redoing ...");
- an affiliation after it: "NAME from|at the|my|X's GROUP" ("Maria Garcia from the vendor's legal team");
- the subject's capacity: "NAME ... as a|an ROLE" when the text begins with the name ("Mohammed Ali joined our
  data science team as a senior analyst").

A role is its head phrase: the words up to a preposition, a relative pronoun or a verb, without determiners,
possessives and time words ("new", "old", "former"). Two roles agree when one's head noun is among the other's
words or ends the other's head noun ("physical therapist" / "therapist" / "physiotherapist"). One person is seldom
called two different things, and when they are ("my manager Sarah" / "Sarah, the team lead") the cost is a second
node and a pending pair, never a wrong merge.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence


def _words_of(text: str) -> frozenset[str]:
    return frozenset(text.split())


MAX_ROLE_WORDS = 4

# "X's" is a possessive unless it is a contraction ("that's cool", "it's", "what's up")
_OWNER = (r"(?!(?i:that|it|what|there|here|he|she|who|where|how|let|everyone|everybody|someone|nobody|one|today|"
          r"tonight|tomorrow|yesterday|life|this|now|time|name)'s\b)[A-Za-z]+(?:-[a-z]+)*'s")
_DETERMINER = r"(?:the|my|our|a|an|his|her|their|your|" + _OWNER + ")"
# words that end a role phrase: prepositions, relative pronouns, conjunctions, auxiliaries
_STOP = _words_of(
    "in at on by near to for with from of about into over under after before since during who whom whose "
    "that which where when and or but is was are were has have had will would can could should may might "
    "just still also again here there this these those outside inside around across through via than like "
    "as if so then not no i you he she it we they me him us them live lives lived sent said says told got "
    "gets made went came took gave wants needs asked"
)
# "of" joins a title to its field ("VP of Sales", "head of design"): kept when the phrase is a title
_TITLE_OF = _words_of(
    "vp president head director chief manager dean professor minister secretary"
)
_DROP = _words_of(
    "the my our a an his her their your new old former current longtime long-time favorite favourite dear "
    "usual regular"
)
# before a name: not "a" ("a little Bitcoin"), "the" ("the coolest Harry Potter party") or "your" ("Sorry about
# your job Jon")
_POSSESSIVE = r"(?:my|our|his|her|their|" + _OWNER + ")"
# a name spoken to, not about: "Hey Jon, your business sounds great!", "Thanks, Mel!"
_VOCATIVE = re.compile(r"(?:^|[.!?]\s+|\b(?:hey|hi|hello|thanks|thank you|wow|oh|yeah|yes|congrats|congratulations|"
                       r"sorry|dear|well|ok|okay|yep|yup|sure|great|nice|cool|awesome|aww|hmm)\W*)$", re.IGNORECASE)
# words that say nothing about what a thing is ("A. Novak is the name on the invoice")
_NOT_ROLES = _words_of(
    "name one thing person guy lady man woman kind type sort part reason same other only best first last"
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'&-]*")
_DASH = re.compile(r"\s[-\u2013\u2014]\s|[\u2013\u2014]")


def _phrase(words: Sequence[str]) -> str | None:
    """The role's head phrase from the words after a determiner: up to a stop word, a verb in -ing/-ed after the
    first word, or MAX_ROLE_WORDS words."""
    kept: list[str] = []
    for i, raw in enumerate(words):
        w = raw.casefold()
        if w == "of" and kept and kept[-1] in _TITLE_OF and i + 1 < len(words):
            kept += ["of", words[i + 1].casefold()]
            break
        if w in _STOP or (i > 0 and kept and re.fullmatch(r"[a-z]{3,}(?:ing|ed)", w) and kept[-1] not in _DROP):
            break
        kept.append(w)
        if len(kept) >= MAX_ROLE_WORDS:
            break
    core = [w for w in kept if w not in _DROP]
    if not core or core[-1] in _NOT_ROLES or core[-1].endswith("'s"):  # "Her name's Coco"
        return None
    return " ".join(core)


def _words(text: str) -> list[str]:
    """The words of a role phrase, up to a dash ("LeBron is the man - love his skills")."""
    return _WORD.findall(_DASH.split(text, 1)[0])


_APPOSITION = re.compile(r",\s+" + _DETERMINER + r"\s+([^,.;:!?()]+)(,?)")
_COPULA = re.compile(r"\s+(?:is|was)\s+" + _DETERMINER + r"\s+([^,.;:!?()]+)")
_BEFORE = re.compile(r"(?:^|[\s(])" + _POSSESSIVE + r"\s+((?:[A-Za-z][\w'&-]*\s+){0,3}[A-Za-z][\w'&-]*)(,?)\s+$",
                     re.IGNORECASE)
_AFFILIATION = re.compile(r"\s+(from|at)\s+" + _DETERMINER + r"\s+([^,.;:!?()]+)")
_CAPACITY = re.compile(r"[^,.;:!?()]*?\bas\s+(?:a|an)\s+([^,.;:!?()]+)")


def _shapes(before: str, after: str) -> Iterator[tuple[str, str]]:
    """(prefix, phrase) of each shape found around the name, most telling first."""
    # apposition: "NAME, the plumber, ..."; a name spoken to ("Jon, your business sounds great!") is none unless a
    # comma closes it
    if (m := _APPOSITION.match(after)) and (m.group(2) or not _VOCATIVE.search(before)):
        yield "", m.group(1)
    if m := _COPULA.match(after):  # "NAME is the contractor redoing ..."
        yield "", m.group(1)
    # possessive before: "my neighbor NAME", "Our new VP of Sales, NAME," ("Thanks for the advice, Jon!" is a name
    # spoken to: a comma before the name needs one after it)
    if (m := _BEFORE.search(before)) and (not m.group(2) or after.startswith(",")) and not any(
            w.casefold() in _STOP - {"of"} for w in _words(m.group(1))):
        yield "", m.group(1)
    if m := _AFFILIATION.match(after):  # "NAME from the vendor's legal team", "NAME at the corner pharmacy"
        yield m.group(1) + " ", m.group(2)
    if not before.strip() and (m := _CAPACITY.match(after)):  # "NAME joined ... as a senior analyst"
        yield "", m.group(1)


def role_of(text: str, name: str) -> str | None:
    """The role the text gives the entity named `name` (first mention), or None."""
    name = name.strip()
    if not name or not text:
        return None
    at = re.search(r"(?<![\w'])" + re.escape(name) + r"(?![\w-])", text)
    if at is None:
        return None
    for prefix, phrase in _shapes(text[: at.start()], text[at.end():]):
        role = _phrase(_words(phrase))
        if role:
            return prefix + role
    return None


def role_phrase(stated: str) -> str | None:
    """A role as an extractor stated it ("the user's plumber"), as a head phrase ("plumber")."""
    words = _words(stated)
    while words and (words[0].casefold() in _DROP or words[0].endswith("'s")):
        words = words[1:]
    return _phrase(words)


def role_key(role: str) -> str:
    """The part of a role that names a meaning: its head noun ("therapist" of "physical therapist", "vp" of "vp of
    sales")."""
    words = role.split(" of ")[0].split()
    return words[-1] if words else ""


def agree(a: str, b: str) -> bool:
    """Two roles of one thing: one's head noun is among the other's words, or ends the other's head noun
    ("physiotherapist" / "physical therapist")."""
    ka, kb = role_key(a), role_key(b)
    if not (ka and kb):
        return False
    short, long = sorted((ka, kb), key=len)
    return ka in b.split() or kb in a.split() or (len(short) >= 5 and long.endswith(short))


def disagree(ours: Iterable[str], theirs: Iterable[str]) -> bool:
    """Both sides have roles and none of ours agrees with any of theirs."""
    mine, held = [r for r in ours if r], [r for r in theirs if r]
    return bool(mine and held) and not any(agree(a, b) for a in mine for b in held)
