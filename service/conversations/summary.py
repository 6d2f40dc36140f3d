"""An extractive summary without a model: the sentences that carry the conversation's most frequent content
words (Luhn's method), in their order. Deterministic and offline."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Protocol

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_'\-]*")
STOPWORDS = frozenset(w for w in """
a an the and or but if then so of to in on at by for with from as is are was were be been being am do does did
i you he she it we they me him her us them my your his its our their this that these those there here what which
who whom when where why how not no yes ok okay just also too very can could would should will shall may might
must have has had having get got about into over under again all any some such only own same than up down out
off more most other let lets i'm i've i'd i'll you're it's that's don't can't won't please thanks thank
""".split())  # noqa: SIM905
MAX_SENTENCE_CHARS = 400


class SessionSummarizer(Protocol):
    """A model that summarises a conversation (service/ai/gemini/summaries.py)."""

    name: str

    async def summarise(self, messages: list[tuple[str, str]], max_sentences: int) -> tuple[str, str]:
        """(summary, the model that wrote it); raises a ServiceError when the model cannot answer."""
        ...


@dataclass(frozen=True)
class Picked:
    message_index: int
    text: str


def summarise(messages: list[tuple[str, str]], max_sentences: int = 5, max_chars: int = 1500) -> list[Picked]:
    """`messages`: (role, content) in order. The best `max_sentences` sentences (at most `max_chars` in all),
    in conversation order; each sentence is scored by the mean frequency of its content words."""
    sentences: list[tuple[int, int, str, list[str]]] = []  # (message, position, text, words)
    for i, (_, content) in enumerate(messages):
        for part in _SENTENCE.split(content):
            text = " ".join(part.split())[:MAX_SENTENCE_CHARS]
            words = [w.casefold() for w in _WORD.findall(text)]
            content_words = [w for w in words if w not in STOPWORDS and len(w) > 1]
            if content_words:
                sentences.append((i, len(sentences), text, content_words))
    freq = Counter(w for s in sentences for w in set(s[3]))

    def score(s: tuple[int, int, str, list[str]]) -> float:
        return sum(freq[w] for w in s[3]) / math.sqrt(len(s[3]))

    ranked = sorted(sentences, key=lambda s: (-score(s), s[1]))
    chosen: list[tuple[int, int, str, list[str]]] = []
    used = 0
    for s in ranked:
        if len(chosen) >= max_sentences:
            break
        if used + len(s[2]) > max_chars and chosen:
            continue
        chosen.append(s)
        used += len(s[2])
    return [Picked(s[0], s[2]) for s in sorted(chosen, key=lambda s: s[1])]
