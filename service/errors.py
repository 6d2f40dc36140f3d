"""One exception root for the service; the API maps each kind to an HTTP status in one handler."""

from __future__ import annotations


class ServiceError(Exception):
    """Root of every error the service raises on purpose."""

    status_code = 500


class DomainError(ServiceError):
    """Input that is well-formed but breaks a domain rule (unknown category, scope without project)."""

    status_code = 400


class PayloadTooLarge(ServiceError):
    status_code = 413


class NotFound(ServiceError):
    status_code = 404


class DependencyUnavailable(ServiceError):
    """A store or the queue is unreachable: never fall back silently, answer 503."""

    status_code = 503


class StoreConfigError(ServiceError):
    """A store is configured in a way that would corrupt data (e.g. embedder dimension mismatch)."""

    status_code = 500


class Unauthorized(ServiceError):
    """No API key where one is required, or a key that is malformed, unknown or revoked."""

    status_code = 401


class Forbidden(ServiceError):
    """A valid key asking for something it may not do (another user, maintenance without admin)."""

    status_code = 403


class RateLimited(ServiceError):
    status_code = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after
