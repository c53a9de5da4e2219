"""One root error; every failure ragd reports is a subclass with an actionable message."""

from __future__ import annotations


class RagdError(Exception):
    """Root of all ragd errors. `code` is a stable machine-readable name."""

    code = "ragd_error"
    exit_code = 1


class ConfigError(RagdError):
    code = "config_error"
    exit_code = 2


class DatabaseUnavailable(RagdError):
    code = "database_unavailable"
    exit_code = 3


class MigrationError(RagdError):
    code = "migration_error"
    exit_code = 3


class NotFound(RagdError):
    code = "not_found"
    exit_code = 4


class CollectionNotFound(NotFound):
    code = "collection_not_found"


class DocumentNotFound(NotFound):
    code = "document_not_found"


class RunNotFound(NotFound):
    code = "run_not_found"


class TenantNotFound(NotFound):
    code = "tenant_not_found"


class InvalidRequest(RagdError):
    code = "bad_request"
    exit_code = 2


class PageNotRendered(RagdError):
    """A page image that could not be drawn within RAGD_RENDER_TIMEOUT_S (or its memory bound)."""

    code = "page_not_rendered"


class RetryLater(RagdError):
    """An error that may pass when tried again after `retry_after_s` seconds (the REST adapter's Retry-After)."""

    default_retry_after_s = 5

    def __init__(self, message: str, retry_after_s: int | None = None):
        super().__init__(message)
        self.retry_after_s = self.default_retry_after_s if retry_after_s is None else retry_after_s


class Busy(RetryLater):
    """A request that could not get a database connection, a lock or its statement's time within its deadline:
    retried later it may pass (the REST adapter answers 503 with Retry-After); other tenants' requests go on."""

    code = "busy"
    exit_code = 3


class QueueFull(RetryLater):
    """A tenant's queue of files to ingest is at its bound (RAGD_QUEUE_MAX_FILES); the REST adapter answers 429
    with Retry-After, the CLI waits and tries again."""

    code = "queue_full"
    exit_code = 7
    default_retry_after_s = 10


class Superseded(RagdError):
    """A queued file's job was handed to another worker while this attempt still ran: the newer attempt holds the
    file, and this one stops without writing (what it stored stays, and the newer skips it)."""

    code = "superseded"


class DimensionMismatch(RagdError):
    code = "dimension_mismatch"
    exit_code = 2


class IngestError(RagdError):
    code = "ingest_error"

    def __init__(self, message: str, *, external_id: str | None = None) -> None:
        super().__init__(message)
        self.external_id = external_id  # the item's id when it is known (a JSONL record), for the run's items


class UnsupportedFormat(IngestError):
    code = "unsupported_format"


class EmptyDocument(IngestError):
    code = "empty_document"


class CorruptDocument(IngestError):
    code = "corrupt_document"


class EncryptedDocument(IngestError):
    code = "encrypted_document"


class FileTooLarge(IngestError):
    code = "file_too_large"


class NotARegularFile(IngestError):
    """A FIFO, device or socket: reading one could block forever or never end."""

    code = "not_a_regular_file"


class ExtractionTimeout(IngestError):
    code = "timeout"


class Skipped(IngestError):
    """An input deliberately left out (not a failure): the item is recorded as skipped with the reason."""

    code = "skipped"


class OriginalsUnavailable(RagdError):
    """The store of original files (a directory or an S3 bucket) cannot be reached or refused a request."""

    code = "originals_unavailable"
    exit_code = 3


class NoOriginal(Skipped):
    """A document `ragd reindex` cannot read again: its original file is not kept."""

    code = "no_original"


class SymlinkOutside(Skipped):
    code = "symlink_outside_folder"


class SymlinkLoop(Skipped):
    code = "symlink_loop"


class SymlinkDangling(Skipped):
    code = "symlink_dangling"


class SymlinkWalked(Skipped):
    """A link to a folder that is ingested anyway (where it is, or already)."""

    code = "symlink_to_walked_folder"


class EmbeddingError(RagdError):
    code = "embedding_error"


class ModelNotAvailable(EmbeddingError):
    code = "model_not_available"
    exit_code = 2


class RerankerError(RagdError):
    """A reranker failed or took too long; the search fails open (the fused order stands) and says so."""

    code = "reranker_unavailable"


class ProviderError(EmbeddingError):
    """A network model provider failed after retries."""

    code = "provider_unavailable"


class LLMUnavailable(RagdError):
    """The generator (an LLM API or a local model) failed or timed out after its retries. The REST adapter
    answers 502 `llm_unavailable`."""

    code = "llm_unavailable"
    exit_code = 6


class Unauthorized(RagdError):
    """A remote ragd server refused the API key (none given, unknown or revoked): REST 401."""

    code = "unauthorized"
    exit_code = 2


class Forbidden(RagdError):
    """A remote ragd server refused a request that names another tenant than the API key's: REST 403."""

    code = "forbidden"
    exit_code = 2


class RateLimited(RetryLater):
    """Over the API key's requests per minute on a remote ragd server (REST 429 `rate_limited`); `retry_after_s`
    says when to try again."""

    code = "rate_limited"
    exit_code = 7
    default_retry_after_s = 60


class ServerUnavailable(RagdError):
    """A remote ragd server could not be reached (refused, reset, timed out) after the client's retries."""

    code = "server_unavailable"
    exit_code = 3


class UnexpectedResponse(RagdError):
    """A remote server answered with what ragd's API never sends (not JSON, a body of another shape, a redirect,
    more than the client's size cap): the URL is likely not a ragd server's, or something between rewrites it."""

    code = "unexpected_response"
    exit_code = 3


class RequestInProgress(RetryLater):
    """A request with the same Idempotency-Key is still running on the server; retried, its response is replayed."""

    code = "idempotency_key_in_use"
    exit_code = 3
    default_retry_after_s = 1
