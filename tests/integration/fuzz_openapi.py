"""The fuzz run of test_fuzz.py, in a process of its own: `python -m tests.integration.fuzz_openapi URL KEY`
prints one JSON line {operations, failures, statuses}.

It runs outside the pytest-xdist worker on purpose. Hypothesis parses source (ast.parse) to describe what it
draws, and CPython 3.11.7 keeps the AST builder's depth counter per interpreter, not per thread (gh-106905): with
another thread of the worker converting an AST at the same moment, a parse fails with "SystemError: AST
constructor recursion depth mismatch" and Hypothesis reports the case as flaky. Here the fuzzer is the only
thread."""

from __future__ import annotations

import json
import sys
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.config._checks import NEGATIVE_DATA_REJECTION_EXPECTED_STATUSES
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import positive_data_acceptance

MAX_EXAMPLES = 12


def fuzz(url: str, key: str) -> dict[str, Any]:
    # 413 is a rejection too: an invalid body the fuzzer makes bigger than MAX_BODY_BYTES is refused before
    # it is parsed (the body limit), which is what should happen to it.
    config = schemathesis.Config.from_dict({"checks": {"negative_data_rejection": {
        "expected-statuses": [*NEGATIVE_DATA_REJECTION_EXPECTED_STATUSES, "413"]}}})
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json", config=config)
    headers = {"Authorization": f"Bearer {key}"}
    failures: list[str] = []
    statuses: dict[int, int] = {}
    results = list(schema.get_all_operations())
    failures += [f"operation not loaded: {r}" for r in results if not isinstance(r, Ok)]
    operations = [r.ok() for r in results if isinstance(r, Ok)]

    for op, mode in ((op, mode) for op in operations for mode in GenerationMode):  # valid and invalid inputs
        @given(case=op.as_strategy(generation_mode=mode))
        @settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck),
                  derandomize=True, database=None)
        def run(case: Any) -> None:
            # positive_data_acceptance expects every schema-valid request to succeed; a memory API answers
            # such requests 400 (a domain rule: an unknown category) or 404 (an id that does not exist).
            response = case.call_and_validate(headers=headers, excluded_checks=[positive_data_acceptance])
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

        try:
            run()
        except Unsatisfiable:
            if mode is not GenerationMode.NEGATIVE:  # an operation without inputs has no invalid ones
                failures.append(f"{op.label} ({mode.value}): no valid input could be generated")
        except Exception as exc:  # collected: one report of every operation that does not conform
            failures.append(f"{op.label} ({mode.value}): {str(exc)[:1500]}")
    return {"operations": len(operations), "failures": failures, "statuses": statuses}


if __name__ == "__main__":
    print(json.dumps(fuzz(sys.argv[1], sys.argv[2])))
