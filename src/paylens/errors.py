"""Every error paylens raises, in one tree, so you can see at a glance what to catch.

    PaylensError                      everything paylens raises derives from this
    ├── ConfigurationError            missing PAYLENS_* variables, a base URL that is not https, ...
    ├── InvalidArgumentError          a bad argument, caught before any request is sent (also a ValueError)
    ├── PaginationError               the service's cursors loop or claim more pages that never come
    ├── WalletOperationPendingError   a signed wallet operation still PROCESSING after every re-send
    ├── ResponseValidationError       a 2xx body that does not have the interface's shape
    ├── OutcomeUnknownError           a request that changes state was sent, but its answer was lost
    │                                 (dropped connection, timeout, 5xx, unreadable 2xx): paylens never
    │                                 re-sends it blindly; read the record to learn what happened
    ├── WarehouseError                a warehouse file cannot be used as asked (paylens.warehouse)
    │   ├── WarehouseNotFoundError    no warehouse at the path yet (also a FileNotFoundError)
    │   ├── WarehouseEmptyError       a warehouse never synced: nothing to read yet
    │   ├── WarehouseLockedError      another writer (process, sync or Warehouse) holds it
    │   ├── WarehouseFileError        not a paylens warehouse (another program's file, SQLite,
    │   │                             truncated or corrupt); it is never altered
    │   ├── WarehouseSourceError      it holds another service's or platform's data: none is
    │   │                             mixed in, nothing is sent
    │   └── WarehouseStorageError     the disk is full or the file cannot be written
    ├── LakeError                     the team's Iceberg catalog cannot be used as asked
    │                                 (paylens.lake: unreachable, no such namespace, extra missing)
    ├── ReportError                   the report notebook failed (paylens.report); `html` the partial page
    │   └── TieOutError               figures of the report that should agree do not
    ├── APIConnectionError            the service could not be reached (after the retries)
    │   └── APITimeoutError           ... because it did not answer in time
    └── APIError                      the service answered with an error status
        ├── BadRequestError           400  (INVALID_INPUT, TRANSACTION_SIZE_LIMIT_EXCEEDED, ...)
        ├── AuthenticationError       401  (UNAUTHORIZED: the platform credentials were refused)
        │   ├── WalletSignatureMissingError       WALLET_SIGNATURE_MISSING: Request-Id without a stamp
        │   ├── WalletSignatureMalformedError     WALLET_SIGNATURE_MALFORMED: the stamp is unreadable
        │   ├── WalletSignatureBodyMismatchError  WALLET_SIGNATURE_BODY_MISMATCH: not the challenged request
        │   ├── WalletSignatureInvalidError       WALLET_SIGNATURE_INVALID: bad signature, or a key not allowed
        │   ├── RequestIdMissingError             REQUEST_ID_MISSING: a stamp without its Request-Id
        │   └── InvalidSignatureError             INVALID_SIGNATURE: requestId lapsed, reused or unknown;
        │                                         or a refused OTP, OIDC token or passkey assertion
        ├── NotFoundError             404  (TRANSACTION_NOT_FOUND, QUOTE_NOT_FOUND, ...)
        ├── ConflictError             409  (TRANSACTION_NOT_CANCELLABLE, CARD_ALREADY_CLOSED, ...)
        ├── LockedError               423  (ACCOUNT_LOCKED)
        ├── RateLimitError            429  (RATE_LIMITED, DAILY_VOLUME_LIMIT_EXCEEDED, ...)
        ├── InternalServerError       500  (SERVICE_SWITCH_ERROR, INTERNAL_ERROR)
        └── UnexpectedStatusError     any other status (403, 405, 412, 502, 503, ...)

Every `APIError` carries `status`, `code`, `message`, `details`, `field_errors` (the entries of
`details.errors`, spec §7), `retry_after` (seconds, when the service said), `request` (method and
URL of the request that failed; never its credentials) and `attempts`. `code` is the service's
string; `code_is_known` tells whether it is one the specification lists.

The 401 subclasses of the signed-retry protocol (spec §5.4, §5.11) end their message with what
to do about it; `details["reason"]` (when the service gives one) narrows an INVALID_SIGNATURE.

No error message, repr or attribute ever holds the client secret or a session key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "APIConnectionError",
    "APIError",
    "APITimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "ConfigurationError",
    "ConflictError",
    "FailedRequest",
    "FieldErrorInfo",
    "InternalServerError",
    "InvalidArgumentError",
    "InvalidSignatureError",
    "LakeError",
    "LockedError",
    "NotFoundError",
    "OutcomeUnknownError",
    "PaginationError",
    "PaylensError",
    "RateLimitError",
    "ReportError",
    "RequestIdMissingError",
    "ResponseValidationError",
    "TieOutError",
    "UnexpectedStatusError",
    "WalletOperationPendingError",
    "WalletSignatureBodyMismatchError",
    "WalletSignatureInvalidError",
    "WalletSignatureMalformedError",
    "WalletSignatureMissingError",
    "WarehouseEmptyError",
    "WarehouseError",
    "WarehouseFileError",
    "WarehouseLockedError",
    "WarehouseNotFoundError",
    "WarehouseSourceError",
    "WarehouseStorageError",
    "error_class_for",
    "error_class_for_status",
]


class PaylensError(Exception):
    """Base class of every error paylens raises."""


class ConfigurationError(PaylensError):
    """paylens is not configured to reach a service (environment, base URL, credentials)."""


class InvalidArgumentError(PaylensError, ValueError):
    """An argument was refused before any request was sent; the message names it and what it accepts."""

    def __init__(self, argument: str, message: str) -> None:
        self.argument = argument
        self.reason = message
        super().__init__(f"{argument}: {message}")

    @classmethod
    def unless_count(cls, argument: str, value: object, *, least: int, unit: str) -> None:
        """Raise unless `value` is a whole number (not a bool) of `unit`, `least` or more."""
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise cls(argument, f"must be a whole number of {unit}, {least} or more; got {value!r}")


class PaginationError(PaylensError):
    """The service's pagination misbehaved (a repeated cursor, or empty pages that claim more)."""


class WalletOperationPendingError(PaylensError):
    """A signed wallet operation still answered 200 PROCESSING after every re-send. The service
    keeps reconciling it: re-run the same call later (a lapsed challenge restarts cleanly)."""


@dataclass(frozen=True)
class FailedRequest:
    """What was asked, for error messages: the method and URL, never headers or credentials."""

    method: str
    url: str

    def __str__(self) -> str:
        return f"{self.method} {self.url}"


class ResponseValidationError(PaylensError):
    """A successful response whose body does not have the shape the interface promises."""

    def __init__(self, message: str, *, request: FailedRequest | None = None) -> None:
        self.request = request
        super().__init__(f"{message}" + (f" (from {request})" if request else ""))


class OutcomeUnknownError(PaylensError):
    """A request that changes state at the service was sent, and its answer was lost: the
    connection dropped after sending, the call timed out, the service (or a gateway) answered
    408 or 5xx, or a 2xx body could not be read. The service may or may not have acted, so
    paylens does not send it again; `paylens.ops` resolves it by reading the record.

    `status` is the HTTP status when one came (None for a lost connection); `error` the
    typed error of that answer, when it had one. A call sent with an `Idempotency-Key`
    (`quotes.create`, `quotes.execute`) is retried under it; when no attempt gave a readable
    answer, `idempotency_key` is that key: calling again with it gets the service's one
    answer, never a second act. It is None only for a call sent without a key."""

    def __init__(
        self,
        message: str,
        *,
        request: FailedRequest | None = None,
        status: int | None = None,
        error: APIError | None = None,
        attempts: int = 1,
        idempotency_key: str | None = None,
    ) -> None:
        self.request = request
        self.status = status
        self.error = error
        self.attempts = attempts
        self.idempotency_key = idempotency_key
        self.code = error.code if error is not None else None
        where = f" ({request})" if request else ""
        then = (
            "the request was not sent again — read the record to learn whether it took effect"
            if idempotency_key is None
            else f"call again with idempotency_key={idempotency_key!r} for the service's answer"
            " (the same key never acts twice)"
        )
        super().__init__(f"outcome unknown{where}: {message}; {then}")


class WarehouseError(PaylensError):
    """A warehouse file cannot be used as asked."""


class WarehouseNotFoundError(WarehouseError, FileNotFoundError):
    """No warehouse at the path yet: nothing has been synced there, so there is nothing to read,
    report on or act from."""


class WarehouseEmptyError(WarehouseError):
    """The warehouse was never synced (nor anything stored into it): a reader or helper would
    answer an empty frame that looks like "nothing matched"."""


class WarehouseLockedError(WarehouseError):
    """Another writer holds the warehouse file: a process (`paylens sync`, a notebook, a shell),
    or another `Warehouse` or sync in this process.

    When the holder is known (another writer's lock), `path` is the file and `holder` names it
    in one line (`process 4242 (python3 -m jupyter ...)`); otherwise both are None."""

    def __init__(
        self, message: str, *, path: Path | None = None, holder: str | None = None
    ) -> None:
        self.path = path
        self.holder = holder
        super().__init__(message)


class WarehouseFileError(WarehouseError):
    """The file is not a paylens warehouse (another program's DuckDB file, a SQLite file, a
    truncated or corrupt file). paylens refuses it and never alters it."""


class WarehouseSourceError(WarehouseError):
    """The warehouse holds another service's data (its base URL) or another platform's (its
    configuration id, at the same URL): a sync mixes none of it in, an apply sends nothing.
    Use another file, or the credentials of the file's own platform."""


class WarehouseStorageError(WarehouseError):
    """The warehouse could not be written: the disk is full, or the file system refused. What
    was committed before stays; the run can be resumed once there is room."""


class LakeError(PaylensError):
    """The Iceberg catalog or its tables cannot be used as asked (`paylens.lake`)."""


class APIConnectionError(PaylensError):
    """The service could not be reached, even after retrying."""

    def __init__(
        self, message: str, *, request: FailedRequest | None = None, attempts: int = 1
    ) -> None:
        self.request = request
        self.attempts = attempts
        where = f" ({request}, {attempts} attempt{'s' if attempts != 1 else ''})" if request else ""
        super().__init__(message + where)


class APITimeoutError(APIConnectionError):
    """The service did not answer in time."""


@dataclass(frozen=True)
class FieldErrorInfo:
    """One invalid field of a request (an entry of `details.errors`, spec §7)."""

    field: str
    constraint: str | None = None
    message: str | None = None

    def __str__(self) -> str:
        extra = ", ".join(x for x in (self.constraint, self.message) if x)
        return f"{self.field}: {extra}" if extra else self.field


class APIError(PaylensError):
    """The service answered with an error status. Subclasses name the status."""

    status_code: int | None = None

    def __init__(
        self,
        *,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        retry_after: float | None = None,
        request: FailedRequest | None = None,
        attempts: int = 1,
        body_snippet: str | None = None,
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        self.retry_after = retry_after
        self.request = request
        self.attempts = attempts
        self.body_snippet = body_snippet
        self.field_errors: list[FieldErrorInfo] = _field_errors(self.details)
        super().__init__(self._describe())

    @property
    def code_is_known(self) -> bool:
        """Whether the specification lists this code for this status."""
        from paylens.models import ERROR_CODES

        return self.code in ERROR_CODES.get(self.status, frozenset())

    #: What to do about it, appended to the message (the signed-retry errors set one).
    hint: str = ""

    def _describe(self) -> str:
        text = f"{self.status} {self.code}: {self.message}"
        if self.hint:
            text += f" — {self.hint}"
        if self.field_errors:
            text += " [" + "; ".join(str(e) for e in self.field_errors) + "]"
        if self.retry_after is not None:
            text += f" (retry after {self.retry_after:g}s)"
        if self.request is not None:
            text += f" (from {self.request}"
            text += f", {self.attempts} attempts)" if self.attempts > 1 else ")"
        if self.body_snippet is not None:
            text += f"; body: {self.body_snippet!r}"
        return text

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, code={self.code!r}, message={self.message!r})"


def _field_errors(details: dict[str, Any]) -> list[FieldErrorInfo]:
    raw = details.get("errors")
    if not isinstance(raw, list):
        return []
    out = []
    for item in raw:
        if isinstance(item, dict) and isinstance(item.get("field"), str):
            out.append(
                FieldErrorInfo(
                    field=item["field"],
                    constraint=_opt_str(item.get("constraint")),
                    message=_opt_str(item.get("message")),
                )
            )
    return out


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class BadRequestError(APIError):
    """400: the request was refused as invalid."""

    status_code = 400


class AuthenticationError(APIError):
    """401: platform credentials rejected (UNAUTHORIZED) or a wallet signature problem."""

    status_code = 401


class WalletSignatureMissingError(AuthenticationError):
    """401 WALLET_SIGNATURE_MISSING: a signed retry carried `Request-Id` but no stamp."""

    hint = (
        "stamp the challenge's payloadToSign with a session key (signer=) and send it as "
        "Service-Wallet-Signature together with Request-Id"
    )


class WalletSignatureMalformedError(AuthenticationError):
    """401 WALLET_SIGNATURE_MALFORMED: the `Service-Wallet-Signature` value cannot be read."""

    hint = (
        "send the API-key stamp as built by SessionKey.stamp(): base64url of JSON with publicKey "
        "(compressed hex), scheme SIGNATURE_SCHEME_TK_API_P256 and signature (DER hex)"
    )


class WalletSignatureBodyMismatchError(AuthenticationError):
    """401 WALLET_SIGNATURE_BODY_MISMATCH: the signed retry is not the request the challenge was
    issued for (another body, path or method)."""

    hint = "re-send the identical request (same method, path and body bytes) or start over"


class WalletSignatureInvalidError(AuthenticationError):
    """401 WALLET_SIGNATURE_INVALID: the stamp does not verify, or its key is not one allowed to
    authorise this operation (see `details["reason"]`)."""

    hint = (
        "sign with the key of an active session of this account (for a credential revoke: a "
        "session of another credential; for an OTP verify: the key whose public half was "
        "encrypted into the OTP bundle); log in again if the session expired"
    )


class RequestIdMissingError(AuthenticationError):
    """401 REQUEST_ID_MISSING: a stamp (or a passkey assertion) was sent without `Request-Id`."""

    hint = "echo the requestId of the challenge as the Request-Id header"


class InvalidSignatureError(AuthenticationError):
    """401 INVALID_SIGNATURE: the proof or the challenge it answers was refused. `reason` (from
    `details`) says which: REQUEST_ID_EXPIRED, REQUEST_ID_REUSED, REQUEST_ID_UNKNOWN,
    OTP_INVALID, OTP_EXPIRED, OTP_NOT_ISSUED, OIDC_TOKEN_STALE, OIDC_IDENTITY_MISMATCH,
    OIDC_NONCE_MISMATCH, PASSKEY_ASSERTION_INVALID, SESSION_EXPIRED (the sandbox's reasons;
    the specification names none)."""

    hint = (
        "a requestId is single-use and valid until expiresAt: start the operation again for a "
        "fresh challenge; for an OTP, OIDC token or passkey, obtain a fresh one"
    )

    @property
    def reason(self) -> str | None:
        value = self.details.get("reason")
        return value if isinstance(value, str) else None

    @property
    def challenge_lapsed(self) -> bool:
        """True when the challenge expired before the signed retry arrived."""
        return self.reason == "REQUEST_ID_EXPIRED"


class NotFoundError(APIError):
    """404: the record does not exist."""

    status_code = 404


class ConflictError(APIError):
    """409: the record is not in a state that allows the action."""

    status_code = 409


class LockedError(APIError):
    """423: the account is locked (ACCOUNT_LOCKED)."""

    status_code = 423


class RateLimitError(APIError):
    """429: too many requests, or a limit (daily volume) reached."""

    status_code = 429


class InternalServerError(APIError):
    """500: the service failed internally."""

    status_code = 500


class UnexpectedStatusError(APIError):
    """Any error status without a class of its own."""


_BY_STATUS: dict[int, type[APIError]] = {
    cls.status_code: cls
    for cls in (
        BadRequestError,
        AuthenticationError,
        NotFoundError,
        ConflictError,
        LockedError,
        RateLimitError,
        InternalServerError,
    )
    if cls.status_code is not None
}


_BY_CODE: dict[tuple[int, str], type[APIError]] = {
    (401, "WALLET_SIGNATURE_MISSING"): WalletSignatureMissingError,
    (401, "WALLET_SIGNATURE_MALFORMED"): WalletSignatureMalformedError,
    (401, "WALLET_SIGNATURE_BODY_MISMATCH"): WalletSignatureBodyMismatchError,
    (401, "WALLET_SIGNATURE_INVALID"): WalletSignatureInvalidError,
    (401, "REQUEST_ID_MISSING"): RequestIdMissingError,
    (401, "INVALID_SIGNATURE"): InvalidSignatureError,
}


def error_class_for_status(status: int) -> type[APIError]:
    """The `APIError` subclass raised for an HTTP status."""
    return _BY_STATUS.get(status, UnexpectedStatusError)


def error_class_for(status: int, code: str | None) -> type[APIError]:
    """The `APIError` subclass raised for an HTTP status and error code (the 401 codes of the
    signed-retry protocol have classes of their own)."""
    return _BY_CODE.get((status, code or "")) or error_class_for_status(status)


class ReportError(PaylensError):
    """The report notebook failed (a tie-out check, or an error); `html` is the partial report."""

    def __init__(self, message: str, html: Path | None = None) -> None:
        super().__init__(message)
        self.html = html


class TieOutError(ReportError):
    """Figures of the report that should agree do not (raised where they are compared; the
    rendered report wraps it in a `ReportError` with the partial page)."""
