"""Technology lexicon for the offline extractor: canonical names, aliases and entity types.

One entry per line: ``Canonical | alias | alias``; lines starting with ``#`` are comments.
Matching is case-insensitive, except for names marked with a leading ``!``: those are ordinary
English words too ("Go", "Rust", "Spark", "Vault", "Notion"), so they only match with the exact
casing written here. The canonical name is always an alias of itself. Too-generic words (HTTP,
API, JSON, REST, cloud, database) are left out on purpose: as graph entities they would connect
everything to everything.

To add a name: put it under its type, keep the canonical casing the vendor uses, and add the
spellings people actually type (``Postgres``, ``k8s``, ``torch``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ENTRIES: dict[str, str] = {
    "language": """
        Python | python3 | py3
        JavaScript | !JS | ECMAScript
        TypeScript | !TS
        Java
        Kotlin
        Scala
        !Go | golang
        !Rust
        C++ | cpp
        C#
        F#
        !C
        !Swift
        Objective-C
        !Dart
        !Ruby
        PHP
        Perl
        Haskell
        OCaml
        Clojure
        Elixir
        Erlang
        !Elm
        Lua
        !Julia
        !R
        Zig
        !Nim
        Groovy
        Fortran
        COBOL
        Solidity
        SQL
        PL/pgSQL
        Bash
        zsh
        PowerShell
        HTML
        CSS
        Sass | SCSS
        Markdown
        YAML
        TOML
        GraphQL
        WebAssembly | Wasm
        Jinja | Jinja2
        Protobuf | Protocol Buffers
        GDScript
    """,
    "framework": """
        FastAPI
        Django
        !Flask
        Starlette
        Pyramid
        Tornado
        aiohttp
        Litestar
        Sanic
        !React
        React Native
        Next.js | NextJS
        Vue | Vue.js | VueJS
        Nuxt | Nuxt.js
        Angular
        AngularJS | Angular.js
        Svelte
        SvelteKit
        SolidJS
        !Remix
        Astro
        !Ember | Ember.js
        Gatsby
        !Express | Express.js
        NestJS
        Fastify
        Hono
        Koa
        Spring Boot
        !Spring
        Quarkus
        Micronaut
        Ruby on Rails | !Rails
        Sinatra
        Laravel
        Symfony
        !Phoenix
        ASP.NET | ASP.NET Core
        .NET | dotnet
        !Gin
        !chi | go-chi
        !Echo
        !Fiber
        Actix | actix-web
        Axum
        !Rocket
        Tokio
        !Flutter
        SwiftUI
        Jetpack Compose
        !Electron
        Tauri
        Expo
        Ionic
        Tailwind CSS | Tailwind | TailwindCSS
        !Bootstrap
        Material UI | MUI
        Chakra UI
        styled-components
        Redux | Redux Toolkit
        Zustand
        MobX
        !Recoil
        Jotai
        TanStack Query | React Query
        htmx
        Alpine.js
        jQuery
        Streamlit
        Gradio
        !Celery
        ARQ
        Dramatiq
        RQ
        Sidekiq
        Apache Beam | !Beam
        Hadoop
        !Spark | PySpark | Apache Spark
        Flink | Apache Flink
        dbt
        Airflow | Apache Airflow
        Dagster
        Prefect
        Luigi
        !Ray
        LangChain
        LlamaIndex
        MkDocs
        Sphinx
        Docusaurus
        !Hugo
        Jekyll
        !Unity
        Unreal Engine | Unreal | UE5
        Godot
        Bevy
        Pygame
        Phaser
    """,
    "library": """
        pandas
        NumPy
        SciPy
        PyArrow | Apache Arrow
        Polars
        scikit-learn | sklearn
        PyTorch | torch
        TensorFlow
        Keras
        JAX
        Hugging Face Transformers
        sentence-transformers
        XGBoost
        LightGBM
        Matplotlib
        seaborn
        Plotly
        SQLAlchemy
        Alembic
        Pydantic
        pydantic-settings
        attrs
        httpx
        aiohttp-client
        asyncio
        !Trio
        structlog
        Loguru
        !Click
        Typer
        Jinja2-templates
        !Marshmallow
        Django REST framework | DRF
        Prisma
        TypeORM
        Sequelize
        !Drizzle
        Mongoose
        Hibernate
        Lodash
        Axios
        RxJS
        D3 | D3.js
        Three.js
        Zod
        tRPC
        Socket.IO
        Boto3 | boto3
        elasticsearch-py
        redis-py
        psycopg | psycopg2 | psycopg3
        asyncpg
        Qdrant client | qdrant-client
        google-genai
        OpenAI SDK
        LiteLLM
        CUDA
        cuDNN
        OpenCV
        spaCy
        NLTK
        Guava
        Lombok
        Serde
        !Diesel
        SQLx
        GORM
    """,
    "database": """
        PostgreSQL | Postgres | psql
        MySQL
        MariaDB
        SQLite
        !Oracle | Oracle Database
        SQL Server | MSSQL
        MongoDB | Mongo
        Redis
        Valkey
        Memcached
        Cassandra
        ScyllaDB
        DynamoDB
        Couchbase
        CouchDB
        Neo4j
        ArangoDB
        Elasticsearch | !Elastic
        OpenSearch
        Solr
        ClickHouse
        !Snowflake
        BigQuery
        Redshift
        Databricks
        DuckDB
        TimescaleDB
        InfluxDB
        Prometheus
        CockroachDB
        Supabase
        Firebase | Firestore
        PlanetScale
        !Neon
        Qdrant
        !Pinecone
        Weaviate
        Milvus
        !Chroma | ChromaDB
        pgvector
        Kafka | Apache Kafka
        RabbitMQ
        !NATS
        !Pulsar
        SQS | Amazon SQS
        Kinesis
        Pub/Sub
        etcd
        Zookeeper
        Trino
        !Presto
        !Hive
    """,
    "tool": """
        Git
        GitHub Actions
        GitLab CI
        Jenkins
        CircleCI
        Travis CI
        Buildkite
        Argo CD | ArgoCD
        !Flux
        Docker
        Docker Compose | docker-compose
        Podman
        Kubernetes | k8s | kube
        kubectl
        kubelet
        !Helm
        Kustomize
        k3s
        minikube
        Terraform
        OpenTofu
        Pulumi
        Ansible
        !Chef
        !Puppet
        !Vault | HashiCorp Vault
        !Consul
        !Nomad
        Packer
        Vagrant
        NGINX | nginx
        Apache HTTP Server
        Caddy
        Traefik
        HAProxy
        !Envoy
        Istio
        Linkerd
        Grafana
        Loki
        Jaeger
        OpenTelemetry | OTel
        Datadog
        Sentry
        New Relic
        PagerDuty
        Splunk
        Kibana
        Logstash
        Fluentd
        pytest
        unittest
        tox
        nox
        !Hypothesis
        !Jest
        Vitest
        !Mocha
        !Cypress
        Playwright
        Selenium
        Puppeteer
        Storybook
        JUnit
        RSpec
        ruff
        mypy
        Pyright
        !Black
        isort
        Flake8
        Pylint
        ESLint
        !Prettier
        !Biome
        TFLint | tflint
        ShellCheck
        pre-commit
        pip
        pipx
        !uv
        !Poetry
        PDM
        !Hatch
        Conda | Anaconda | Miniconda
        pyenv
        npm
        pnpm
        Yarn
        !Bun
        Deno
        Node.js | !Node | NodeJS
        Webpack
        Vite
        esbuild
        !Rollup
        Turborepo
        Nx
        Babel
        Maven
        Gradle
        !Cargo
        Bazel
        CMake
        GNU Make | Makefile
        Homebrew
        Nix
        tmux
        iTerm2
        !Warp
        Postman
        !Insomnia
        curl
        certbot | Let's Encrypt
        OpenSSL
        OpenSSH | SSH
        jq
        ngrok
        Jupyter | JupyterLab | Jupyter Notebook
        MLflow
        Weights & Biases | wandb
        DVC
        Figma
        Swagger | OpenAPI
        gRPC
        WebSocket | WebSockets
        Kafka Connect
        Debezium
        Conventional Commits
        Semantic Versioning | SemVer
        GitFlow | Git Flow
        trunk-based development
        # End-user apps people mention as part of how they work.
        !Obsidian
        Todoist
        Evernote
        Google Calendar
        Google Docs
        Google Sheets
        Google Drive
        Gmail
        Outlook
        Excel
        !Word | Microsoft Word
        Miro
        Airtable
        Things 3
        Logseq
        Roam Research
        1Password
        Bitwarden
        Raycast
        !Alfred
        Spotify
        WhatsApp
        Telegram
        !Signal
    """,
    "service": """
        GitHub
        GitLab
        Bitbucket
        Jira
        Confluence
        !Linear
        !Notion
        !Slack
        !Discord
        Microsoft Teams
        !Zoom
        Trello
        Asana
        !Stripe
        PayPal
        Twilio
        SendGrid
        Auth0
        Okta
        Cloudflare
        Vercel
        Netlify
        Heroku
        !Render
        Fly.io
        !Railway
        DigitalOcean
        Linode
        Hetzner
        OpenAI
        Anthropic
        !Gemini
        ChatGPT
        !Claude
        Copilot | GitHub Copilot
        Hugging Face
        Docker Hub
        PyPI
        npm registry
        Sentry.io
        Mailgun
        Algolia
        Contentful
        Shopify
        Salesforce
        HubSpot
        Zapier
        !Steam
        itch.io
    """,
    "cloud": """
        AWS | Amazon Web Services
        GCP | Google Cloud | Google Cloud Platform
        Azure | Microsoft Azure
        S3 | Amazon S3
        EC2
        ECS
        EKS
        Fargate
        !Lambda | AWS Lambda
        CloudFront
        RDS | Amazon RDS
        !Aurora
        CloudWatch
        IAM
        GKE
        Cloud Run
        Cloud Functions
        Cloud Composer
        GCS | Google Cloud Storage
        AKS
        Azure Functions
        OpenStack
    """,
    "editor": """
        VS Code | VSCode | Visual Studio Code
        Visual Studio
        Vim
        Neovim | nvim
        Emacs
        JetBrains
        IntelliJ IDEA | IntelliJ
        PyCharm
        WebStorm
        GoLand
        RubyMine
        CLion
        !Rider
        Android Studio
        Xcode
        Sublime Text | !Sublime
        Zed
        !Cursor
        !Helix
        !Nano
        Eclipse
    """,
    "os": """
        Linux
        macOS | OS X | Mac OS
        !Windows
        WSL | WSL2
        Ubuntu
        Debian
        Fedora
        Arch Linux | !Arch
        CentOS
        RHEL | Red Hat Enterprise Linux
        Alpine Linux | !Alpine
        NixOS
        FreeBSD
        Android
        iOS
        iPadOS
        watchOS
        ChromeOS
    """,
}

# A few non-technical names worth recognising even when written in capitals or at a sentence start.
_PLACES = ("EU", "US", "USA", "UK", "UAE")
_STANDARDS = ("GDPR", "HIPAA", "PCI DSS", "SOC 2", "ISO 27001", "WCAG", "PEP 8")


@dataclass(frozen=True)
class Term:
    canonical: str
    type: str


def _parse() -> tuple[dict[str, Term], dict[str, Term]]:
    insensitive: dict[str, Term] = {}
    sensitive: dict[str, Term] = {}
    for etype, block in _ENTRIES.items():
        for raw in block.strip().splitlines():
            if raw.strip().startswith("#"):
                continue
            names = [n.strip() for n in raw.split("|") if n.strip()]
            canonical = names[0].lstrip("!")
            term = Term(canonical, etype)
            for name in names:
                if name.startswith("!"):
                    sensitive.setdefault(name[1:], term)
                else:
                    insensitive.setdefault(name.casefold(), term)
    for place in _PLACES:
        sensitive.setdefault(place, Term(place, "place"))
    for std in _STANDARDS:
        insensitive.setdefault(std.casefold(), Term(std, "standard"))
    return insensitive, sensitive


_INSENSITIVE, _SENSITIVE = _parse()


def _alternative(name: str, sensitive: bool) -> str:
    body = re.escape(name).replace(r"\ ", r"\s+")
    return body if sensitive else f"(?i:{body})"


def _build_pattern() -> re.Pattern[str]:
    names = [(n, True) for n in _SENSITIVE] + [(n, False) for n in _INSENSITIVE]
    # Longest first so "React Native" wins over "React", "Spring Boot" over "Spring".
    names.sort(key=lambda item: (-len(item[0]), item[0]))
    alternation = "|".join(_alternative(n, s) for n, s in names)
    # A name is a whole token: not glued to letters, digits or name punctuation on either side
    # ("Node" must not match inside "Node.js", "Go" not inside "Google"; a final full stop is fine).
    return re.compile(rf"(?<![\w.+#/@-])(?:{alternation})(?![\w+#/@]|[.-]\w)")


LEXICON_PATTERN = _build_pattern()


def lookup(text: str) -> Term | None:
    """The lexicon term for an exact name (respecting the case-sensitive entries), else None."""
    return _SENSITIVE.get(text) or _INSENSITIVE.get(" ".join(text.split()).casefold())


def find_terms(text: str) -> list[tuple[int, int, Term]]:
    """All lexicon names in ``text`` as (start, end, term), left to right, non-overlapping."""
    found: list[tuple[int, int, Term]] = []
    for match in LEXICON_PATTERN.finditer(text):
        term = lookup(match.group(0))
        if term is not None:
            found.append((match.start(), match.end(), term))
    return found


def size() -> int:
    """Number of distinct canonical names."""
    return len({t.canonical for t in (*_INSENSITIVE.values(), *_SENSITIVE.values())})
