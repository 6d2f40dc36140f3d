"""Which of the store backends' own exceptions are outages (retry later) and which are refusals (the same request
fails the same way): the worker's retry rule asks here, so no module outside stores/ knows a driver's errors."""

from __future__ import annotations

from neo4j.exceptions import DriverError, Neo4jError, TransientError

# Neo4j: deadlocks, lock timeouts and leader changes after the driver's own retries (TransientError); the server
# unreachable or a session lost (DriverError: ServiceUnavailable, SessionExpired)
TRANSIENT_STORE_ERRORS: tuple[type[BaseException], ...] = (TransientError, DriverError)


def refused_by_store(exc: BaseException) -> bool:
    """A backend error that is no outage: Neo4j's ClientError and DatabaseError (a bad query, a constraint)."""
    return isinstance(exc, Neo4jError) and not isinstance(exc, TransientError)
