"""Remove secrets from text before it leaves the machine.

Every string the hooks send (observation content and metadata) goes through `redact`. The rules
prefer over-redaction: a value that merely looks like a secret is replaced too. Each secret becomes
`[REDACTED]` (a private key block becomes `[REDACTED PRIVATE KEY]`); the name, header or flag in
front of it is kept so the observation still says what happened.

Covered, in this order:

1. private key blocks (`-----BEGIN ... PRIVATE KEY-----` to `-----END ...-----`, or to the end of the
   text when the end marker is missing, or from the start when only the end marker is present);
2. `.env`-style lines: `NAME=value` (optionally `export NAME=value`) at the start of a line, where
   NAME contains KEY, TOKEN, SECRET, PASSWORD, PASSWD, PWD or CREDENTIAL: the rest of the line;
3. credentials in URLs (`scheme://user:password@host`);
4. `Authorization:` / `Proxy-Authorization:` headers (the scheme word, e.g. `Bearer`, is kept),
   `X-Api-Key:`-style and `Cookie:` headers;
5. `Bearer <token>` anywhere;
6. well-known token shapes: `sk-...` (OpenAI/Anthropic style), Stripe `sk_live_`/`rk_test_`,
   GitHub `ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_`/`github_pat_`, this service's `msk_...` keys, GitLab
   `glpat-`, Slack `xox?-`, AWS access key ids (`AKIA...`, `ASIA...`), Google `AIza...`, npm `npm_`,
   Hugging Face `hf_`, JWTs;
7. `key=value` / `key: value` / `"key": "value"` where the key names a secret (api_key, apikey,
   access_key, secret, token, password, passwd, pwd, passphrase, credential, private_key), which also
   covers URL query strings (`?token=...`) and inline environment assignments;
8. command-line flags naming a secret followed by a value (`--password x`, `--token=x`,
   `--api-key x`, `--client-secret x`) and `-u user:password` / `--user user:password`;
9. any remaining long token mixing upper case, lower case and digits (32+ characters), which
   catches most random API keys (hex digests such as git SHAs have no upper case and are kept).

Names (of variables, keys, flags) are recognised up to 128 characters. Every rule is linear in the
length of the text; callers still redact only what they may show (see `observe.head_at_space`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

REDACTED = "[REDACTED]"
REDACTED_KEY = "[REDACTED PRIVATE KEY]"

# Every pattern below is linear in the length of the text: repeated character classes are either
# bounded or start only where the class begins (a lookbehind), and "does this name mean a secret?" is
# a second, separate test on the (bounded) name. Hooks run on arbitrary tool output, so a pattern that
# backtracks quadratically on a long run of letters would break the time budget.
_NOT_DONE = r"(?!\[REDACTED)"  # a value that is already a placeholder is left alone
_NAME_CHARS = r"A-Za-z0-9_.\-"

_SECRET_NAME = re.compile(
    r"(?i)api[_-]?key|apikey|access[_-]?key|secret|token|passw(?:or)?d|passwd|pwd|passphrase|credential"
    r"|private[_-]?key|auth[_-]?key"
)
_ENV_NAME = re.compile(r"(?i)key|token|secret|passw(?:or)?d|pwd|credential")
_FLAG_NAME = re.compile(r"(?i)(?:^|-)(?:password|passwd|pass|token|secret|api-?key|apikey|auth|credentials?)(?:-|$)")

_KEY_BLOCK = re.compile(
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY[A-Z0-9 ]{0,40}-----.*?"
    r"(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY[A-Z0-9 ]{0,40}-----|\Z)",
    re.S,
)
_KEY_TAIL = re.compile(r"\A.*?-----END[A-Z0-9 ]{0,40}PRIVATE KEY[A-Z0-9 ]{0,40}-----", re.S)

_ENV_LINE = re.compile(
    r"(?m)^([ \t]{0,40}(?:export[ \t]+)?)([A-Za-z_][" + _NAME_CHARS + r"]{0,127})([ \t]*=[ \t]*)"
    + _NOT_DONE + r"(\S[^\r\n]*)$"
)

_URL_CREDENTIALS = re.compile(
    r"(?i)(?<![a-z0-9+.\-])([a-z][a-z0-9+.\-]{0,31}://[^/\s:@]{1,256}:)" + _NOT_DONE + r"([^@\s/]{1,256})(@)"
)

_AUTH_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?)"
    r"(?:(bearer|basic|token|digest|negotiate|apikey|api-key)[ \t]+)?" + _NOT_DONE + r"([^\s\"',;]+)"
)
_KEY_HEADER = re.compile(
    r"(?i)\b((?:x-)?(?:api[-_]?key|auth[-_]?token|access[-_]?token|amz-security-token)[ \t]*:[ \t]*)"
    + _NOT_DONE + r"([^\s\"',;]+)"
)
_COOKIE_HEADER = re.compile(r"(?i)\b((?:set-)?cookie[ \t]*:[ \t]*)" + _NOT_DONE + r"([^\r\n\"']+)")

_BEARER = re.compile(r"(?i)\b(bearer[ \t]+)" + _NOT_DONE + r"([A-Za-z0-9\-._~+/]{6,}=*)")

_TOKEN_SHAPES = re.compile(
    "|".join(
        [
            r"\bsk-[A-Za-z0-9_\-]{6,}",
            r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{8,}",
            r"\bgh[pousr]_[A-Za-z0-9]{16,}",
            r"\bgithub_pat_[A-Za-z0-9_]{20,}",
            r"\bmsk_[A-Za-z0-9_\-]{8,}",
            r"\bglpat-[A-Za-z0-9_\-]{16,}",
            r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",
            r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b",
            r"\bAIza[0-9A-Za-z_\-]{35}",
            r"\bnpm_[A-Za-z0-9]{36}",
            r"\bhf_[A-Za-z0-9]{30,}",
            r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        ]
    )
)

_KEY_SEPARATOR = re.compile(r"(?<![" + _NAME_CHARS + r"])([" + _NAME_CHARS + r"]{1,128})([\"']?[ \t]*[=:][ \t]*)")
# A quoted value without its closing quote (cut-off output) is redacted to the end of the line.
_VALUE = re.compile(_NOT_DONE + r"(?!:)(\"[^\"\r\n]*\"?|'[^'\r\n]*'?|[^\s\"'&;,)}\]]+)")

_FLAG = re.compile(
    r"(?<![\w-])(--?[A-Za-z0-9][A-Za-z0-9\-]{0,63})(\s+|=)" + _NOT_DONE + r"(?!-)(\"[^\"]*\"|'[^']*'|\S+)"
)
_USER_PASSWORD = re.compile(
    r"(?<![\w-])(-u[ \t]+|--user[= \t]+)([\"']?[^:\s\"']{1,256}:)" + _NOT_DONE + r"([^\s\"']+)"
)

_LONG_TOKEN = re.compile(r"(?<![A-Za-z0-9_\-+/])[A-Za-z0-9_\-+/]{32,}={0,2}(?![A-Za-z0-9_\-+/])")


def _long_token(match: re.Match[str]) -> str:
    token = match.group(0)
    mixed = any(c.isupper() for c in token) and any(c.islower() for c in token) and any(c.isdigit() for c in token)
    return REDACTED if mixed and "/" not in token else token  # a path is not a token


def _auth_header(match: re.Match[str]) -> str:
    scheme = f"{match.group(2)} " if match.group(2) else ""
    return f"{match.group(1)}{scheme}{REDACTED}"


def _keep(*groups: int) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        return "".join(match.group(g) for g in groups) + REDACTED

    return replace


def _if_named(names: re.Pattern[str], name_group: int, *groups: int) -> Callable[[re.Match[str]], str]:
    """Redact the match's value only when its name (group `name_group`) means a secret."""

    def replace(match: re.Match[str]) -> str:
        if not names.search(match.group(name_group).lstrip("-")):
            return match.group(0)
        return "".join(match.group(g) for g in groups) + REDACTED

    return replace


def _key_values(text: str) -> str:
    """`name=value` / `name: value` whose name means a secret. A scan over `name<separator>` positions,
    so that a name that is not a secret never consumes its value (`url=https://x?token=...`)."""
    out: list[str] = []
    pos = 0
    for match in _KEY_SEPARATOR.finditer(text):
        if match.start() < pos or not _SECRET_NAME.search(match.group(1)):
            continue
        value = _VALUE.match(text, match.end())
        if value is None:
            continue
        out += [text[pos : match.end()], REDACTED]
        pos = value.end()
    return "".join(out) + text[pos:] if out else text


def redact(text: str) -> str:
    """`text` with every secret the rules above recognise replaced by a placeholder."""
    if not text:
        return text
    text = _KEY_BLOCK.sub(REDACTED_KEY, text)
    text = _KEY_TAIL.sub(REDACTED_KEY, text)
    text = _ENV_LINE.sub(_if_named(_ENV_NAME, 2, 1, 2, 3), text)
    text = _URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}{REDACTED}{m.group(3)}", text)
    text = _AUTH_HEADER.sub(_auth_header, text)
    text = _KEY_HEADER.sub(_keep(1), text)
    text = _COOKIE_HEADER.sub(_keep(1), text)
    text = _BEARER.sub(_keep(1), text)
    text = _TOKEN_SHAPES.sub(REDACTED, text)
    text = _key_values(text)
    text = _FLAG.sub(_if_named(_FLAG_NAME, 1, 1, 2), text)
    text = _USER_PASSWORD.sub(_keep(1, 2), text)
    return _LONG_TOKEN.sub(_long_token, text)
