"""The offline extractor's classifier: the category of one clean clause, by the rules of rules.py (the earliest
cue of the best tier wins), else an impersonal statement's category; and whether a clause says it holds in every
project (`GLOBAL_SCOPE`)."""

from __future__ import annotations

from service.ai.offline.rules import RULE_OR_PREFERENCE, RULES, TOOL_CHOICE
from service.ai.offline.text import rx

_STANCES = frozenset({"preference", RULE_OR_PREFERENCE})
_FIRST_PERSON = rx(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|we'd|we'll|us|our|ours)\b")
_MODAL = rx(r"\b(?:always|never|must|mustn't|should|shouldn't|shall|only ever|at all times)\b")
_DEICTIC_START = rx(r"^(?:the|this|that|these|those|it|it's|there|here|they|he|she|his|her|its|their|you)\b")
GLOBAL_SCOPE = rx(
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
    fired = []
    for order, rule in enumerate(RULES):
        if (rule.needs_tech and not has_tech) or (rule.no_tech and has_tech):
            continue
        match = rule.pattern.search(text)
        if match is not None:
            fired.append((order, rule, match.start()))
    # A frame ("When I fly ...") yields to a stance of its tier ("... I prefer window seats") wherever it is.
    stance = {rule.tier for _, rule, _ in fired if rule.category in _STANCES and not rule.frame}
    best: tuple[int, bool, int, int, str] | None = None  # (tier, yields, position, order, category)
    for order, rule, start in fired:
        key = (rule.tier, rule.frame and rule.tier in stance, start, order, rule.category)
        if best is None or key < best:
            best = key
    if best is None:
        return _impersonal(text, has_tech, project_id)
    category = best[4]
    if category == RULE_OR_PREFERENCE:
        return "convention" if project_id else "preference"
    if category == TOOL_CHOICE:
        return "tech_stack" if project_id else "preference"
    return category
