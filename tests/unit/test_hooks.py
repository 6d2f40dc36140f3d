"""The Claude Code hooks without any service: observations, redaction, skipped tools, project ids,
state files, the commands' output and bodies (with the HTTP layer stubbed or a stub server in a
thread), malformed stdin, and the plugin files."""

from __future__ import annotations

import http.server
import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service.hooks import client, commands, state
from service.hooks.observe import SKIPPED_TOOLS, command_key, observe, redact_command
from service.hooks.project import normalize_id, origin_url, repo_name, resolve_project_id
from service.hooks.redact import REDACTED, redact
from service.hooks.settings import HookSettings

ROOT = Path(__file__).resolve().parents[2]
PAYLOADS = ROOT / "tests" / "data" / "hooks"
RECORDED_ROOT = "/home/dev/projects/shop-api"


def payload(name: str, root: str = RECORDED_ROOT) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((PAYLOADS / name).read_text().replace(RECORDED_ROOT, root))
    return data


def bash(command: str, stdout: str = "", stderr: str = "", **extra: Any) -> dict[str, Any]:
    return {
        "hook_event_name": "PostToolUse", "tool_name": "Bash", "cwd": RECORDED_ROOT,
        "tool_input": {"command": command, **extra},
        "tool_response": {"stdout": stdout, "stderr": stderr, "interrupted": False, "isImage": False},
    }


def failed_bash(command: str, error: str) -> dict[str, Any]:
    return {"hook_event_name": "PostToolUseFailure", "tool_name": "Bash", "cwd": RECORDED_ROOT,
            "tool_input": {"command": command}, "error": error, "is_interrupt": False}


# ------------------------------------------------------------------------------------ observations


def test_recorded_payloads_become_one_line_observations() -> None:
    expected = {
        "post_tool_use_edit.json": ("Edited service/api/search.py: added after, before", "edit:service/api/search.py"),
        "post_tool_use_write.json": ("Wrote new file tests/test_search_window.py (5 lines)",
                                     "write:tests/test_search_window.py"),
        "post_tool_use_bash_ok.json": ("Ran git status --short: ok", "bash:git status"),
        "post_tool_use_bash_secret.json": ('Ran curl -sS -H "Authorization: Bearer [REDACTED]"', "bash:curl"),
        "post_tool_use_failure_bash_pytest.json": ("Ran pytest -q tests/test_search.py: 3 failed, 7 passed (exit 1)",
                                                   "bash:pytest"),
        "post_tool_use_webfetch.json": ("Fetched https://docs.python.org/3/library/http.client.html",
                                        "fetch:docs.python.org"),
    }
    for name, (start, fold_key) in expected.items():
        event = payload(name)
        obs = observe(event, event["cwd"])
        assert obs is not None, name
        assert obs.content.startswith(start), (name, obs.content)
        assert obs.fold_key == fold_key, (name, obs.fold_key)
        assert obs.tool == event["tool_name"]
        assert "\n" not in obs.content and len(obs.content) <= 500


def test_edit_names_what_changed_and_counts_lines() -> None:
    event = payload("post_tool_use_edit.json")
    obs = observe(event, event["cwd"])
    assert obs is not None
    assert obs.content == "Edited service/api/search.py: added after, before, datetime (+2/-0 lines)"

    renamed = {"tool_name": "Edit", "tool_input": {
        "file_path": "/p/app.py", "old_string": "def load(path):\n    return read(path)\n",
        "new_string": "def load_config(path):\n    return read(path)\n"}}
    obs = observe(renamed, "/p")
    assert obs is not None
    assert obs.content == "Edited app.py: added function load_config; removed function load (+1/-1 lines)"

    multi = {"tool_name": "MultiEdit", "tool_input": {"file_path": "/p/a.js", "edits": [
        {"old_string": "let x = 1", "new_string": "let x = 2"},
        {"old_string": "foo()", "new_string": "foo(retries)"}]}}
    obs = observe(multi, "/p")
    assert obs is not None and obs.content.startswith("Edited a.js (2 edits): added retries")

    everywhere = {"tool_name": "Edit", "tool_input": {"file_path": "/elsewhere/b.py", "old_string": "a  =  1",
                                                      "new_string": "a = 1", "replace_all": True}}
    obs = observe(everywhere, "/p")
    assert obs is not None
    assert obs.content == "Edited /elsewhere/b.py (all occurrences): reworded (+1/-1 lines)"


def test_edit_of_secret_file_records_the_path_only() -> None:
    event = {"tool_name": "Edit", "tool_input": {"file_path": "/p/.env", "old_string": "STRIPE_KEY=old_value_1",
                                                 "new_string": "STRIPE_KEY=new_value_2"}}
    obs = observe(event, "/p")
    assert obs is not None
    assert obs.content == "Edited .env: content not recorded"
    assert "value" not in obs.content


def test_edit_never_leaks_fragments_of_a_secret() -> None:
    event = {"tool_name": "Edit", "tool_input": {"file_path": "/p/settings.py", "old_string": "KEY = None",
                                                 "new_string": "KEY = 'sk-live-Zq81abcdefXYZ987'"}}
    obs = observe(event, "/p")
    assert obs is not None
    for fragment in ("Zq81", "abcdefXYZ987", "sk-live"):
        assert fragment not in obs.content


def test_write_counts_lines() -> None:
    event = {"tool_name": "Write", "tool_input": {"file_path": "/p/a.txt", "content": "one\ntwo"},
             "tool_response": {"type": "update", "filePath": "/p/a.txt"}}
    obs = observe(event, "/p")
    assert obs is not None and obs.content == "Wrote a.txt (2 lines)"
    empty = {"tool_name": "Write", "tool_input": {"file_path": "/p/b.txt", "content": ""}}
    obs = observe(empty, "/p")
    assert obs is not None and obs.content == "Wrote b.txt (0 lines)"


@pytest.mark.parametrize(
    ("event", "content"),
    [
        (bash("git status"), "Ran git status: ok"),
        (bash("pytest -q", stdout="....\n4 passed in 0.10s"), "Ran pytest -q: 4 passed"),
        (bash("npm test", stdout="Tests:       1 failed, 3 passed, 4 total", exit_code=1),
         "Ran npm test: Tests: 1 failed, 3 passed, 4 total"),
        (failed_bash("make build", "Exit code 2\ncc: error: missing.c: No such file"),
         "Ran make build: exit 2: cc: error: missing.c: No such file"),
        (failed_bash("pytest -q", "Exit code 1\nF.\n=== 1 failed, 1 passed in 0.2s ==="),
         "Ran pytest -q: 1 failed, 1 passed (exit 1)"),
        (failed_bash("false", "Exit code 1"), "Ran false: exit 1"),
        (failed_bash("./run", "spawn failed"), "Ran ./run: failed: spawn failed"),
        (bash("npm run dev", run_in_background=True), "Ran npm run dev: started in background"),
        ({**bash("sleep 100"), "tool_response": {"stdout": "", "interrupted": True}}, "Ran sleep 100: interrupted"),
        ({**bash("ls"), "tool_response": "a\nb"}, "Ran ls: ok"),
    ],
)
def test_bash_outcomes(event: dict[str, Any], content: str) -> None:
    obs = observe(event, RECORDED_ROOT)
    assert obs is not None
    assert obs.content == content


def test_bash_failure_output_is_redacted() -> None:
    event = failed_bash("./deploy.sh", "Exit code 1\nconnecting to postgres://app:hunter2@db:5432/shop failed")
    obs = observe(event, RECORDED_ROOT)
    assert obs is not None
    assert "hunter2" not in obs.content and "postgres://app:[REDACTED]@db" in obs.content


def test_huge_inputs_stay_fast_and_never_show_a_cut_secret() -> None:
    started = time.monotonic()
    huge = "x" * 2_000_000
    assert observe(bash("echo " + huge, stdout=huge), RECORDED_ROOT) is not None
    assert observe({"tool_name": "Edit", "tool_input": {"file_path": "/p/a", "old_string": "\n\n" * 200_000,
                                                        "new_string": "a\n" * 200_000}}, "/p") is not None
    assert redact("token" * 200_000 + " a." * 300_000) != ""
    assert time.monotonic() - started < 5  # linear: ~1 s on a slow machine; quadratic would be hours
    spaced = "curl " + " " * 3990 + "-H 'Authorization: Bearer sk-live-0123456789abcdef'"
    obs = observe(bash(spaced), RECORDED_ROOT)
    assert obs is not None and "sk-live" not in obs.content and "0123456789" not in obs.content
    assert redact('password="my secret phrase') == f"password={REDACTED}"


def test_long_commands_and_outputs_are_trimmed() -> None:
    obs = observe(failed_bash("echo " + "x" * 2000, "Exit code 1\n" + "y" * 5000), RECORDED_ROOT)
    assert obs is not None
    assert obs.content == "Ran echo " + "x" * 194 + "…: exit 1"  # a line cut by the tail window is dropped
    obs = observe(failed_bash("run", "Exit code 1\nstart\n" + "y" * 300), RECORDED_ROOT)
    assert obs is not None
    assert obs.content == "Ran run: exit 1: " + "y" * 159 + "…"
    obs = observe({"tool_name": "Agent", "tool_input": {"subagent_type": "t" * 100, "description": "d" * 900}})
    assert obs is not None and len(obs.content) <= 500


@pytest.mark.parametrize(
    ("command", "key"),
    [
        ("git status --short", "git status"),
        ("git -C x log", "git"),
        ("cd /tmp && npm run build", "npm run"),
        ("FOO=1 TOKEN=abc pytest -q tests/", "pytest"),
        ("sudo -E apt-get install -y jq", "apt-get install"),
        ("timeout 5 python -m pytest -x", "python -m pytest"),
        ("/usr/bin/env", "env"),
        ("", "command"),
        ("curl -H 'Authorization: Bearer sk-abcdefabcdef' https://x", "curl"),
        ("echo 'unbalanced", "echo"),
    ],
)
def test_command_fold_keys(command: str, key: str) -> None:
    assert command_key(command) == key


def test_leading_environment_assignments_keep_the_command() -> None:
    assert redact_command("API_KEY=abc123 DEBUG=1 npm start") == f"API_KEY={REDACTED} DEBUG=1 npm start"
    obs = observe(bash("GITHUB_TOKEN=ghp_0123456789abcdefghijklmnop gh pr list"), RECORDED_ROOT)
    assert obs is not None
    assert obs.content == f"Ran GITHUB_TOKEN={REDACTED} gh pr list: ok"
    assert obs.fold_key == "bash:gh pr"


def test_web_and_other_tools() -> None:
    fetch = {"tool_name": "WebFetch", "tool_input": {"url": "https://bob:pw@example.com:8443/a/b?token=t#frag"},
             "tool_response": {"code": 404, "codeText": "Not Found"}}
    obs = observe(fetch)
    assert obs is not None
    assert obs.content == "Fetched https://example.com:8443/a/b (HTTP 404)"
    assert obs.fold_key == "fetch:example.com"

    search = observe({"tool_name": "WebSearch", "tool_input": {"query": "fastapi lifespan api_key=abc"}})
    assert search is not None and search.content == f'Searched the web for "fastapi lifespan api_key={REDACTED}"'

    agent = observe({"tool_name": "Agent", "tool_input": {"subagent_type": "Explore", "description": "Find routes",
                                                          "prompt": "password=hunter2"}})
    assert agent is not None and agent.content == "Ran subagent Explore: Find routes"
    assert agent.fold_key == "task:Explore"

    notebook = observe(
        {"tool_name": "NotebookEdit", "tool_input": {"notebook_path": "/p/n.ipynb", "edit_mode": "insert"}}, "/p"
    )
    assert notebook is not None and notebook.content == "Edited notebook n.ipynb (insert cell)"

    mcp = observe({"tool_name": "mcp__github__create_issue", "tool_input": {"title": "x"}})
    assert mcp is not None and mcp.content == "Called MCP tool github/create_issue"
    assert observe({"tool_name": "mcp__plugin_memory-platform_memory__remember", "tool_input": {}}) is None

    other = observe({"tool_name": "SlashCommand", "tool_input": {"path": "/p/docs"}}, "/p")
    assert other is not None and other.content == "Used SlashCommand on docs"

    failed_edit = observe({"hook_event_name": "PostToolUseFailure", "tool_name": "Edit",
                           "tool_input": {"file_path": "/p/a.py", "old_string": "x", "new_string": "y"},
                           "error": "String to replace not found in file."}, "/p")
    assert failed_edit is not None
    assert failed_edit.content == "Edit failed on a.py: String to replace not found in file."


# --------------------------------------------------------------------------------------- skipping


@pytest.mark.parametrize("tool", sorted(SKIPPED_TOOLS))
def test_noisy_tools_are_skipped(tool: str) -> None:
    assert observe({"tool_name": tool, "tool_input": {"file_path": "/p/a.py"}, "tool_response": {}}) is None


@pytest.mark.parametrize("name", ["post_tool_use_read.json", "post_tool_use_grep.json"])
def test_recorded_read_and_grep_are_skipped(name: str) -> None:
    assert observe(payload(name)) is None


@pytest.mark.parametrize("event", [{}, {"tool_name": 3}, {"tool_name": ""}, {"tool_name": "Bash", "tool_input": 7},
                                   {"tool_name": "Bash", "tool_input": {"command": "  "}}])
def test_events_that_are_not_tool_calls(event: dict[str, Any]) -> None:
    assert observe(event) is None


# -------------------------------------------------------------------------------------- redaction

SECRETS = [
    ("bearer token", 'curl -H "Authorization: Bearer sk-live-abc123def456ghi789"', "sk-live-abc123def456ghi789"),
    ("bearer word alone", "token was Bearer abcdef0123456789xyz", "abcdef0123456789xyz"),
    ("authorization basic", "Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    ("authorization raw", "authorization=opaque-value-42", "opaque-value-42"),
    ("x-api-key header", "curl -H 'X-API-Key: 9f8e7d6c5b4a'", "9f8e7d6c5b4a"),
    ("cookie header", "Cookie: sessionid=s3ss10n; csrftoken=abc", "s3ss10n"),
    ("api_key=", "deploy --region eu api_key=abcd1234efgh", "abcd1234efgh"),
    ("apikey:", "apikey: qwerty-123", "qwerty-123"),
    ("token= in a query", "GET https://x.io/v1?token=tok_9988&q=1", "tok_9988"),
    ("password=", "mysql password=hunter2 -h db", "hunter2"),
    ('"password": json', '{"user": "bob", "password": "correct horse battery"}', "correct horse battery"),
    ("client_secret=", "client_secret='s3cr3t value'", "s3cr3t value"),
    ("--password x", "psql --password hunter2 -h db", "hunter2"),
    ("--password=x", "psql --password=hunter2", "hunter2"),
    ("--api-key x", "tool --api-key k-12345 --verbose", "k-12345"),
    ("--token x", 'gh auth login --token "gho_abc"', "gho_abc"),
    ("-u user:password", "curl -u admin:pa55word http://localhost", "pa55word"),
    ("url credentials", "git remote add origin https://me:p4ss@git.example.com/r.git", "p4ss"),
    ("aws access key id", "aws_access_key_id AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("aws secret key", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("sk- token", "using sk-ant-api03-AbCdEf123456 now", "sk-ant-api03-AbCdEf123456"),
    ("stripe key", "key sk_live_51HabcdefGHIJ", "sk_live_51HabcdefGHIJ"),
    ("ghp_ token", "push with ghp_abcdefghijklmnopqrstuv0123", "ghp_abcdefghijklmnopqrstuv0123"),
    ("github_pat_", "github_pat_11ABCDEFG0123456789_abcdefghij", "github_pat_11ABCDEFG0123456789_abcdefghij"),
    ("msk_ key", "curl -H 'X-Other: msk_0a1b2c3d4e5f_SeCrEtPaRt'", "msk_0a1b2c3d4e5f_SeCrEtPaRt"),
    ("slack token", "xoxb-123456789012-abcdefghij", "xoxb-123456789012-abcdefghij"),
    ("google key", "AIzaSyA1234567890abcdefghijklmnopqrstuv", "AIzaSyA1234567890abcdefghijklmnopqrstuv"),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
     "eyJzdWIiOiIxMjM0NTY3ODkwIn0"),
    ("private key block", "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAzQ\nAbC==\n-----END RSA PRIVATE KEY-----",
     "MIIEpAIBAAKCAQEAzQ"),
    ("unterminated key block", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA",
     "b3BlbnNzaC1rZXktdjEAAAA"),
    ("key block tail only", "b3BlbnNzaC1rZXkt\n-----END OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXkt"),
    (".env line", "DATABASE_PASSWORD=my secret phrase", "my secret phrase"),
    (".env export line", "export SERVICE_TOKEN=t0k3n-value", "t0k3n-value"),
    (".env lines in output", "HOST=db\nSTRIPE_SECRET_KEY=whsec_123\nPORT=5432", "whsec_123"),
    ("long random token", "id QWErty1234567890abcdefGHIJKLmnop", "QWErty1234567890abcdefGHIJKLmnop"),
]


@pytest.mark.parametrize(("kind", "text", "secret"), SECRETS, ids=[s[0] for s in SECRETS])
def test_every_secret_kind_is_redacted(kind: str, text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out, (kind, out)
    assert "[REDACTED" in out, (kind, out)


def test_redaction_keeps_what_is_not_secret() -> None:
    kept = [
        "git log 3f786850e387550fdab836ed7e6dc881de23001b",
        "pytest tests/test_tokens.py::test_refresh -q",
        "Edited /home/u/MyProject2024/src/ComponentsDir/Widget.tsx",
        "HOST=db PORT=5432 make run",
        "3 failed, 7 passed",
    ]
    for text in kept:
        assert redact(text) == text
    assert redact("export OPENAI_API_KEY=sk-proj-abc123456") == f"export OPENAI_API_KEY={REDACTED}"
    assert redact('-H "Authorization: Bearer abc.def-123456"') == f'-H "Authorization: Bearer {REDACTED}"'
    assert redact(redact("password=hunter2")) == f"password={REDACTED}"


# ------------------------------------------------------------------------------------ project ids


def test_normalize_id_follows_the_api_rules() -> None:
    assert normalize_id("shop-api") == "shop-api"
    assert normalize_id("  My Project (v2)!  ") == "My-Project-v2"
    assert normalize_id("..hidden") == "hidden"
    assert normalize_id("a/b\\c") == "a-b-c"
    assert normalize_id("x" * 300) == "x" * 128
    assert normalize_id("日本語") is None
    assert normalize_id("") is None and normalize_id(None) is None
    assert normalize_id("user@host:repo.v1") == "user@host:repo.v1"


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("git@github.com:acme/shop-api.git", "shop-api"),
        ("https://github.com/acme/shop-api.git/", "shop-api"),
        ("https://gitlab.example.com/group/sub/tool", "tool"),
        ("ssh://git@host:2222/acme/repo.git", "repo"),
        ("git@host:repo.git", "repo"),
        ("/srv/git/local-repo.git", "local-repo"),
    ],
)
def test_repo_name_from_remote_urls(url: str, name: str) -> None:
    assert repo_name(url) == name


def test_origin_url_from_git_config() -> None:
    config = """[core]
\trepositoryformatversion = 0
[remote "upstream"]
\turl = git@github.com:other/fork.git
[remote "origin"]
\turl = "git@github.com:acme/shop-api.git"
\tfetch = +refs/heads/*:refs/remotes/origin/*
\tfetch = +refs/tags/*:refs/tags/*
[branch "main"]
\tremote = origin
"""
    assert origin_url(config) == "git@github.com:acme/shop-api.git"
    assert origin_url("[core]\n\tbare = false\n") is None


def _git_repo(top: Path, url: str | None) -> None:
    (top / ".git").mkdir(parents=True)
    remote = f'[remote "origin"]\n\turl = {url}\n' if url else ""
    (top / ".git" / "config").write_text("[core]\n\tbare = false\n" + remote)


def test_project_id_resolution_order(tmp_path: Path) -> None:
    top = tmp_path / "checkout dir"
    deep = top / "src" / "pkg"
    deep.mkdir(parents=True)
    _git_repo(top, "git@github.com:acme/shop-api.git")

    assert resolve_project_id(deep) == "shop-api"  # 3. the git remote's repository name
    (top / "src" / ".memory-project").write_text("\n# a comment\n  Billing Service  \nignored\n")
    assert resolve_project_id(deep) == "Billing-Service"  # 2. the nearest .memory-project file
    assert resolve_project_id(deep, "explicit/id") == "explicit-id"  # 1. MEMORY_PROJECT_ID
    assert resolve_project_id(top) == "shop-api"  # the file is below top: not seen from there


def test_project_id_without_remote_is_the_work_tree_name(tmp_path: Path) -> None:
    top = tmp_path / "my repo"
    (top / "a").mkdir(parents=True)
    _git_repo(top, None)
    assert resolve_project_id(top / "a") == "my-repo"  # 4. the directory name (the work tree's top)
    plain = tmp_path / "plain.dir"
    plain.mkdir()
    assert resolve_project_id(plain) == "plain.dir"


def test_project_id_from_a_worktree_git_file(tmp_path: Path) -> None:
    main = tmp_path / "main"
    _git_repo(main, "https://github.com/acme/ledger.git")
    worktree_git = main / ".git" / "worktrees" / "feature"
    worktree_git.mkdir(parents=True)
    (worktree_git / "commondir").write_text("../..\n")
    feature = tmp_path / "feature"
    feature.mkdir()
    (feature / ".git").write_text(f"gitdir: {worktree_git}\n")
    assert resolve_project_id(feature) == "ledger"


def test_project_id_of_a_directory_without_a_valid_name(tmp_path: Path) -> None:
    odd = tmp_path / "日本"
    odd.mkdir()
    assert resolve_project_id(odd) is None
    (odd / ".memory-project").write_text("!!!\n")
    assert resolve_project_id(odd) is None


# -------------------------------------------------------------------------------------- settings


def test_settings_from_env() -> None:
    s = HookSettings.from_env({}, env_file=None)
    assert (s.url, s.api_key, s.user_id, s.project_id, s.context_chars) == ("http://127.0.0.1:8199", None, None,
                                                                             None, 4000)
    s = HookSettings.from_env({"MEMORY_API_URL": "http://127.0.0.1:9000/", "MEMORY_CONTEXT_CHARS": "50000",
                               "MEMORY_USER_ID": " alice ", "MEMORY_API_KEY": "", "MEMORY_HOOKS_DISABLED": "true"},
                              env_file=None)
    assert (s.url, s.user_id, s.api_key, s.context_chars, s.disabled) == ("http://127.0.0.1:9000", "alice", None,
                                                                          10_000, True)
    s = HookSettings.from_env({"MEMORY_URL": "http://a:1", "MEMORY_API_URL": "http://b:2", "MEMORY_CONTEXT_CHARS": "x"},
                              env_file=None)
    assert (s.url, s.context_chars) == ("http://a:1", 4000)
    assert HookSettings.from_env({"MEMORY_CONTEXT_CHARS": "10"}, env_file=None).context_chars == 200
    assert HookSettings.from_env({}, env_file=None).context_tokens == 1000
    assert HookSettings.from_env({"MEMORY_CONTEXT_TOKENS": "9"}, env_file=None).context_tokens == 50
    assert HookSettings.from_env({"MEMORY_CONTEXT_TOKENS": "0"}, env_file=None).context_tokens == 0


def test_settings_read_the_checkouts_env_file_after_the_environment(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("# the service's settings and the hooks' side by side\nPORT=8199\n"
                        "MEMORY_API_KEY=msk_file_secret  # an admin key\nexport MEMORY_USER_ID='alice'\n"
                        "MEMORY_API_URL=http://127.0.0.1:9100\n")
    s = HookSettings.from_env({}, env_file=env_file)
    assert (s.api_key, s.user_id, s.url) == ("msk_file_secret", "alice", "http://127.0.0.1:9100")
    # the environment wins; an empty value in it is unset (as for the service's settings: env_ignore_empty)
    s = HookSettings.from_env({"MEMORY_API_KEY": "msk_env", "MEMORY_USER_ID": "", "MEMORY_URL": "http://h:1"},
                              env_file=env_file)
    assert (s.api_key, s.user_id, s.url) == ("msk_env", "alice", "http://h:1")
    assert HookSettings.from_env({}, env_file=tmp_path / "missing").api_key is None
    # the same file as the MCP server's (and dev.sh's, and the CLI's when run from the checkout)
    from service.hooks.settings import CHECKOUT_ENV
    from service.mcp.__main__ import CHECKOUT_ENV as MCP_ENV

    assert CHECKOUT_ENV == MCP_ENV == ROOT / ".env"


def test_env_file_lines_are_read_as_pydantic_settings_reads_them(tmp_path: Path) -> None:
    from dotenv import dotenv_values

    from service.hooks.settings import read_env_file

    env_file = tmp_path / ".env"
    env_file.write_text(
        "# comment\nA=  # only a comment\nB=x  # c\nC=\nD=\"q # x\"\nexport E=1\nF=a#b\nG='s p # q'\n"
        'H = "esc \\" q" # t\n I=spaced\n# J=commented\nK=v=w\nMEMORY_API_KEY=msk_abc_def\n\nnot a line\n')
    expected = dotenv_values(env_file)
    assert read_env_file(env_file) == expected
    assert len(expected) == 11 and expected["MEMORY_API_KEY"] == "msk_abc_def" and "J" not in expected


# ----------------------------------------------------------------------------------------- state


def test_state_counts_and_marks(tmp_path: Path) -> None:
    s = state.SessionState("abc", tmp_path)
    assert s.count() == 0 and s.last_marked() is None
    assert [s.increment() for _ in range(3)] == [1, 2, 3]
    s.mark(3)
    assert s.last_marked() == 3
    assert state.SessionState("abc", tmp_path).count() == 3


def test_state_counts_concurrent_increments(tmp_path: Path) -> None:
    s = state.SessionState("parallel", tmp_path)
    threads = [threading.Thread(target=lambda: [s.increment() for _ in range(50)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert s.count() == 400


def test_state_file_names_are_safe(tmp_path: Path) -> None:
    assert state.safe_session("../../etc/passwd") == "etc-passwd"
    assert state.safe_session("") == "unknown" and state.safe_session(None) == "unknown"
    assert state.safe_session("x" * 500) == "x" * 128
    s = state.SessionState("../escape", tmp_path / "d")
    s.increment()
    assert [p.parent for p in (tmp_path / "d").iterdir()] == [tmp_path / "d"]


def test_state_is_bounded_and_pruned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state, "MAX_COUNT", 5)
    s = state.SessionState("big", tmp_path)
    assert [s.increment() for _ in range(7)][-1] == 5
    assert s.count_file.stat().st_size == 5
    old = tmp_path / "old.count"
    old.write_text(".")
    os.utime(old, (time.time() - state.MAX_AGE_SECONDS - 10,) * 2)
    assert state.prune(tmp_path) == 1 and not old.exists() and s.count_file.exists()


def test_state_tolerates_an_unwritable_directory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    s = state.SessionState("x", blocker / "sub")  # a directory under a file cannot be created
    assert s.increment() == 0 and s.count() == 0
    s.mark(1)
    assert s.last_marked() is None


def test_state_dir_follows_xdg() -> None:
    assert state.state_dir({"XDG_STATE_HOME": "/x/state"}) == Path("/x/state/memory-hooks")
    assert state.state_dir({"XDG_STATE_HOME": "relative"}) == Path.home() / ".local/state/memory-hooks"


# -------------------------------------------------------------------------------------- commands


class Sent:
    """The HTTP boundary of the commands: `detached` runs the send at once, `request` records what it sends
    (memory writes in `calls`, the trace's requests in `trace`) and answers `status` (404 for the paths in
    `missing`)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.trace: list[tuple[str, Any]] = []
        self.missing: set[str] = set()

    def detached(self, send: Any) -> str:
        send(time.monotonic() + 3)
        return "stub"

    def request(self, settings: HookSettings, method: str, path: str, *, query: Any = None, json_body: Any = None,
                timeout: float) -> client.Response:
        (self.calls if path == "/v1/memories/raw" else self.trace).append((path, json_body))
        return client.Response(404 if path in self.missing else 202, b"{}")


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Sent:
    stub = Sent()
    monkeypatch.setattr(client, "detached", stub.detached)
    monkeypatch.setattr(client, "request", stub.request)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return stub


def test_post_tool_use_body(sent: Sent, tmp_path: Path) -> None:
    event = payload("post_tool_use_bash_secret.json", str(tmp_path))
    (tmp_path / ".memory-project").write_text("shop-api\n")
    assert commands.post_tool_use(HookSettings(), event, {}) == "stub"
    [(path, body)] = sent.calls
    assert path == "/v1/memories/raw"
    assert body == {
        "content": 'Ran curl -sS -H "Authorization: Bearer [REDACTED]" "https://api.payments.example/v1/charges?'
                   'limit=3": ok',
        "category": "task_context", "agent_id": "claude-code", "project_id": "shop-api",
        "metadata": {"session_id": event["session_id"], "tool": "Bash", "fold_key": "bash:curl"},
    }
    assert "sk-live" not in json.dumps(body)

    commands.post_tool_use(HookSettings(user_id="alice", project_id="override"), event, {})
    assert sent.calls[-1][1]["user_id"] == "alice" and sent.calls[-1][1]["project_id"] == "override"
    assert state.SessionState(event["session_id"]).count() == 2


def test_post_tool_use_builds_the_sessions_trace(sent: Sent, tmp_path: Path) -> None:
    (tmp_path / ".memory-project").write_text("shop-api\n")
    first = payload("post_tool_use_bash_secret.json", str(tmp_path))
    sid = first["session_id"]
    commands.post_tool_use(HookSettings(user_id="alice"), first, {})
    [(path, start)] = sent.trace  # the session's first call starts the run with its step
    assert path == "/v1/runs"
    assert start == {
        "run_id": f"cc-{sid}", "session_id": sid, "agent_id": "claude-code", "project_id": "shop-api",
        "user_id": "alice", "task": f"Claude Code session {sid} (project shop-api)",
        "steps": [{"seq": 0, "action": 'Ran curl -sS -H "Authorization: Bearer [REDACTED]" '
                                     '"https://api.payments.example/v1/charges?limit=3": ok',
                   "tool_calls": [{"tool": "Bash", "seq": 0, "status": "ok", "duration_ms": 412,
                                   "result": start["steps"][0]["action"], "arguments": {
                                       "command": 'curl -sS -H "Authorization: Bearer [REDACTED]" '
                                                  '"https://api.payments.example/v1/charges?limit=3"',
                                       "description": "List the three most recent charges"}}]}]}
    assert "sk-live" not in json.dumps(start)

    failure = payload("post_tool_use_failure_bash_pytest.json", str(tmp_path))
    commands.post_tool_use(HookSettings(user_id="alice"), failure, {})
    path, step = sent.trace[-1]  # a later call: a step of the started run
    assert path == f"/v1/runs/cc-{sid}/steps" and step["seq"] == 1 and step["user_id"] == "alice"
    [call] = step["tool_calls"]
    assert call["status"] == "error" and call["duration_ms"] == 1830 and "result" not in call
    assert call["error"].startswith("Ran pytest -q tests/test_search.py: 3 failed, 7 passed (exit 1)\nExit code 1")

    sent.missing.add(f"/v1/runs/cc-{sid}/steps")  # the start not accepted yet: the step starts the run
    commands.post_tool_use(HookSettings(user_id="alice"), first, {})
    assert [p for p, _ in sent.trace[-2:]] == [f"/v1/runs/cc-{sid}/steps", "/v1/runs"]
    assert sent.trace[-1][1]["steps"][0]["seq"] == 2 and sent.trace[-1][1]["run_id"] == f"cc-{sid}"
    assert state.SessionState(sid).calls() == b".x."

    sent.trace.clear()
    stop = payload("stop.json", str(tmp_path))
    assert commands.stop(HookSettings(user_id="alice"), stop, {}) == "stub"
    [(path, body)] = sent.trace
    assert path == f"/v1/runs/cc-{sid}/complete"
    assert body == {"success": True, "user_id": "alice", "summary": (
        "I added `after`/`before` filters to search and a test; 3 tests still fail. (3 tool calls, 1 failed)")}
    assert commands.stop(HookSettings(user_id="alice"), stop, {}) is None  # nothing new: nothing sent
    commands.post_tool_use(HookSettings(user_id="alice"), failure, {})
    sent.trace.clear()
    commands.stop(HookSettings(user_id="alice"), stop, {})
    assert sent.trace[0][1]["success"] is False and sent.trace[0][1]["error_kind"] == "tool_error"


def test_the_run_id_of_a_session() -> None:
    from service.hooks import trace

    assert trace.run_id("9f1c2a3e-5b6d-4e7f-8a9b-0c1d2e3f4a5b") == "cc-9f1c2a3e-5b6d-4e7f-8a9b-0c1d2e3f4a5b"
    odd = trace.run_id("a session/with spaces")
    assert odd.startswith("cc-") and len(odd) == 43 and odd == trace.run_id("a session/with spaces")
    assert trace.api_session("a session/with spaces") is None and trace.api_session("s1") == "s1"


def test_post_tool_use_skips_read_without_counting(sent: Sent) -> None:
    event = payload("post_tool_use_read.json")
    assert commands.post_tool_use(HookSettings(), event, {}) is None
    assert sent.calls == [] and state.SessionState(event["session_id"]).count() == 0


def test_stop_marks_once_per_new_count(sent: Sent, tmp_path: Path) -> None:
    event = payload("stop.json", str(tmp_path))
    (tmp_path / ".memory-project").write_text("shop-api")
    settings = HookSettings(user_id="alice")
    for _ in range(2):
        commands.post_tool_use(settings, payload("post_tool_use_edit.json", str(tmp_path)), {})
    sent.calls.clear()
    assert commands.stop(settings, event, {}) == "stub"
    assert commands.stop(settings, event, {}) is None  # no new observation: no new marker
    [(_, body)] = sent.calls
    sid = event["session_id"]
    assert body == {"content": f"Session {sid} ended after 2 observations (project shop-api)",
                    "category": "interaction", "agent_id": "claude-code", "project_id": "shop-api",
                    "user_id": "alice", "metadata": {"session_id": sid, "observations": 2}}
    commands.post_tool_use(settings, payload("post_tool_use_write.json", str(tmp_path)), {})
    assert commands.stop(settings, event, {}) == "stub"
    assert "after 3 observations" in sent.calls[-1][1]["content"]
    assert commands.stop(settings, {"hook_event_name": "Stop"}, {}) is None  # no session id


def test_first_stop_of_an_empty_session_still_marks(sent: Sent) -> None:
    assert commands.stop(HookSettings(), {"session_id": "empty-one", "cwd": "/"}, {}) == "stub"
    assert sent.calls[0][1]["content"] == "Session empty-one ended after 0 observations (project none)"
    assert "project_id" not in sent.calls[0][1]


def test_session_start_prints_the_documented_json(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[tuple[str, Any]] = []

    def fake(settings: HookSettings, method: str, path: str, *, query: Any = None, json_body: Any = None,
             timeout: float) -> client.Response | None:
        seen.append((path, dict(query)))
        assert 0 < timeout <= commands.SESSION_START_BUDGET
        return client.Response(200, b"# Memory context (project shop-api)\n- Uses tabs\n")

    monkeypatch.setattr(client, "request", fake)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    out = io.StringIO()
    event = payload("session_start.json", str(tmp_path / "shop-api"))
    (tmp_path / "shop-api").mkdir()
    commands.session_start(HookSettings(context_chars=3000), event, {}, out)
    assert json.loads(out.getvalue()) == {"hookSpecificOutput": {
        "hookEventName": "SessionStart", "additionalContext": "# Memory context (project shop-api)\n- Uses tabs"}}
    assert out.getvalue().count("\n") == 1
    assert seen == [("/v1/context/shop-api", {"format": "markdown", "max_chars": 3000, "max_tokens": 1000,
                                              "session_id": event["session_id"]})]

    out = io.StringIO()
    commands.session_start(HookSettings(user_id="alice"), {"cwd": "/"}, {}, out)
    assert seen[-1] == ("/v1/context/global", {"format": "markdown", "max_chars": 4000, "max_tokens": 1000,
                                               "user_id": "alice"})
    commands.session_start(HookSettings(context_tokens=0), {"cwd": "/"}, {}, io.StringIO())
    assert seen[-1] == ("/v1/context/global", {"format": "markdown", "max_chars": 4000})


@pytest.mark.parametrize("answer", [None, client.Response(500, b"boom"), client.Response(401, b"{}"),
                                    client.Response(200, b"   ")])
def test_session_start_prints_nothing_on_failure(monkeypatch: pytest.MonkeyPatch, answer: Any) -> None:
    monkeypatch.setattr(client, "request", lambda *a, **k: answer)
    out = io.StringIO()
    commands.session_start(HookSettings(), {"cwd": "/tmp"}, {}, out)
    assert out.getvalue() == ""


def test_event_cwd_order() -> None:
    assert commands.event_cwd({"cwd": "/a"}, {"MEMORY_HOOKS_CWD": "/b"}) == Path("/a")
    assert commands.event_cwd({"cwd": "relative"}, {"MEMORY_HOOKS_CWD": "/b"}) == Path("/b")
    assert commands.event_cwd({}, {"CLAUDE_PROJECT_DIR": "/c"}) == Path("/c")
    assert commands.event_cwd({}, {}) == Path.cwd()


# ---------------------------------------------------------------------------------------- stdin


def test_read_event_accepts_only_a_json_object() -> None:
    def read(data: bytes) -> dict[str, Any]:
        r, w = os.pipe()
        os.write(w, data)
        os.close(w)
        with os.fdopen(r, "rb") as stream:
            return commands.read_event(stream)

    assert read(b'{"a": 1}') == {"a": 1}
    for bad in (b"", b"not json", b"[1, 2]", b'"text"', b"\xff\xfe\x00", b'{"a": '):
        assert read(bad) == {}


def test_read_event_does_not_wait_for_a_stdin_left_open() -> None:
    r, w = os.pipe()
    os.write(w, b'{"partial": ')
    started = time.monotonic()
    with os.fdopen(r, "rb") as stream:
        assert commands.read_event(stream, timeout=0.2) == {}
    assert time.monotonic() - started < 1.0
    os.close(w)


def test_read_event_refuses_oversized_input() -> None:
    r, w = os.pipe()
    def write() -> None:
        os.write(w, b" " * 70_000)
        os.close(w)

    writer = threading.Thread(target=write)
    writer.start()
    with os.fdopen(r, "rb") as stream:
        assert commands.read_event(stream, timeout=2, limit=1000) == {}
    writer.join(5)


def run_hook(
    args: list[str], stdin: bytes, env: dict[str, str], cwd: Path = ROOT
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(args, input=stdin, capture_output=True, env=env, cwd=cwd, timeout=30)


@pytest.fixture
def hook_env(tmp_path: Path) -> dict[str, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_", "CLAUDE_"))}
    env.update({"MEMORY_URL": f"http://127.0.0.1:{port}", "XDG_STATE_HOME": str(tmp_path / "state")})
    return env


@pytest.mark.parametrize("command", ["session-start", "post-tool-use", "stop"])
@pytest.mark.parametrize("stdin", [b"", b"{", b"[]", b"null", b'{"tool_name": ["Bash"], "session_id": 7}',
                                   b"\x00\xff garbage", b'{"tool_name": "Bash", "tool_input": {"command": 1}}'])
def test_malformed_stdin_exits_zero_silently(command: str, stdin: bytes, hook_env: dict[str, str]) -> None:
    proc = run_hook([sys.executable, "-m", "service.hooks", command], stdin, hook_env)
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""


@pytest.mark.parametrize("args", [[], ["unknown"], ["stop", "extra"], ["--help"]])
def test_bad_arguments_exit_zero(args: list[str], hook_env: dict[str, str]) -> None:
    proc = run_hook([sys.executable, "-m", "service.hooks", *args], b"{}", hook_env)
    assert proc.returncode == 0 and proc.stdout == b""


def test_disabled_hooks_do_nothing(hook_env: dict[str, str], tmp_path: Path) -> None:
    hook_env["MEMORY_HOOKS_DISABLED"] = "1"
    proc = run_hook([sys.executable, "-m", "service.hooks", "post-tool-use"],
                    (PAYLOADS / "post_tool_use_edit.json").read_bytes(), hook_env)
    assert proc.returncode == 0 and not (tmp_path / "state").exists()


def test_closed_stdout_still_exits_zero(hook_env: dict[str, str]) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "service.hooks", "session-start"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=hook_env, cwd=ROOT)
    assert proc.stdout is not None
    proc.stdout.close()
    proc.communicate(b"{}", timeout=30)
    assert proc.returncode == 0


# ----------------------------------------------------------------------- HTTP client, stub server


class _Stub(http.server.BaseHTTPRequestHandler):
    status = 200
    body = b"# Memory context (project demo)\n- Prefers tabs\n"
    requests: list[tuple[str, str, dict[str, str], bytes]] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else b""
        type(self).requests.append((self.command, self.path, dict(self.headers), data))
        self.send_response(self.status)
        self.send_header("Content-Type", "text/markdown")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    do_GET = _answer
    do_POST = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def stub_server() -> Iterator[str]:
    _Stub.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)




def test_request_sends_the_key_and_reads_the_answer(stub_server: str) -> None:
    settings = HookSettings(url=stub_server + "/prefix", api_key="msk_id_secret")
    resp = client.request(settings, "POST", "/v1/memories/raw", query={"a": "b c"}, json_body={"x": "é"}, timeout=5)
    assert resp is not None and resp.status == 200 and resp.text().startswith("# Memory context")
    [(method, path, headers, body)] = _Stub.requests
    assert (method, path) == ("POST", "/prefix/v1/memories/raw?a=b+c")
    assert headers["Authorization"] == "Bearer msk_id_secret" and headers["Content-Type"] == "application/json"
    assert json.loads(body) == {"x": "é"}


def test_request_gives_up_at_its_deadline(hanging_url: str) -> None:
    started = time.monotonic()
    assert client.request(HookSettings(url=hanging_url), "GET", "/health", timeout=0.3) is None
    assert time.monotonic() - started < 1.0
    assert client.request(HookSettings(url="ftp://127.0.0.1:1"), "GET", "/", timeout=0.3) is None


def test_fire_and_forget_without_fork_sends_in_process(stub_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "fork")
    assert client.fire_and_forget(HookSettings(url=stub_server), "/v1/memories/raw", {"content": "x"}) == "sync"
    assert _Stub.requests[0][:2] == ("POST", "/v1/memories/raw")


def test_fire_and_forget_forks_and_the_child_sends(stub_server: str, hook_env: dict[str, str]) -> None:
    hook_env["MEMORY_URL"] = stub_server
    started = time.monotonic()
    proc = run_hook([sys.executable, "-m", "service.hooks", "post-tool-use"],
                    (PAYLOADS / "post_tool_use_bash_secret.json").read_bytes(), hook_env)
    assert proc.returncode == 0 and proc.stdout == b""
    assert time.monotonic() - started < 5
    deadline = time.monotonic() + 10
    while len(_Stub.requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    [(method, path, _, body), (method2, path2, _, body2)] = _Stub.requests  # the observation, then the trace
    assert (method, path) == ("POST", "/v1/memories/raw")
    sent = json.loads(body)
    assert sent["category"] == "task_context" and "sk-live" not in body.decode()
    assert (method2, path2) == ("POST", "/v1/runs") and "sk-live" not in body2.decode()


def test_session_start_through_the_plugin_wrapper(stub_server: str, hook_env: dict[str, str], tmp_path: Path) -> None:
    """`sh hooks/run.sh` as hooks.json runs it, from a project that has its own `service` package."""
    project = tmp_path / "demo"
    (project / "service").mkdir(parents=True)
    (project / "service" / "__init__.py").write_text("raise SystemExit(3)\n")
    hook_env.update({"MEMORY_URL": stub_server, "CLAUDE_PLUGIN_ROOT": str(ROOT), "MEMORY_PYTHON": sys.executable,
                     "MEMORY_USER_ID": "alice"})
    event = {"session_id": "s1", "hook_event_name": "SessionStart", "source": "startup"}  # no cwd: the wrapper's
    hooks = json.loads((ROOT / "hooks" / "hooks.json").read_text())
    command = hooks["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    proc = run_hook(["sh", "-c", command], json.dumps(event).encode(), hook_env, cwd=project)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["hookSpecificOutput"]["additionalContext"] == _Stub.body.decode().strip()
    assert _Stub.requests[0][1] == ("/v1/context/demo?format=markdown&max_chars=4000&max_tokens=1000&user_id=alice"
                                    "&session_id=s1")


def test_a_key_in_the_plugins_env_file_reaches_the_api(stub_server: str, hook_env: dict[str, str],
                                                         tmp_path: Path) -> None:
    """A copy of the plugin (as Claude Code caches it) with a `.env` holding MEMORY_API_KEY: the hook sends it."""
    plugin = tmp_path / "plugin"
    (plugin / "service" / "hooks").mkdir(parents=True)
    (plugin / "hooks").mkdir()
    (plugin / "service" / "__init__.py").write_bytes((ROOT / "service" / "__init__.py").read_bytes())
    for source in (ROOT / "service" / "hooks").glob("*.py"):
        (plugin / "service" / "hooks" / source.name).write_bytes(source.read_bytes())
    for name in ("run.sh", "hooks.json"):
        (plugin / "hooks" / name).write_bytes((ROOT / "hooks" / name).read_bytes())
    (plugin / ".env").write_text("MEMORY_API_KEY=msk_k1_from_dotenv\nMEMORY_USER_ID=alice\n")
    project = tmp_path / "demo"
    project.mkdir()
    (project / ".env").write_text("MEMORY_API_KEY=msk_the_projects_own\n")  # not ours: never read
    hook_env.update({"MEMORY_URL": stub_server, "CLAUDE_PLUGIN_ROOT": str(plugin), "MEMORY_PYTHON": sys.executable})
    command = json.loads((plugin / "hooks" / "hooks.json").read_text())["hooks"]["SessionStart"][0]["hooks"][0]
    proc = run_hook(["sh", "-c", command["command"]], json.dumps({"session_id": "s1"}).encode(), hook_env,
                    cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"] == _Stub.body.decode().strip()
    [(method, path, headers, _)] = _Stub.requests
    assert (method, path) == ("GET", "/v1/context/demo?format=markdown&max_chars=4000&max_tokens=1000&user_id=alice"
                                     "&session_id=s1")
    assert headers["Authorization"] == "Bearer msk_k1_from_dotenv"


def test_wrapper_without_python_exits_zero(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path), "CLAUDE_PLUGIN_ROOT": str(tmp_path), "MEMORY_PYTHON": str(tmp_path / "nope")}
    proc = subprocess.run(["/bin/sh", str(ROOT / "hooks" / "run.sh"), "post-tool-use"], input=b"{}", env=env,
                          capture_output=True, timeout=30)
    assert proc.returncode == 0 and proc.stdout == b""


# --------------------------------------------------------------------------------- plugin files


def test_plugin_files_parse_and_agree() -> None:
    plugin = json.loads((ROOT / ".claude-plugin" / "plugin.json").read_text())
    market = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    assert market["owner"]["name"] and market["name"]
    [entry] = market["plugins"]
    assert entry["name"] == plugin["name"] and entry["source"] == "./"

    hooks = json.loads((ROOT / "hooks" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == {"SessionStart", "PostToolUse", "PostToolUseFailure", "Stop"}
    expected = {"SessionStart": "session-start", "PostToolUse": "post-tool-use", "PostToolUseFailure": "post-tool-use",
                "Stop": "stop"}
    for event, groups in hooks.items():
        for group in groups:
            for handler in group["hooks"]:
                assert handler["type"] == "command"
                assert handler["command"] == f'sh "${{CLAUDE_PLUGIN_ROOT}}/hooks/run.sh" {expected[event]}'
                assert 0 < handler["timeout"] <= 5
    for group in hooks["PostToolUse"] + hooks["PostToolUseFailure"]:
        tools = set(group["matcher"].split("|"))
        assert "Bash" in tools and not tools & SKIPPED_TOOLS
    assert "matcher" not in hooks["Stop"][0]

    mcp = json.loads((ROOT / ".mcp.json").read_text())["mcpServers"]["memory"]
    assert mcp["command"] == "sh" and mcp["args"] == ["${CLAUDE_PLUGIN_ROOT:-.}/hooks/run.sh", "mcp"]
    assert "MEMORY_API_URL" in mcp["env"]
    assert os.access(ROOT / "hooks" / "run.sh", os.X_OK)


def test_recorded_payloads_have_claude_code_shapes() -> None:
    common = {"session_id", "transcript_path", "cwd", "hook_event_name"}
    for path in sorted(PAYLOADS.glob("*.json")):
        event = json.loads(path.read_text())
        assert common <= set(event), path.name
        if event["hook_event_name"] in ("PostToolUse", "PostToolUseFailure"):
            assert {"tool_name", "tool_input", "tool_use_id", "permission_mode"} <= set(event), path.name
            key = "tool_response" if event["hook_event_name"] == "PostToolUse" else "error"
            assert key in event, path.name
    assert json.loads((PAYLOADS / "session_start.json").read_text())["source"] == "startup"
    assert "stop_hook_active" in json.loads((PAYLOADS / "stop.json").read_text())
