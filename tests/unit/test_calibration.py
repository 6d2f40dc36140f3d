"""Every similarity threshold, under every registered embedding model, separates a labelled positive from a
labelled negative (tests/data/similarity_pairs.json, the resolution sets' names); an operator's explicit setting
wins over the model's value."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from service.core.embedding_models import MODELS, calibration
from service.core.settings import Settings
from service.maintenance.algorithm import plan_boundary
from service.memory.changes import changes, same_slot
from tests.conftest import local_embedder

PAIRS = json.loads((Path(__file__).resolve().parents[1] / "data" / "similarity_pairs.json").read_text("utf-8"))
MODEL_IDS = sorted(MODELS)


def cos(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b))


@pytest.mark.parametrize("model", MODEL_IDS)
async def test_dedup_threshold_groups_repetitions_and_keeps_different_facts(model: str) -> None:
    embedder = local_embedder(model=model)
    threshold = MODELS[model].calibration.dedup
    for label, pairs in PAIRS["dedup"].items():
        for a, b in pairs:
            va, vb = await embedder.embed([a, b])
            plan = plan_boundary([("a", "ha", 1, va, a), ("b", "hb", 2, vb, b)], threshold)
            grouped = plan.near == [("b", ["a"])]
            assert grouped == (label == "positive"), (model, label, a, b, round(cos(va, vb), 3))


@pytest.mark.parametrize("model", MODEL_IDS)
async def test_dedup_never_groups_different_numbers_even_when_the_vectors_agree(model: str) -> None:
    embedder = local_embedder(model=model)
    a, b = "The hotel budget is 120 euros per night", "The hotel budget is 150 euros per night"
    va, vb = await embedder.embed([a, b])
    assert not plan_boundary([("a", "ha", 1, va, a), ("b", "hb", 2, vb, b)], 0.5).near
    assert plan_boundary([("a", "ha", 1, va), ("b", "hb", 2, vb)], 0.5).near  # without contents: by cosine only


@pytest.mark.parametrize("model", MODEL_IDS)
async def test_run_match_separates_an_answering_memory_from_an_unrelated_one(model: str) -> None:
    embedder = local_embedder(model=model)
    threshold = MODELS[model].calibration.run_match
    for label, pairs in PAIRS["query"].items():
        for query, passage in pairs:
            score = cos(await embedder.embed_query(query), (await embedder.embed([passage]))[0])
            assert (score >= threshold) == (label == "positive"), (model, label, query, round(score, 3))


@pytest.mark.parametrize("model", MODEL_IDS)
async def test_the_relevance_floor_keeps_an_answering_exchange_and_drops_an_unrelated_one(model: str) -> None:
    """A question and the stored exchange that answers it are above the model's floor; a question nothing stored
    answers and an exchange about something else are below it (scripts/bench/calibrate.py measures the floor)."""
    embedder = local_embedder(model=model)
    floor = MODELS[model].calibration.relevance
    assert floor is not None
    for label, pairs in PAIRS["relevance"].items():
        for query, passage in pairs:
            score = cos(await embedder.embed_query(query), (await embedder.embed([passage]))[0])
            assert (score >= floor) == (label == "positive"), (model, label, query, round(score, 3))


NAMES_SAME = [("NYC", "New York City"), ("VS Code", "Visual Studio Code"), ("LA", "Los Angeles")]
NAMES_UNRELATED = [("Rust", "Nairobi"), ("Berlin", "PostgreSQL"), ("Stripe", "Lisbon"), ("Airbnb", "Siemens")]


@pytest.mark.parametrize("model", MODEL_IDS)
async def test_the_gates_semantic_signal_means_the_same_under_every_model(model: str) -> None:
    """The gate's bands were chosen on all-MiniLM-L6-v2's cosines; another model's are rescaled from its level of
    unrelated names, so a labelled pair of one name lands high and an unrelated pair low under each."""
    embedder = local_embedder(model=model)
    scale = MODELS[model].calibration

    async def semantic(a: str, b: str) -> tuple[float, float]:
        va, vb = await embedder.embed_symmetric([a, b])
        return cos(va, vb), scale.semantic(cos(va, vb))

    for a, b in NAMES_SAME:
        assert (await semantic(a, b))[1] >= 0.75, (model, a, b)
    raw_unrelated = []
    for a, b in NAMES_UNRELATED:
        raw, scaled = await semantic(a, b)
        raw_unrelated.append(raw)
        assert scaled <= 0.45, (model, a, b, scaled)
    if scale.name_floor > 0:  # the rescaling is what keeps this model's unrelated names out of the bands
        assert max(raw_unrelated) > 0.45


def test_an_explicit_setting_wins_over_the_models_value() -> None:
    e5 = Settings(_env_file=None)  # type: ignore[call-arg]
    assert e5.embeddings.model == "e5-small-v2" and e5.calibration == calibration("e5-small-v2")
    set_by_operator = Settings(_env_file=None, dedup_similarity_threshold=0.99)  # type: ignore[call-arg]
    assert set_by_operator.calibration.dedup == 0.99
    assert set_by_operator.calibration.name_floor == calibration("e5-small-v2").name_floor
    assert e5.calibration.graph_entity == 0.045  # 0.15 of MiniLM's spread of cosines, on e5's narrower one
    assert Settings(_env_file=None, graph_entity_weight=0.2).calibration.graph_entity == 0.2  # type: ignore[call-arg]
    minilm = Settings(_env_file=None, embedder_model="all-MiniLM-L6-v2")  # type: ignore[call-arg]
    assert minilm.calibration == MODELS["all-MiniLM-L6-v2"].calibration != e5.calibration
    custom = Settings(_env_file=None, embedder_model_dir=Path("/models/my-model"))  # type: ignore[call-arg]
    assert custom.embeddings.resolved_model_id == "my-model" and custom.calibration == calibration("unknown")


@pytest.mark.parametrize("model", MODEL_IDS)
async def test_the_slot_threshold_supersedes_corrections_and_nothing_else(model: str) -> None:
    """A later message with a change word and an earlier statement: the same slot (a correction) for most labelled
    positives, never for a labelled negative (a change of something else): a wrong supersede hides a true memory,
    a missed one leaves both values (docs/preferences.md says which shapes are missed)."""
    embedder = local_embedder(model=model)
    calibration = MODELS[model].calibration
    found = {}
    for label, pairs in PAIRS["slot"].items():
        for old, new in pairs:
            assert changes(new) or label == "negative", new  # every correction says that something changed
            v_old, v_new = await embedder.embed([old, new])
            found[(label, new)] = same_slot(new, old, cos(v_old, v_new), calibration)
    assert not any(hit for (label, _), hit in found.items() if label == "negative"), found
    positives = [hit for (label, _), hit in found.items() if label == "positive"]
    assert sum(positives) >= 2 * len(positives) / 3, found
