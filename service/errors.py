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
