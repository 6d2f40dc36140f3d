"""The category rules of the offline extractor (ordered; the first that fires classifies a clause): a data table
(see docs/offline-extractor.md). The classifier over them is classify.py."""

from __future__ import annotations

import re
from dataclasses import dataclass

from service.ai.offline.text import rx

# convention when a project is given and a personal preference otherwise; "I use X" likewise.
RULE_OR_PREFERENCE = "@rule_or_preference"
TOOL_CHOICE = "@tool_choice"


@dataclass(frozen=True)
class Rule:
    category: str
    pattern: re.Pattern[str]
    tier: int = 1  # 1: an explicit cue (verb + subject); 2: a topical word, used only when no tier-1 cue fires
    needs_tech: bool = False  # fires only when the clause names a lexicon technology
    # A frame sets the circumstance ("When I fly ...", "Every morning ..."): it classifies only when no other cue of
    # its tier fires, wherever that cue is ("When I fly I prefer window seats" is a preference).
    frame: bool = False
    no_tech: bool = False  # fires only when the clause names no lexicon technology


def _rule(
    category: str, *alternatives: str, tier: int = 1, needs_tech: bool = False, frame: bool = False,
    no_tech: bool = False,
) -> Rule:
    """A rule whose pattern is any of ``alternatives`` (each a regex), matched case-insensitively."""
    return Rule(category, rx("|".join(f"(?:{a})" for a in alternatives)), tier, needs_tech, frame, no_tech)


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
# Choosing among options: "I always book first class", "I usually order the vegan menu" state a preference.
_CHOICE_VERB = (
    r"(?:use|avoid|go with|pick|choose|reach for|stick to|stick with|book|order|buy|get the|take the|ask for|sit|fly|"
    r"pay|drink|eat|opt for)"
)
# An amount of money, or a number per period: "150 euros", "$2,000", "1,450 a month", "40 pounds".
AMOUNT = (
    r"(?:[$\u20ac\u00a3\u00a5]\s?\d[\d,.]*\s?k?\b|\b\d[\d,.]*\s?k?\s*(?:euros?|eur|dollars?|usd|bucks|pounds?|gbp|quid|"
    r"francs?|chf|yen|kr|sek|nok|dkk|pln|zloty|rupees?|inr)\b|\b\d[\d,.]*\s+(?:a|an|per)\s+"
    r"(?:month|week|year|night|day|hour|person|head)\b)"
)
# Who an event is about (the user, the user and someone, the user's family or things), or a diary-style past verb.
_EVENT_SUBJECT = r"(?:\b(?:i|i'm|i've|i'll|we|we're|we've|we'll)\b|\b(?:my|our) [\w-]+|^(?:just )?[a-z]+ed\b)"
# Work words: an event of a codebase ("we deployed the fix yesterday") is not an event of the user's life.
_WORK_WORDS = (
    r"\b(?:fix|fixed|fixes|bug|bugs|deploy\w*|merg\w*|pr|prs|pull request|commit\w*|branch\w*|release\w*|ticket|"
    r"issue|migration|refactor\w*|tests?|build|builds|prod|production|staging|code|repo|pipeline|sprint|incident|"
    r"outage|server|database|endpoint|feature|rollout|hotfix|standup|stand-up)\b"
)
# A time a statement names: a day word, a weekday, "last/next/this ...", a date, a clock time, "N ... ago".
WHEN = (
    r"\b(?:yesterday|today|tonight|tomorrow|this (?:morning|afternoon|evening)|last night|"
    r"(?:last|next|this|coming) (?:week|weekend|month|year|summer|winter|spring|fall|autumn|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"(?:on )?(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)(?!s)|"
    r"\d+ (?:days?|weeks?|months?|years?) ago|a (?:week|month|year|while) ago|"
    r"in (?:a|an|two|three|\d+) (?:days?|weeks?|months?)|"
    r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]* \d{1,2}(?:st|nd|rd|th)?|"
    r"\d{1,2}(?:st|nd|rd|th)? (?:of )?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*|"
    r"on the \d{1,2}(?:st|nd|rd|th)|at \d{1,2}(?::\d\d)?\s?(?:am|pm)?(?!\s*%))\b"
)

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
        rf"(?! (?:prefer|like|love|want|hate|{_CHOICE_VERB})\b)",
    ),
    _rule("workflow", r"\bi do (?:most|all|much) of my\b"),
    _rule(
        "workflow",
        r"\bin the (?:mornings|evenings|afternoons|nights)\b",
        r"\bon (?:mondays|tuesdays|wednesdays|thursdays|fridays|weekends)\b",
        frame=True,
    ),
    _rule(
        "workflow",
        r"\b(?:when(?:ever)?|every time|each time|before|after) i\b",
        r"^(?:before|after) (?:each|every|any)\b",
        frame=True,
    ),
    _rule(
        "workflow", rf"\bevery (?:other )?(?:morning|day|evening|night|week|sprint|month|release|{_WEEKDAY})\b",
        frame=True,
    ),
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
    # An event of the user's life with its time: "I ran my first half marathon last Saturday", "Tom and I are
    # meeting on Friday", "our flight leaves at 7:40 on Thursday", "got promoted last week".
    _rule(
        "personal_fact",
        rf"^(?!.*{_WORK_WORDS})(?:.*?)(?:{_EVENT_SUBJECT}(?=.*{WHEN})|{WHEN}(?=.*{_EVENT_SUBJECT}))",
        tier=2,
        no_tech=True,
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
        rf"\bi (?:always|never|usually|generally|normally|typically|only) {_CHOICE_VERB}\b",
        r"\bi take my [\w-]+ (?:[\w-]+ )?(?:black|white|strong|weak|plain|neat|straight|with|without|rare|medium|"
        r"well[- ]done|hot|cold|iced)\b",
        # a budget or a limit with its amount: "my hotel budget is 150 euros a night", "keep it under $40"
        rf"\b(?:budget|limit|cap|max(?:imum)?|ceiling|spend|at most|no more than|under|below)\b[^.;]{{0,40}}?{AMOUNT}",
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
        r"colleague|coworker|co-worker|manager|boss|team ?lead|friend|birthday|girlfriend|boyfriend|cousin|aunt|uncle|"
        r"niece|nephew|grandma|grandpa|grandmother|grandfather|flatmate|roommate|neighbou?r|landlord|mentor|teammate|"
        r"working hours|hours|"
        r"timezone|time zone|hometown|pronouns|salary|commute|doctor|"
        r"(?:[\w-]+ )?(?:handle|username|user name|email|e-mail|phone number|address|nickname))\b",
    ),
    _rule(
        "personal_fact",
        r"\bi (?:don't|do not|never|no longer|can't|cannot) (?:eat|drink)\b",
        # an amount of one's own: "our rent is 1,450 a month", "my salary is $90k"
        rf"\b(?:my|our) (?!(?:[\w-]+ ){{0,2}}(?:budget|limit|cap|max)\b)[\w-]+(?: [\w-]+){{0,2}} "
        rf"(?:is|are|was|were|costs?|comes to|runs)\b[^.;]{{0,30}}?{AMOUNT}",
    ),
    _rule(
        "personal_fact",
        rf"\b{_I} (?:not )?(?:vegetarian|vegan|allergic|lactose|gluten|diabetic|left-handed|colou?r-?blind|pregnant|"
        r"retired|married|single|deaf|blind|dyslexic|a morning person|a night owl)\b",
        r"\bi have (?:a|an|two|three|\d+) (?:[\w-]+ ){0,2}?(?:kids?|children|daughters?|sons?|dogs?|cats?|retrievers?|"
        r"puppy|puppies|pets?|parrots?|rabbits?|horses?|twins)\b",
    ),
    # what the user works on: "I work on a project called Atlas"
    _rule("personal_fact", r"\bi(?:'m| am)? (?:work|working) on (?:a |an |the |our |my )?(?:[\w-]+ )?"
                           r"(?:project|app|service|product|codebase|library) (?:called|named)\b"),
    # a health fact: "I have a peanut allergy", "I've got asthma"
    _rule("personal_fact", r"\bi (?:have|'ve got|have got|live with) (?:an? )?(?:severe |mild |bad |slight )?"
                           r"(?:[\w-]+ ){0,2}?(?:allerg(?:y|ies)|intolerance|asthma|diabetes|migraines?|celiac|coeliac|"
                           r"adhd|arthritis|epilepsy|eczema|tinnitus|a heart condition)\b"),
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
    _rule(RULE_OR_PREFERENCE, r"^(?:never|always|don't|do not|avoid|make sure) \w+"),
    _rule(RULE_OR_PREFERENCE, r"^(?:prefer|use|keep|stick to) \w+", tier=2),
    _rule(
        "convention",
        r"\b(?:snake_case|camelcase|pascalcase|kebab-case|commit messages?|branch names?|file names?|"
        r"filenames|pr titles?|"
        r"class names|function names|variable names|column names|table names|docstrings?|type hints)\b",
        r"\b(?:follow|follows|adhere to|stick to|conform to)\b",
        tier=2,
    ),
    _rule(
        RULE_OR_PREFERENCE,
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
    # a named project's stack: "Atlas is a Flask app with a PostgreSQL database"
    _rule("tech_stack", r"^[A-Z][\w.-]* (?:is|was) (?:a|an) (?:[\w.+#-]+ ){0,3}?(?:app|application|service|api|backend|"
                        r"frontend|site|website|project|library|cli|tool|monorepo|repo)\b", needs_tech=True),
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
    _rule(TOOL_CHOICE, r"\bi (?:mainly |mostly |also |now |still )?(?:use|am using|'m using)\b", needs_tech=True),
    _rule("tech_stack", r"\b(?:we|we're|we are|our|this project)\b", tier=2, needs_tech=True),
)
