"""Offline extractor: deterministic rules, no network, no model (see docs/offline-extractor.md).

Only the user's turns are read; assistant, system and tool turns are context, never facts about
the user. Each user turn is cut into sentences and then into independent first-person clauses
("My name is Priya and I work at Stripe" gives two). A clause is kept when an ordered category
rule fires on it — that is the salience test — and dropped when it is a question, a greeting or
thanks, a bare request to the assistant, or shorter than three words.

A fact's ``content`` is the clause itself, trimmed of leading filler ("OK,", "Also,", "Quick
thing:"), so nothing the user said is paraphrased away. Entities come from the technology lexicon
(``service.ai.lexicon``), capitalised names inside the sentence, backticked and quoted names.
Relations use a small set of snake_case predicates with "user" (first person singular) or the
project (first person plural, or a project-level statement) as subject.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from service.ai.extraction import (
    ExtractedEntity,
    ExtractedFact,
    ExtractedRelation,
    ExtractionResult,
    Message,
    TokenUsage,
)
from service.ai.lexicon import find_terms, lookup
from service.domain import CATEGORIES, Scope

MAX_SENTENCE_CHARS = 500  # longer "sentences" are pasted text or code, not a statement
MIN_WORDS = 3
MAX_ENTITIES = 32
MAX_RELATIONS = 32
MAX_NAME_TOKENS = 4  # "Osteria Nonna", "Marta Kowalski"; a longer capitalised run is a title, not a name
USER_ENTITY = "user"
PROJECT_ENTITY = "project"  # relation subject for "we use X" when no project_id is given


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# --------------------------------------------------------------------------------------------
# Segmentation and cleaning
# --------------------------------------------------------------------------------------------

_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_BULLET = re.compile(r"^\s*[-*•]\s+")
_NUMBERED = re.compile(r"^\s*(?:\d{1,2}[.)]|step \d{1,2}:?)\s+", re.IGNORECASE)
_BOUNDARY = re.compile(r"[.!?]+[\"')\]]*\s+")
_ABBREVIATIONS = frozenset({"e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "st", "approx", "incl", "fig"})
# Only independent clauses with their own first-person subject are split off.
_CLAUSE_SPLIT = _rx(
    r",?\s+(?:and|but)\s+(?:now\s+|then\s+|also\s+)?(?=(?:i|i'm|i've|i'd|we|we're|we've|we'd|my|our)\b)|"
    r",\s+so\s+(?=(?:please|don't|do not|never|always|keep|avoid|use|make sure|stick to|i|i'm|we|we're)\b)"
)

_FILLER_WORDS = (
    r"ok(?:ay)?|yes|yeah|yep|yup|no|nope|right|so|well|sure|great|cool|nice|perfect|exactly|"
    r"thanks|thank you|thx|hi|hello|hey|hmm+|ah|oh|alright|anyway|actually|also|btw|fyi|by the way"
)
# "OK, ..." / "Also ..." / "and ..." at the start of a clause.
_LEADING_FILLER = _rx(rf"^(?:(?:(?:{_FILLER_WORDS})\s*[,!.:;-]+|(?:also|and|but|btw|fyi|oh|so)\b)\s*)+")
# "Quick thing before we start: ..." / "Some context: ..." — a meta preamble before a colon.
_META_PREFIX = _rx(
    r"^(?:[\w'-]+\s+){0,4}?(?:thing|context|note|heads[- ]up|fyi|reminder|background|info)\b[^:]{0,30}:\s+"
)

_QUESTION_START = _rx(
    r"^(?:what|how|why|where|which|who|whom|whose|can you|could you|would you|will you|do you|does|did you|"
    r"is it|is there|are there|are you|should i|should we|shall|may i|when (?:is|are|do|does|did|will|should|can))\b"
)
_GREETING = _rx(
    rf"^(?:(?:{_FILLER_WORDS}|good (?:morning|afternoon|evening|night)|bye|goodbye|see you|cheers|lol|haha|"
    r"got it|sounds good|no worries|np|cool thanks|not sure yet|that worked|that's all|nothing for now)\b[\s,!.]*)+$"
)
# A bare request to the assistant ("Fix the typo", "Book a table") is a task for the turn, not a fact.
_REQUEST_VERB = _rx(
    r"^(?:please\s+)?(?:fix|book|write|rewrite|summari[sz]e|explain|show|give|tell|create|add|remove|delete|"
    r"update|check|look|start|make(?! sure)|remind|send|find|help|generate|refactor|implement|translate|open|"
    r"schedule|call|email|let(?!'s| us)|go ahead|try|continue|proceed|see|read|review|list|draft|change|rename|"
    r"move|print)\b"
)
_ANAPHORA = _rx(r"\b(?:it|this|that|them|those|these)\b")
_SEQUENCE = _rx(r"\bfirst\b.*\bthen\b|,\s*(?:and\s+)?(?:only\s+)?(?:then|finally|after that|afterwards)\b")


def split_sentences(text: str) -> list[str]:
    """Sentences of one turn: code fences removed, one line per bullet, abbreviations respected.

    A numbered list of two or more items is kept together as one sentence, with the line that
    introduces it ("Here's how we cut a hotfix:"), items joined by "; " — the steps of one procedure.
    """
    out: list[str] = []
    steps: list[str] = []

    def flush_steps() -> None:
        if len(steps) >= 2:
            header = out.pop() if out and out[-1].endswith(":") else ""
            out.append(f"{header} {'; '.join(steps)}".strip())
        else:
            out.extend(steps)
        steps.clear()

    for raw in _FENCE.sub(" ", text).splitlines():
        if _NUMBERED.match(raw):
            steps.append(_NUMBERED.sub("", raw).strip().rstrip(";."))
            continue
        flush_steps()
        line = _BULLET.sub("", raw).strip()
        start = 0
        for match in _BOUNDARY.finditer(line):
            words = line[start : match.start()].split()
            if words and words[-1].rstrip(".").casefold() in _ABBREVIATIONS and match.group(0).startswith("."):
                continue
            out.append(line[start : match.end()].strip())
            start = match.end()
        if line[start:].strip():
            out.append(line[start:].strip())
    flush_steps()
    return out


def split_clauses(sentence: str) -> list[str]:
    parts = [p.strip() for p in _CLAUSE_SPLIT.split(sentence)]
    merged: list[str] = []
    for part in parts:
        if merged and len(part.split()) < MIN_WORDS:
            merged[-1] = f"{merged[-1]}, {part}"
        elif part:
            merged.append(part)
    return merged


def clean_clause(clause: str) -> str:
    text = " ".join(clause.replace("\u2019", "'").replace("\u2018", "'").split())  # curly apostrophes
    for _ in range(3):
        stripped = _META_PREFIX.sub("", _LEADING_FILLER.sub("", text)).strip()
        if stripped == text:
            break
        text = stripped
    first = text.split(maxsplit=1)[0] if text else ""
    if first[:1].islower() and lookup(first.rstrip(",.:;")) is None:  # keep "npm", "iOS", "dbt" as written
        text = text[0].upper() + text[1:]
    return text


def is_noise(text: str) -> bool:
    """Questions, greetings, thanks, bare requests and fragments carry no fact."""
    words = text.split()
    if len(words) < MIN_WORDS or len(text) > MAX_SENTENCE_CHARS:
        return True
    if len(words) <= 4 and _ANAPHORA.search(text):
        return True  # "Don't upgrade it." means nothing without the sentence it was split from
    if text.rstrip().endswith("?") or _QUESTION_START.match(text) or _GREETING.match(text):
        return True
    return bool(_REQUEST_VERB.match(text) and not _SEQUENCE.search(text))


# --------------------------------------------------------------------------------------------
# Category rules
# --------------------------------------------------------------------------------------------

# Pseudo-categories resolved by context: an imperative rule or a style choice is a project
# convention when a project is given and a personal preference otherwise; "I use X" likewise.
_RULE_OR_PREFERENCE = "@rule_or_preference"
_TOOL_CHOICE = "@tool_choice"


@dataclass(frozen=True)
class Rule:
    category: str
    pattern: re.Pattern[str]
    tier: int = 1  # 1: an explicit cue (verb + subject); 2: a topical word, used only when no tier-1 cue fires
    needs_tech: bool = False  # fires only when the clause names a lexicon technology


def _rule(category: str, *alternatives: str, tier: int = 1, needs_tech: bool = False) -> Rule:
    """A rule whose pattern is any of ``alternatives`` (each a regex), matched case-insensitively."""
    return Rule(category, _rx("|".join(f"(?:{a})" for a in alternatives)), tier, needs_tech)


_I = r"i(?:'m| am)"
_WE = r"(?:we|we're|we are|we've|we have|the team|our team)"
_TECH_SUBJECT = r"(?:we|this project|the project|this repo|the repo|the app|it|they|our [\w-]+|the [\w-]+)"
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_ROLE = (
    r"(?:engineer|developer|dev|scientist|designer|manager|student|teacher|professor|doctor|nurse|"
    r"researcher|consultant|"
    r"founder|co-founder|architect|analyst|lead|cto|ceo|freelancer|contractor|intern|admin|administrator|sre|writer|"
    r"parent|father|mother|dad|mom|programmer|hacker|maintainer)"
)
_NUMBER_WORD = r"(?:\d+|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\w+teen|twenty|many|several|a few)"

# Ordered: among rules of the same tier, the earliest match in the clause wins, then the earlier rule.
RULES: tuple[Rule, ...] = (
    # --- procedural -------------------------------------------------------------------------
    _rule(
        "workflow",
        r"\b(?:my|our) (?:usual |normal |typical |daily |standard |own )?(?:workflow|routine|habit|process)\b",
    ),
    _rule(
        "workflow",
        r"\bi (?:usually|always|normally|typically|generally|tend to|often|regularly)\b"
        r"(?! (?:use|prefer|like|love|want|avoid|hate|go with|pick|choose|reach for|stick (?:to|with))\b)",
    ),
    _rule(
        "workflow",
        r"\bi do (?:most|all|much) of my\b",
        r"\bin the (?:mornings|evenings|afternoons|nights)\b",
        r"\bon (?:mondays|tuesdays|wednesdays|thursdays|fridays|weekends)\b",
    ),
    _rule(
        "workflow",
        r"\b(?:when(?:ever)?|every time|each time|before|after) i\b",
        r"^(?:before|after) (?:each|every|any)\b",
    ),
    _rule("workflow", rf"\bevery (?:other )?(?:morning|day|evening|night|week|sprint|month|release|{_WEEKDAY})\b"),
    _rule(
        "workflow",
        r"\b(?:sprints?|stand-?ups?|retros?|retrospectives?|pair programming|code reviews?|kanban)\b",
        tier=2,
    ),
    _rule("procedure", r"^(?:in order to|how to|to) (?!be honest|be fair|clarify)\w+[^,:;]{0,60}[,:]"),
    _rule(
        "procedure",
        r"\bfirst\b.*\bthen\b",
        r"\bthen\b.*\b(?:then|finally|after that)\b",
        r"\bsteps?(?: \d+| one)?:",
    ),
    _rule(
        "procedure",
        r"\b(?:how (?:we|i|to|you)|steps?|process|procedure|checklist|runbook|playbook)\b[^:]{0,60}:\s*\S[^;]*;",
    ),
    _rule(
        "procedure",
        r"^(?:when|whenever|if|once|after) [^,]{3,80}, (?:run|drain|restart|check|open|delete|"
        r"rerun|re-run|create|update|"
        r"bump|tag|push|roll|kill|ssh|reboot|clear|pause|stop|revert|rollback|page|call|notify)\b",
    ),
    _rule("procedure", r",\s*(?:and\s+)?(?:only\s+)?(?:then|finally|after that|afterwards)\b", tier=2),
    # --- working / episodic -------------------------------------------------------------------
    _rule(
        "task_context",
        rf"\b(?:{_I}|{_WE})\s+(?:currently\s+|now\s+|still\s+|just\s+)?(?:working on|trying to|"
        rf"fixing|migrating|debugging|"
        r"investigating|implementing|refactoring|preparing|porting|upgrading|rewriting|adding|setting up|looking into|"
        r"chasing|prototyping|designing|drafting|planning)\b",
    ),
    _rule(
        "task_context",
        r"\b(?:right now|currently|at the moment|this week|this sprint|this month|tonight)\b,?\s+(?:i|we|my|our)\b",
    ),
    _rule(
        "task_context",
        rf"\btoday,?\s+(?:{_I}|we're|we are)\b",
        rf"\b(?:{_I}|we're|we are) (?:halfway through|in the middle of|busy with|knee-deep in|deep in|stuck on the|"
        r"on the [\w-]+ (?:flow|page|ticket|bug|issue|feature|migration|epic|story))\b",
    ),
    _rule(
        "task_context",
        r"\b(?:my|our) (?:current )?(?:task|focus|goal|priority|ticket|job)\b (?:is|right now|this|for)\b",
    ),
    _rule(
        "decision",
        rf"\b(?:{_WE}|i|they)(?:\s+(?:have|had|just|finally|eventually|then))*\s*(?:decided|chose|"
        rf"picked|opted|settled|agreed|"
        r"went with|ended up|switched|replaced|standardi[sz]ed on|are going with|'re going with|"
        r"will go with|'ll go with|"
        r"'ll stick with|will stick with|are moving to|'re moving to|are keeping|'re keeping|are sticking with|"
        r"'re sticking with|are staying with|'re staying with|will keep|'ll keep|are dropping|'re dropping|will drop|"
        r"'ll drop|are going to use|'re going to use)\b",
    ),
    _rule("decision", rf"\b{_WE}\s+(?:just\s+|finally\s+)?moved (?:[\w-]+ ){{0,3}}?to\b"),
    _rule(
        "decision",
        r"\b(?:finally|eventually|then|and) (?:picked|chose|settled on|opted for|went with|decided on)\b",
    ),
    _rule(
        "decision",
        r"\b(?:decided|decision) to\b",
        r"\blet's (?:go|stick) with\b",
        r"\bgoing forward\b",
        r"\bfrom now on,? we\b",
    ),
    _rule(
        "interaction",
        r"\b(?:you|we)\s+(?:just\s+|finally\s+|already\s+)?(?:helped|fixed|found|debugged|tracked|"
        r"reindexed|paired|discussed|"
        r"reviewed|walked through|went through|set up|shipped|resolved|figured out|cleaned up|patched|rolled back|"
        r"talked about|looked at|solved|merged|caught|spotted|wrote|bumped|confirmed|ran|tried|traced|narrowed)\b",
    ),
    _rule(
        "interaction",
        r"\b(?:yesterday|earlier today|this morning|last night|last session|this session|last time|just now)\b",
        tier=2,
    ),
    _rule(
        "interaction",
        r"^thanks? (?:you )?for\b",
        r"\byou (?:were right|suggested|told me|mentioned|pointed out|recommended|showed me)\b",
        r"\b(?:that|this|it) (?:fixed|solved) it\b",
        r"\bfixed it\b",
    ),
    # --- semantic ----------------------------------------------------------------------------
    _rule(
        "preference",
        r"\bi (?:(?:really|strongly|much|generally|always|usually|never|do|don't|do not|absolutely|"
        r"just|also|still) ){0,2}"
        r"(?:prefer|like|love|enjoy|hate|dislike|detest|can't stand|cannot stand|favou?r)\b",
    ),
    _rule(
        "preference",
        r"\bi (?:don't|do not|never) (?:like|want|use|enjoy)\b",
        r"\bi(?:'d| would) (?:rather|prefer|like)\b",
    ),
    _rule(
        "preference",
        r"\bi (?:always|never|usually) (?:use|avoid|go with|pick|choose|reach for|stick to|stick with)\b",
        r"\b(?:my )?(?:favou?rite|preferred)\b",
        r"\bi'm (?:not )?a (?:big )?fan of\b",
    ),
    _rule(
        "preference",
        r"\bplease (?:always |never |don't |do not |stop |keep |avoid |use |no more |prefer |make sure |only )",
        r",\s*please[.!]*$",
    ),
    _rule(
        "preference",
        r"\bi find [\w\s-]{1,40}? (?:painful|annoying|hard|easier|easy|nicer|better|worse|confusing|distracting|"
        r"unreadable|ugly|noisy|useful|helpful)\b",
    ),
    _rule(
        "technical_skill",
        rf"\b{_I} (?:really |very |quite |pretty |fairly |reasonably |not )?(?:good|great|comfortable|"
        rf"proficient|fluent|"
        r"experienced|an expert|expert|strong|confident|familiar|new|a beginner|rusty|solid) (?:at|with|in)\b",
    ),
    _rule(
        "technical_skill",
        r"\bi (?:really |pretty |do )?know\b(?! (?:that|if|what|why|how|who|when|whether|it|this)\b)",
    ),
    _rule(
        "technical_skill",
        r"\bi(?:'ve| have) (?:been )?(?:writing|using|coding|programming|working with|done|built|shipped|maintained|"
        r"taught|used)\b.*\b(?:years?|professionally|a lot|extensively|since|companies|jobs)\b",
    ),
    _rule(
        "technical_skill",
        rf"\b{_I} (?:learning|studying|teaching myself|picking up|getting into|ramping up on)\b",
        r"\b(?:\d+|several|many) years of\b",
    ),
    _rule(
        "technical_skill",
        rf"\bfor (?:about |over |almost |nearly |more than )?{_NUMBER_WORD} years\b",
        r"\bsince (?:19|20)\d\d\b",
        needs_tech=True,
    ),
    _rule(
        "technical_skill",
        r"\bi (?:mostly |mainly |primarily |usually )?(?:write|code in|program in|develop in|can write|can read)\b",
        needs_tech=True,
    ),
    _rule(
        "personal_fact",
        r"\bmy name is\b",
        r"\bcall me\b",
        rf"\b{_I} called\b",
        rf"\b{_I} \d+ years old\b",
        r"\bi speak\b",
        r"\bmy native language\b",
    ),
    _rule(
        "personal_fact",
        r"\bi (?:live|grew up|was born|moved|relocated)\b",
        rf"\b{_I} (?:based|located|from)\b",
        r"\bi(?:'ve| have) (?:lived|worked)\b",
    ),
    _rule(
        "personal_fact",
        r"\bi(?:'ve| have) been (?:a|an) (?:[\w-]+ ){0,3}?(?:engineer|developer|dev|scientist|designer|manager|"
        r"consultant|architect|analyst|programmer)\b",
    ),
    _rule(
        "personal_fact",
        r"\bi (?:work|started|joined|left|lead)\b(?: [\w-]+){0,3}? (?:at|for|as|remotely|from|in)\b",
    ),
    _rule("personal_fact", r"\bi(?:'ve| have) been (?:leading|working|managing|running|living)\b"),
    _rule("personal_fact", rf"\b{_I} (?:a|an|the) (?:[\w-]+ ){{0,3}}?{_ROLE}\b"),
    _rule(
        "personal_fact",
        r"\bmy (?:wife|husband|partner|daughter|son|kids?|children|mom|mother|dad|father|brother|sister|dog|cat|family|"
        r"colleague|coworker|co-worker|manager|boss|team ?lead|friend|birthday|girlfriend|boyfriend|"
        r"working hours|hours|"
        r"timezone|time zone|hometown|pronouns|salary|commute|doctor|"
        r"(?:[\w-]+ )?(?:handle|username|user name|email|e-mail|phone number|address|nickname))\b",
    ),
    _rule(
        "personal_fact",
        rf"\b{_I} (?:not )?(?:vegetarian|vegan|allergic|lactose|gluten|diabetic|left-handed|colou?r-?blind|pregnant|"
        r"retired|married|single|deaf|blind|dyslexic|a morning person|a night owl)\b",
        r"\bi have (?:a|an|two|three|\d+) (?:[\w-]+ ){0,2}?(?:kids?|children|daughters?|sons?|dogs?|cats?|retrievers?|"
        r"puppy|puppies|pets?|parrots?|rabbits?|horses?|twins)\b",
    ),
    _rule("personal_fact", rf"\b{_I} (?:on|running)\b", needs_tech=True),
    # --- project -----------------------------------------------------------------------------
    _rule("dependency", r"\b(?:depend|depends|depending|rely|relies|relying) on\b", r"\b(?:pin|pins|pinned|pinning)\b"),
    _rule(
        "dependency",
        r"\b(?:can't|cannot|can not|mustn't) (?:go above|go past|go beyond|upgrade|move to|move past)\b",
        r"\bbreaks? (?:on|with|in) \w*\s*v?\d",
    ),
    _rule(
        "dependency",
        r"\b(?:stuck on|locked to|locked at|can't upgrade|cannot upgrade|don't upgrade|do not upgrade|must stay on|"
        r"have to stay on|stay on)\b",
    ),
    _rule("dependency", r"[\w\]]\s*(?:==|>=|<=|~=|!=|\^|<|>)\s*v?\d"),
    _rule(
        "dependency",
        r"\b\d+(?:\.\d+)*\+?\s+or (?:later|newer|higher|above|below|earlier|older)\b",
        r"\bat least (?:v(?:ersion)?\s*)?\d",
        needs_tech=True,
    ),
    _rule(
        "dependency",
        r"\b(?:needs?|requires?|breaks with|incompatible with|compatible with)\b[^,.;]{0,30}?\b\d+(?:\.\d+|\.x)+",
        needs_tech=True,
    ),
    _rule("dependency", r"\b\d+\.x\b", r"\b(?:library|package|dependency|dependencies|sdk|wheel|wheels)\b", tier=2),
    _rule(
        "convention",
        r"\b(?:our|the|team|project|code|naming|house) (?:convention|conventions|style guide|"
        r"guidelines?|rules?|standards?)\b",
        r"\bconventions? (?:is|are)\b",
    ),
    _rule("convention", r"\b(?:we|they) (?:always|never) \w+"),
    _rule(
        "convention",
        r"^(?:all|every|each|no) [\w-]+(?: [\w-]+)? (?:must|should|shall|are|is|have to|need to|"
        r"get|gets|go|goes|use|uses|"
        r"return|returns|live|lives|start|starts|end|ends|follow|follows|have|has)\b",
    ),
    _rule(_RULE_OR_PREFERENCE, r"^(?:never|always|don't|do not|avoid|make sure) \w+"),
    _rule(_RULE_OR_PREFERENCE, r"^(?:prefer|use|keep|stick to) \w+", tier=2),
    _rule(
        "convention",
        r"\b(?:snake_case|camelcase|pascalcase|kebab-case|commit messages?|branch names?|file names?|"
        r"filenames|pr titles?|"
        r"class names|function names|variable names|column names|table names|docstrings?|type hints)\b",
        r"\b(?:follow|follows|adhere to|stick to|conform to)\b",
        tier=2,
    ),
    _rule(
        _RULE_OR_PREFERENCE,
        r"\b(?:indentation|indent|tabs|spaces|line length|trailing commas|semicolons|single quotes|double quotes|"
        r"dark mode|light mode|theme)\b",
        tier=2,
    ),
    _rule(
        "architecture",
        r"\b(?:is|are) (?:split|divided|organi[sz]ed|structured|broken up|separated|layered) (?:into|in|as|by)\b",
        r"\bconsists? of\b",
        r"\bis (?:composed|made up) of\b",
        r"\b(?:is|as) a (?:monorepo|monolith|modular monolith)\b",
        r"\bmonorepo\b",
    ),
    _rule(
        "architecture",
        r"\b(?:reads? from|writes? (?:[\w-]+ ){0,2}(?:to|into)|talks? to|calls?|publish(?:es)?|consumes?|emits?|"
        r"subscribes? to|pushes (?:\w+ )?to|in front|behind (?:it|them|the)|lives? in|stored in|"
        r"pulls? from|forwards? to|proxies|sits? (?:behind|in front of)|go(?:es)? through|"
        r"pass(?:es)? through|go(?:es)? into|flows? (?:from|into|to)|lands?|owns?|exposes?|fronted by|"
        r"sharded|replicated|"
        r"source of truth|talks to)\b",
    ),
    _rule(
        "architecture",
        r"\b(?:microservices?|event-driven|hexagonal|cqrs|message bus|bff|layer|gateway|middleware)\b",
        tier=2,
    ),
    _rule("tech_stack", r"\b(?:our|the) (?:tech )?stack\b", r"\bstack is\b"),
    _rule(
        "tech_stack",
        r"(?:^|\b(?:the|our) )(?:backend|frontend|api|app|server|service|database|db|cache|queue|broker|ci|cd|pipeline|"
        r"infra|infrastructure|website|site|cli|client|mobile app|ui) (?:is|are|runs|is built|"
        r"is written|is hosted|lives)\b",
        needs_tech=True,
    ),
    _rule(
        "tech_stack",
        rf"\b{_TECH_SUBJECT}\s+(?:mainly |mostly |also |now |currently |only |still |don't |do not |no longer )?"
        r"(?:use|uses|are using|is using|used)\b",
        needs_tech=True,
    ),
    _rule(
        "tech_stack",
        r"\b(?:built|written|implemented|developed|made|making|building|writing) (?:(?:it|this|the [\w-]+) )?"
        r"(?:with|in|on|using)\b",
        needs_tech=True,
    ),
    _rule(
        "tech_stack",
        r"\b(?:runs?|running|hosted|deployed|deploys?|served) (?:on|to|in|with|from)\b",
        needs_tech=True,
    ),
    _rule(
        "tech_stack",
        r"\b(?:orchestrated|managed|powered|served|backed|handled|scheduled) (?:by|with|via|through)\b",
        needs_tech=True,
    ),
    _rule("tech_stack", r"\b(?:we|i) test (?:[\w-]+ ){0,2}(?:with|using|in)\b", needs_tech=True),
    _rule(_TOOL_CHOICE, r"\bi (?:mainly |mostly |also |now |still )?(?:use|am using|'m using)\b", needs_tech=True),
    _rule("tech_stack", r"\b(?:we|we're|we are|our|this project)\b", tier=2, needs_tech=True),
)

_FIRST_PERSON = _rx(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|we'd|we'll|us|our|ours)\b")
_MODAL = _rx(r"\b(?:always|never|must|mustn't|should|shouldn't|shall|only ever|at all times)\b")
_DEICTIC_START = _rx(r"^(?:the|this|that|these|those|it|it's|there|here|they|he|she|his|her|its|their|you)\b")
_GLOBAL_SCOPE = _rx(
    r"\b(?:in|across|for) (?:all|every|any) (?:of )?(?:my |our )?(?:projects?|repos?|repositories|codebases?|work)\b|"
    r"\beverywhere\b(?! in (?:the|this|our)\b)|\bregardless of (?:the )?project\b|\bno matter (?:the|which) project\b"
)


def _impersonal(text: str, has_tech: bool, project_id: str | None) -> str | None:
    """A statement no cue claims: in a project, a rule or a stack fact; else general knowledge."""
    if _FIRST_PERSON.search(text) or len(text.split()) < 5:
        return None
    if project_id and _MODAL.search(text):
        return "convention"
    if project_id and has_tech:
        return "tech_stack"
    if not _DEICTIC_START.match(text) and len(text.split()) >= 7:
        return "domain_knowledge"  # "In the EU, VAT is charged at the customer's country rate."
    return None


def classify(text: str, has_tech: bool, project_id: str | None) -> str | None:
    """The category of one clean clause, or None when no rule fires (the clause is not kept)."""
    best: tuple[int, int, int, str] | None = None  # (tier, position, order, category)
    for order, rule in enumerate(RULES):
        if rule.needs_tech and not has_tech:
            continue
        match = rule.pattern.search(text)
        if match is None:
            continue
        key = (rule.tier, match.start(), order, rule.category)
        if best is None or key < best:
            best = key
    if best is None:
        return _impersonal(text, has_tech, project_id)
    category = best[3]
    if category == _RULE_OR_PREFERENCE:
        return "convention" if project_id else "preference"
    if category == _TOOL_CHOICE:
        return "tech_stack" if project_id else "preference"
    return category


# --------------------------------------------------------------------------------------------
# Entities
# --------------------------------------------------------------------------------------------

_NON_TECH_TYPES = frozenset({"person", "place", "organization", "thing"})


@dataclass(frozen=True)
class Mention:
    start: int
    end: int
    name: str
    type: str
    tech: bool  # a lexicon technology or a named component: may take uses/depends_on/... relations


_CALENDAR = frozenset(
    {
        "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
        "january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
        "december", "today", "tomorrow", "yesterday",
    }
)
_NOT_NAMES = frozenset(
    {
        "i", "i'm", "i've", "i'd", "i'll", "ok", "okay", "yes", "no", "hi", "hello", "hey", "thanks", "please",
        "mr", "mrs", "ms", "dr", "the", "a", "an", "and", "or", "but", "so", "also",
    }
)
_TOKEN = re.compile(r"\S+")
_EDGE_PUNCT = "\"'`()[]{},.;:!?*\u201c\u201d\u2018\u2019"
_PERSON_CUE = _rx(
    r"\b(?:my (?:colleague|coworker|co-worker|friend|manager|boss|wife|husband|partner|daughter|son|brother|sister|mom|"
    r"mother|dad|father|teammate|team lead|lead|cto|ceo|mentor)|name is|call me|named|i'm|i am|with|ask|tell)\s+$"
)
_ORG_CUE = _rx(r"\b(?:at|for|joined|left)\s+$")
_PLACE_CUE = _rx(r"\b(?:in|from|near|(?:moved|move|moving|relocated|relocating) to)\s+$")
_WORK_CONTEXT = _rx(r"\b(?:work|works|working|worked|started|joined|job|employed|leading|engineer|developer|team)\b")
_BACKTICK = re.compile(r"`([A-Za-z0-9][\w.@/-]{0,60})`")
_QUOTED_NAME = _rx(r"\b(?:called|named)\s+[\"'\u201c\u2018]([^\"'\u201d\u2019]{1,60})[\"'\u201d\u2019]")


def _proper_names(text: str, taken: list[tuple[int, int]]) -> list[Mention]:
    def covered(a: int, b: int) -> bool:
        return any(a < y and x < b for x, y in taken)

    tokens: list[tuple[int, int, str, bool]] = []  # start, end, core, capitalised name token
    prev_raw = ""
    for match in _TOKEN.finditer(text):
        raw = match.group(0)
        core = raw.strip(_EDGE_PUNCT)
        if core.endswith("'s"):
            core = core[:-2]
        offset = match.start() + raw.find(core) if core else match.start()
        sentence_start = not tokens or prev_raw[-1:] in ".!?:;" or raw[:1] in "\"'(\u201c\u2018"
        is_name = (
            bool(core)
            and not sentence_start
            and core[0].isupper()
            and core.casefold() not in _NOT_NAMES
            and core.casefold().removesuffix("s") not in _CALENDAR
            and re.fullmatch(r"[A-Z][A-Za-z'&-]*", core) is not None
            and re.fullmatch(r"[A-Z]{2,}s?", core) is None  # acronyms: API, PRs, CET
            and not covered(offset, offset + len(core))
        )
        tokens.append((offset, offset + len(core), core, is_name))
        prev_raw = raw
    mentions: list[Mention] = []
    i = 0
    while i < len(tokens):
        if not tokens[i][3]:
            i += 1
            continue
        j = i
        # Join adjacent capitalised tokens ("Marta Kowalski", "Osteria Nonna") unless punctuation separates them.
        while (
            j + 1 < len(tokens)
            and j - i < MAX_NAME_TOKENS - 1
            and tokens[j + 1][3]
            and text[tokens[j][1] : tokens[j + 1][0]] == " "
        ):
            j += 1
        start, end = tokens[i][0], tokens[j][1]
        before = text[:start]
        if _PERSON_CUE.search(before):
            etype = "person"
        elif _ORG_CUE.search(before):
            etype = "organization"
        elif _PLACE_CUE.search(before):
            etype = "place"
        else:
            etype = "thing"
        mentions.append(Mention(start, end, text[start:end], etype, tech=False))
        i = j + 1
    return mentions


def find_mentions(text: str) -> list[Mention]:
    """Entity mentions in one clause, left to right, one per distinct name."""
    mentions: list[Mention] = []
    for start, end, term in find_terms(text):
        etype = term.type
        before = text[:start]
        if etype == "service" and _ORG_CUE.search(before) and _WORK_CONTEXT.search(before):
            etype = "organization"
        mentions.append(Mention(start, end, term.canonical, etype, tech=etype not in ("place", "standard")))
    taken = [(m.start, m.end) for m in mentions]
    for match in _BACKTICK.finditer(text):
        if not any(match.start() < y and x < match.end() for x, y in taken):
            after = text[match.end() : match.end() + 12].casefold()
            named_part = after.lstrip().startswith(("service", "api", "module", "package", "library"))
            etype = "service" if named_part else "thing"
            mentions.append(Mention(match.start(1), match.end(1), match.group(1), etype, tech=True))
            taken.append((match.start(), match.end()))
    for match in _QUOTED_NAME.finditer(text):
        if not any(match.start(1) < y and x < match.end(1) for x, y in taken):
            mentions.append(Mention(match.start(1), match.end(1), match.group(1).strip(), "thing", tech=True))
            taken.append((match.start(1), match.end(1)))
    mentions.extend(_proper_names(text, taken))
    mentions.sort(key=lambda m: m.start)
    seen: set[str] = set()
    unique: list[Mention] = []
    for m in mentions:
        key = m.name.casefold()
        if key not in seen and key not in (USER_ENTITY,):
            seen.add(key)
            unique.append(m)
    return unique[:MAX_ENTITIES - 1]  # leave room for the subject entity


# --------------------------------------------------------------------------------------------
# Relations
# --------------------------------------------------------------------------------------------

# Predicate a technology gets from the fact's category when no explicit cue governs it.
_DEFAULT_PREDICATE: dict[str, str | None] = {
    "tech_stack": "uses",
    "dependency": "depends_on",
    "technical_skill": "knows",
    "decision": "decided",
    "task_context": "works_on",
    "preference": "prefers",
    "workflow": "uses",
    "architecture": "uses",
    "convention": "uses",
    "procedure": "uses",
    "personal_fact": "uses",
    "interaction": None,
    "domain_knowledge": None,
}
def _cue(predicate: str, *alternatives: str) -> tuple[str, re.Pattern[str]]:
    return predicate, _rx("|".join(f"(?:{a})" for a in alternatives))


# Explicit cues, looked for in the text between the previous mention and this one.
_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    _cue("is_named", r"\b(?:my name is|call me|i'm called|i am called)\b"),
    _cue(
        "works_at",
        r"\b(?:work|works|working|worked|started|joined|employed|leading|lead|engineer|scientist|developer|manager|"
        r"intern)\b(?:\s+[\w-]+){0,4}?\s+(?:at|for)\b",
    ),
    _cue(
        "lives_in",
        r"\b(?:live|lives|living|based|located|moved|relocated|grew up|born)\b(?:\s+[\w-]+){0,2}?\s+(?:in|to|from)\b",
        r"\bremotely from\b",
    ),
    _cue(
        "dislikes",
        r"\b(?:hate|hates|dislike|dislikes|can't stand|cannot stand|don't like|do not like|not a fan of|"
        r"avoid|avoids)\b",
    ),
    _cue("prefers", r"\b(?:prefer|prefers|preferred|like|likes|love|loves|enjoy|enjoys|rather|favou?rite)\b"),
    _cue(
        "depends_on",
        r"\b(?:depend|depends|rely|relies|pin|pins|pinned|stuck on|locked to|stay on|needs?|requires?)\b",
    ),
    _cue(
        "switched_to",
        r"\b(?:switch|switched|switching|migrate|migrated|migrating|move|moved|moving|port|ported|porting|upgrade|"
        r"upgraded)\b[^,;.]*?\bto\b",
        r"\breplac\w*\b[^,;.]*?\b(?:with|by)\b",
    ),
    _cue(
        "decided",
        r"\b(?:decided|chose|choose|picked|went with|going with|opted for|settled on|agreed on)\b",
        r"\b(?:'ll|will|to|let's|we|i|they) go with\b",
    ),
    _cue(
        "deploys_to",
        r"\b(?:deploy|deploys|deployed|deploying|hosted|host|hosts|publish|publishes|published)\s+"
        r"(?:[\w-]+\s+){0,2}?(?:to|on)\b",
    ),
    _cue("tests_with", r"\b(?:test|tests|tested|testing)\s+(?:[\w-]+\s+){0,2}?(?:with|using)\b"),
)
_PERSONAL_PREDICATES = frozenset({"is_named", "works_at", "lives_in", "prefers", "dislikes", "knows"})
# Between a cue and a name, these mean the name is the rejected or negated one ("X over Y", "don't use Y").
_BLOCKER = _rx(
    r"\b(?:from|over|instead of|rather than|than|not|never|no|without|off|don't|do not|doesn't|does not|won't|"
    r"no longer|isn't|aren't)\b"
)
# The text between two names that makes the second share the first one's predicate ("X 2.1, Y and Z").
_COORDINATION = _rx(r"^(?:\s*v?[\d.x*]*\s*(?:[<>=~!^]=?\s*v?[\d.x*]+)?\s*(?:,|and|or|plus|&|/)\s*)+$")
_PREFERRED_OVER = _rx(r"^\s*(?:v?\d[\w.]*\s*)?(?:over|rather than|instead of|to)\b")
_REPLACED = _rx(
    r"\breplac(?:e|ed|es|ing)\s+(?P<old>.+?)\s+(?:with|by)\s+|"
    r"\b(?:switch|switched|switching|migrat\w+|mov(?:e|ed|ing)|port\w*)\s+(?:[\w-]+\s+){0,3}?from\s+(?P<old2>.+?)\s+to\s+"
)
_SINGULAR = _rx(r"\b(?:i|i'm|i've|i'd|i'll|me|my|myself)\b")
_PLURAL = _rx(r"\b(?:we|we're|we've|we'd|we'll|us|our|this project|this repo|the team)\b")
_PROJECT_GROUP = frozenset(name for name, info in CATEGORIES.items() if info.group == "project")


def _subject(text: str, category: str, project_id: str | None) -> str | None:
    plural, singular = _PLURAL.search(text), _SINGULAR.search(text)
    project = project_id or PROJECT_ENTITY
    if plural and (not singular or plural.start() < singular.start()):
        return project
    if singular:
        return USER_ENTITY
    if category in _PROJECT_GROUP:
        return project
    return None


# Single-valued settings (service/stores/graph.py SINGLE_VALUED_PREDICATES): a newer value
# replaces the older one in the graph, so they get their own predicates and a normalised object.
_INDENT_VALUE = _rx(r"\b(tabs|(?P<n>\d)[- ]?(?:space|spaces|spc))\b")
_INDENT_CONTEXT = _rx(r"\bindent\w*|\btabs\b")
_TIMEZONE = _rx(
    r"\b(?:time ?zone|tz)\s+(?:is\s+|=\s*)?(?:now\s+)?(?P<tz>[A-Za-z]+/[A-Za-z_]+|UTC\s?[+-]\s?\d{1,2}(?::\d\d)?|"
    r"GMT\s?[+-]\s?\d{1,2}|[A-Z]{2,5}T)\b"
)
_DATABASE_CONTEXT = _rx(r"\b(?:database|db)\b")
_NOT_PRIMARY_DB = _rx(r"\bcach\w*|\bqueue|\bbroker|\bsearch index|\banalytics\b")


def _single_valued(
    text: str, subject: str | None, mentions: list[Mention], add: Callable[[str, str, str], None]
) -> None:
    owner = subject or USER_ENTITY
    if _INDENT_CONTEXT.search(text) and (m := _INDENT_VALUE.search(text)) and not _BLOCKER.search(
        text[max(0, m.start() - 12) : m.start()]
    ):
        add(owner, "uses_indentation", "tabs" if m.group(1).casefold() == "tabs" else f"{m.group('n')} spaces")
    if (tz := _TIMEZONE.search(text)) is not None and owner == USER_ENTITY:
        add(USER_ENTITY, "has_timezone", re.sub(r"\s+", "", tz.group("tz")))
    if subject is not None and subject != USER_ENTITY and _DATABASE_CONTEXT.search(text) and not _NOT_PRIMARY_DB.search(
        text
    ):
        databases = [m for m in mentions if m.type == "database"]
        if databases:
            add(subject, "uses_database", databases[-1].name)


def find_relations(
    text: str, category: str, mentions: list[Mention], project_id: str | None
) -> list[ExtractedRelation]:
    subject = _subject(text, category, project_id)
    relations: list[ExtractedRelation] = []

    def add(subj: str, predicate: str, obj: str) -> None:
        if subj.casefold() != obj.casefold() and len(relations) < MAX_RELATIONS:
            relation = ExtractedRelation(subject=subj, predicate=predicate, object=obj, fact=text[:1000])
            if relation not in relations:
                relations.append(relation)

    carried: str | None = None
    prev_end = 0
    for index, mention in enumerate(mentions):
        gap = text[prev_end : mention.start]
        cue_end, predicate = -1, None
        for name, pattern in _CUES:
            for match in pattern.finditer(text, 0, mention.start):
                if prev_end < match.end() <= mention.start and match.end() > cue_end:
                    cue_end, predicate = match.end(), name
        if predicate is None and index > 0 and _COORDINATION.match(gap):
            predicate = carried
        blocked = bool(_BLOCKER.search(text[max(cue_end, prev_end) : mention.start]))
        prev_end = mention.end
        if predicate is None:
            predicate = _DEFAULT_PREDICATE[category]
        carried = predicate
        if blocked or predicate is None or subject is None:
            carried = None if blocked else carried
            continue
        personal = predicate in _PERSONAL_PREDICATES
        if personal and subject != USER_ENTITY:
            continue
        if predicate == "is_named" and mention.type != "person":
            continue
        if predicate == "works_at" and mention.type not in ("organization", "service", "thing"):
            continue
        if predicate == "lives_in" and mention.type not in ("place", "thing"):
            continue
        if predicate not in ("is_named", "works_at", "lives_in") and not mention.tech:
            continue
        if predicate == "prefers" and _PREFERRED_OVER.match(text[mention.end :]):
            predicate = "prefers_over"
        add(subject, predicate, mention.name)

    _single_valued(text, subject, mentions, add)

    # "replaced X with Y" / "switched from X to Y": X replaced_by Y.
    for match in _REPLACED.finditer(text):
        group = "old" if match.group("old") is not None else "old2"
        old = [m for m in mentions if match.start(group) <= m.start and m.end <= match.end(group) and m.tech]
        new = [m for m in mentions if m.start >= match.end() and m.tech][:1]
        for o in old:
            for n in new:
                add(o.name, "replaced_by", n.name)
    return relations


# --------------------------------------------------------------------------------------------
# Dates
# --------------------------------------------------------------------------------------------

_MONTHS = {
    name: index
    for index, names in enumerate(
        [("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",), ("jun", "june"),
         ("jul", "july"), ("aug", "august"), ("sep", "sept", "september"), ("oct", "october"), ("nov", "november"),
         ("dec", "december")],
        start=1,
    )
    for name in names
}
_MONTH = (
    r"(?P<month>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DATE_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<mnum>\d\d)-(?P<day>\d\d)\b"),
    _rx(rf"\b{_MONTH}\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<year>(?:19|20)\d\d)\b"),
    _rx(rf"\b(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\s+(?P<year>(?:19|20)\d\d)\b"),
    _rx(rf"\b{_MONTH}\s+(?:of\s+)?(?P<year>(?:19|20)\d\d)\b"),
    _rx(r"\b(?:in|since|from|as of|starting|until|during|early|late|mid-?)\s+(?P<year>(?:19|20)\d\d)\b"),
)


def find_date(text: str) -> str | None:
    """An explicit date in the clause as an ISO date; a month or a year gives its first day."""
    for pattern in _DATE_PATTERNS:
        for match in pattern.finditer(text):
            groups = match.groupdict()
            month_name = (groups.get("month") or "jan").casefold().rstrip(".")
            month = int(groups["mnum"]) if groups.get("mnum") else _MONTHS.get(month_name, 1)
            day = int(groups["day"]) if groups.get("day") else 1
            try:
                return date(int(groups["year"]), month, day).isoformat()
            except ValueError:
                continue
    return None


# --------------------------------------------------------------------------------------------
# The extractor
# --------------------------------------------------------------------------------------------


class OfflineExtractor:
    """Rule-based extractor behind the Extractor Protocol: deterministic, no I/O, no model."""

    name = "offline"

    def __init__(self, max_facts: int = 64) -> None:
        self.max_facts = max_facts

    async def extract(self, messages: list[Message], project_id: str | None = None) -> ExtractionResult:
        return ExtractionResult(facts=self.extract_sync(messages, project_id), extractor=self.name, usage=TokenUsage())

    def extract_sync(self, messages: list[Message], project_id: str | None = None) -> list[ExtractedFact]:
        facts: list[ExtractedFact] = []
        seen: set[str] = set()
        for message in messages:
            if message.role != "user":
                continue
            for sentence in split_sentences(message.content):
                for clause in split_clauses(sentence):
                    fact = self.fact_of(clean_clause(clause), project_id)
                    if fact is None:
                        continue
                    key = " ".join(fact.content.split()).casefold().rstrip(".!")
                    if key in seen:
                        continue
                    seen.add(key)
                    facts.append(fact)
                    if len(facts) >= self.max_facts:
                        return facts
        return facts

    @staticmethod
    def fact_of(text: str, project_id: str | None) -> ExtractedFact | None:
        """The fact one clean clause states, or None when it states none."""
        if is_noise(text):
            return None
        mentions = find_mentions(text)
        category = classify(text, any(m.tech and m.type not in _NON_TECH_TYPES for m in mentions), project_id)
        if category is None:
            return None
        relations = find_relations(text, category, mentions, project_id)
        entities = _entities(mentions, relations)
        return ExtractedFact(
            content=text[:2000],
            category=category,
            scope=Scope.GLOBAL if _GLOBAL_SCOPE.search(text) else None,
            entities=entities[:MAX_ENTITIES],
            relations=relations,
            valid_at=find_date(text),
        )


def graph_links(
    text: str, category: str, project_id: str | None
) -> tuple[list[ExtractedEntity], list[ExtractedRelation]]:
    """Entities and relations of one already-categorised statement (raw writes, updates).

    Raw writes skip the LLM by design (seed 001); their graph side still comes from these rules.
    """
    mentions = find_mentions(text)
    relations = find_relations(text, category, mentions, project_id)
    return _entities(mentions, relations), relations


def _entities(mentions: list[Mention], relations: list[ExtractedRelation]) -> list[ExtractedEntity]:
    """The mentions, plus every relation endpoint that is not one: the user, the project, or a
    setting value such as "4 spaces"."""
    entities = [ExtractedEntity(name=m.name, type=m.type) for m in mentions]
    known = {m.name for m in mentions}
    subjects = {r.subject for r in relations}
    for name in sorted(({r.subject for r in relations} | {r.object for r in relations}) - known):
        kind = "person" if name == USER_ENTITY else "project" if name in subjects else "setting"
        entities.append(ExtractedEntity(name=name, type=kind))
    return entities[:MAX_ENTITIES]


class RuleLinkFinder:
    """The LinkFinder of the offline rules (graph_links)."""

    name = "rules"

    def find(
        self, content: str, category: str, project_id: str | None
    ) -> tuple[list[ExtractedEntity], list[ExtractedRelation]]:
        return graph_links(content, category, project_id)
