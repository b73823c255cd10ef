"""Request routing of the simulated service: paths, query and body checks, and pagination.

`dispatch` maps a request (path relative to the version root, parsed query, parsed JSON body) to
the world and returns `(status, JSON value)`, or raises `ServiceError`. Every bad field of a
request is reported at once: 400 INVALID_INPUT with one FieldError per field in
`details.errors`. Methods of the interface the sandbox does not serve on a path it serves answer
501 NOT_IMPLEMENTED, unknown paths 404, any other method 405 with `Allow` (in the error shape;
the loopback server hands every method to the app). The interface's `/sandbox/...` routes are in
`_routes_sandbox`; `Idempotency-Key` handling in `_idempotency`.

Cursors are opaque (base64url of a small JSON): the position of the last row served and a
fingerprint of the filters and sort order they were issued for. Rows never move, so a cursor
stays valid while the world changes; reusing it with other filters answers 400. Lists without a
`sortOrder` parameter (customers, accounts) are in ascending (createdAt, id) order.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import orjson

from ..currencies import CUR, REGIONS
from ..errors import ServiceError, invalid
from ..generate.entities import CARD_STATES, CUSTOMER_TYPES, INTERNAL_TYPES, NO_ROW
from ..generate.transactions import CARD_STATUSES, KINDS, ST, STATUSES
from ..wire.request import Handler, Query, Request, is_int, optional_text, parse_time
from ..world.store import RowSet
from ..world.wallets import SignedRequest, is_p256_point
from ..world.world import World
from .quotes import create_quote, execute_quote, get_quote, idempotent, list_exchange_rates
from .sandbox import SANDBOX_ROUTES

MAX_LIMIT = 100
DEFAULT_LIMIT = 20
_UNKNOWN = -2  # an id that matches nothing (NO_ROW would match "no account")
#: The transaction list's filters take the interface's values only: `status` a TransactionStatus
#: (REFUNDED, the one name card transactions share, matches both kinds: the filter compares the
#: status), `type` INCOMING or OUTGOING (card transactions are listed, but no filter selects them).
_TX_STATUSES = tuple(s for s in STATUSES if s not in CARD_STATUSES or s == "REFUNDED")
_TX_KINDS = ("INCOMING", "OUTGOING")


# --- pagination -----------------------------------------------------------------------------------


def _fingerprint(resource: str, params: dict[str, list[str]], ascending: bool) -> str:
    items = sorted(
        (k, tuple(v)) for k, v in params.items() if k not in ("cursor", "limit", "sortOrder")
    )
    raw = orjson.dumps([resource, ascending, items])
    return hashlib.sha256(raw).hexdigest()[:16]


def _encode_cursor(fingerprint: str, after: int) -> str:
    return (
        base64.urlsafe_b64encode(orjson.dumps({"v": 1, "f": fingerprint, "a": after}))
        .rstrip(b"=")
        .decode()
    )


def _decode_cursor(q: Query, fingerprint: str) -> int | None:
    cursor = q.text("cursor")
    if not cursor:  # an empty `cursor=` is how some clients say "first page"
        return None
    try:
        data = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        after = data["a"]
        if data.get("v") != 1 or not isinstance(after, int) or isinstance(after, bool) or after < 0:
            raise ValueError(cursor)
    except (ValueError, KeyError, TypeError, binascii.Error, orjson.JSONDecodeError):
        q.fail("cursor", "is not a cursor this service issued")
        return None
    if data.get("f") != fingerprint:
        q.fail(
            "cursor",
            "was issued for other filters or another sort order; start again without a cursor",
        )
        return None
    return after


def paginate(
    q: Query,
    resource: str,
    select: Callable[[], RowSet],
    render: Callable[[np.ndarray], list[Any]],
    *,
    sortable: bool,
) -> dict[str, Any]:
    """A page `{data, hasMore, nextCursor?, totalCount}` of the rows `select` finds."""
    limit = q.integer("limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    ascending = not sortable or q.choice("sortOrder", ("asc", "desc")) == "asc"
    fingerprint = _fingerprint(resource, q.params, ascending)
    after = _decode_cursor(q, fingerprint)
    q.check()
    rows = select()
    page, more = rows.page(after, ascending, limit)
    body: dict[str, Any] = {"data": render(page), "hasMore": more}
    if more:
        body["nextCursor"] = _encode_cursor(fingerprint, int(page[-1]))
    body["totalCount"] = len(rows)
    return body


def _ordered(mask: np.ndarray) -> RowSet:
    return RowSet.of(np.flatnonzero(mask))


# --- transactions ---------------------------------------------------------------------------------


def list_transactions(r: Request) -> tuple[int, Any]:
    w, q = r.world, Query(r.params)
    e = w.entities
    customers = []
    if (cid := q.text("customerId")) is not None:
        customers.append(e.customer_index.get(cid, NO_ROW))
    if (pid := q.text("platformCustomerId")) is not None:
        customers.append(e.platform_customer_index.get(pid, NO_ROW))

    def account(name: str) -> int | None:
        value = q.text(name)
        return None if value is None else e.account_index.get(value, _UNKNOWN)

    status = q.choice("status", _TX_STATUSES)
    kind = q.choice("type", _TX_KINDS)
    start, end = q.time("startDate"), q.time("endDate")

    def select() -> RowSet:
        return w.select_transactions(
            customers=customers,
            account=account("accountIdentifier"),
            sender=account("senderAccountIdentifier"),
            receiver=account("receiverAccountIdentifier"),
            status=None if status is None else ST[status],
            kind=None if kind is None else KINDS.index(kind),
            reference=q.text("reference"),
            start=start,
            end=end,
        )

    return 200, paginate(q, "transactions", select, w.render_transactions, sortable=True)


def get_transaction(r: Request) -> tuple[int, Any]:
    return 200, r.world.get_transaction_wire(r.args[0])


def _body(r: Request) -> dict[str, Any]:
    if r.body is None:
        return {}
    if not isinstance(r.body, dict):
        raise invalid([{"field": "body", "message": "must be a JSON object"}])
    return r.body


def _reason(r: Request) -> str | None:
    """The optional free-text `reason` of a cancel or reject body."""
    errors: list[dict[str, str]] = []
    reason = optional_text(_body(r), "reason", errors)
    if errors:
        raise invalid(errors)
    return reason


def cancel_transaction(r: Request) -> tuple[int, Any]:
    return 200, r.world.cancel(r.args[0], _reason(r))


def approve_transaction(r: Request) -> tuple[int, Any]:
    body = _body(r)
    if "receiverCustomerInfo" in body and not isinstance(body["receiverCustomerInfo"], dict):
        raise invalid([{"field": "receiverCustomerInfo", "message": "must be an object"}])
    return 200, r.world.approve(r.args[0])


def reject_transaction(r: Request) -> tuple[int, Any]:
    return 200, r.world.reject(r.args[0], _reason(r))


def confirm_transaction(r: Request) -> tuple[int, Any]:
    body = _body(r)
    value = body.get("receiptDeliveryConfirmedAt")
    at = None
    if "receiptDeliveryConfirmedAt" in body:  # present means a date-time: null is not one
        at = parse_time(value) if isinstance(value, str) else None
        if at is None:
            raise invalid(
                [
                    {
                        "field": "receiptDeliveryConfirmedAt",
                        "message": "must be an ISO 8601 date-time with a time zone",
                    }
                ]
            )
    return 200, r.world.confirm_receipt(r.args[0], at)


# --- cards ----------------------------------------------------------------------------------------


def list_cards(r: Request) -> tuple[int, Any]:
    w, q = r.world, Query(r.params)
    cards = w.entities.cards
    holder, account, platform_id = (
        q.text("cardholderId"),
        q.text("accountId"),
        q.text("platformCardId"),
    )
    state = q.choice("state", CARD_STATES)

    def select() -> RowSet:
        mask = np.ones(len(cards), dtype=bool)
        if holder is not None:
            mask &= cards.holder == w.entities.customer_index.get(holder, _UNKNOWN)
        if state is not None:
            mask &= cards.state == CARD_STATES.index(state)
        if account is not None:
            a = w.entities.account_index.get(account, _UNKNOWN)
            mask &= np.array([a in f for f in cards.funding], dtype=bool)
        if platform_id is not None:
            mask &= np.arange(len(cards)) == w.views.card_by_platform_id(platform_id)
        return _ordered(mask)

    return 200, paginate(
        q, "cards", select, lambda rows: [w.views.card(i) for i in rows.tolist()], sortable=True
    )


def get_card(r: Request) -> tuple[int, Any]:
    return 200, r.world.views.card(r.world.card_row(r.args[0]))


def patch_card(r: Request) -> tuple[int, Any]:
    w = r.world
    w.card_row(r.args[0])  # 404 before checking the body
    body = r.body if isinstance(r.body, dict) else None
    if body is None:
        raise invalid([{"field": "body", "message": "must be a JSON object"}])
    errors: list[dict[str, str]] = []
    state = body.get("state")
    if state is not None and state not in ("ACTIVE", "FROZEN", "CLOSED"):
        errors.append({"field": "state", "message": "must be one of ACTIVE, FROZEN, CLOSED"})
    funding = body.get("fundingSources")
    if funding is not None and (
        not isinstance(funding, list) or not funding or not all(isinstance(f, str) for f in funding)
    ):
        errors.append(
            {
                "field": "fundingSources",
                "message": "must be a non-empty array of internal account ids",
            }
        )
    has_max = "maxSpendPerTransaction" in body
    max_spend = body.get("maxSpendPerTransaction")
    if max_spend is not None and not is_int(max_spend, 1):
        errors.append(
            {"field": "maxSpendPerTransaction", "message": "must be a positive integer or null"}
        )
    if state is None and funding is None and not has_max:
        errors.append(
            {
                "field": "body",
                "message": "supply at least one of state, fundingSources, maxSpendPerTransaction",
            }
        )
    if state == "CLOSED" and (funding is not None or has_max):
        errors.append(
            {
                "field": "state",
                "message": "CLOSED cannot be combined with fundingSources or maxSpendPerTransaction",
            }
        )
    if errors:
        raise invalid(errors)
    return 200, w.update_card(r.args[0], state, funding, max_spend, has_max)


# --- customers and accounts -----------------------------------------------------------------------


def list_customers(r: Request) -> tuple[int, Any]:
    w, q = r.world, Query(r.params)
    c = w.entities.customers
    platform_id = q.text("platformCustomerId")
    kind = q.choice("customerType", CUSTOMER_TYPES)
    bounds = [
        (q.time(name), column, upper)
        for name, column, upper in (
            ("createdAfter", c.created, False),
            ("createdBefore", c.created, True),
            ("updatedAfter", c.updated, False),
            ("updatedBefore", c.updated, True),
        )
    ]
    region, currency, uma = q.text("region"), q.text("currency"), q.text("umaAddress")
    deleted = q.boolean("isIncludingDeleted")

    def select() -> RowSet:
        mask = np.ones(len(c), dtype=bool) if deleted else ~c.deleted
        if platform_id is not None:
            mask &= np.arange(len(c)) == w.entities.platform_customer_index.get(
                platform_id, _UNKNOWN
            )
        if kind is not None:
            mask &= c.kind == CUSTOMER_TYPES.index(kind)
        for at, column, upper in bounds:
            if at is not None:
                mask &= (column <= at) if upper else (column >= at)
        if region is not None:
            mask &= np.array([REGIONS[k][0] == region for k in c.region.tolist()], dtype=bool)
        if currency is not None:
            code = CUR.get(currency, _UNKNOWN)
            mask &= np.array([code in cs for cs in c.currencies], dtype=bool)
        if uma is not None:
            mask &= np.arange(len(c)) == w.views.customer_by_uma(uma)
        return _ordered(mask)

    return 200, paginate(
        q,
        "customers",
        select,
        lambda rows: [w.wallets.customer_view(w.views.customer(i), i) for i in rows.tolist()],
        sortable=False,
    )


def get_customer(r: Request) -> tuple[int, Any]:
    row = r.world.customer_row(r.args[0])
    return 200, r.world.wallets.customer_view(r.world.views.customer(row), row)


def _account_rows(r: Request, q: Query, *, external: bool, platform: bool) -> Callable[[], RowSet]:
    w = r.world
    a = w.entities.accounts
    currency = q.text("currency")
    customer = None if platform else q.text("customerId")
    kind = None if external else q.choice("type", INTERNAL_TYPES)

    def select() -> RowSet:
        mask = (a.external == external) & ((a.owner == NO_ROW) if platform else (a.owner != NO_ROW))
        if currency is not None:
            mask &= a.currency == CUR.get(currency, _UNKNOWN)
        if customer is not None:
            mask &= a.owner == w.entities.customer_index.get(customer, _UNKNOWN)
        if kind is not None:
            mask &= a.kind == INTERNAL_TYPES.index(kind)
        return _ordered(mask)

    return select


def _account_list(
    resource: str, *, external: bool, platform: bool, paginated: bool = True
) -> Handler:
    """The handler of one of the four account lists."""

    def handle(r: Request) -> tuple[int, Any]:
        q = Query(r.params)
        select = _account_rows(r, q, external=external, platform=platform)
        views = r.world.views
        render_one = views.external_account if external else views.internal_account

        def render(rows: np.ndarray) -> list[Any]:
            return [render_one(i) for i in rows.tolist()]

        if paginated:
            return 200, paginate(q, resource, select, render, sortable=False)
        q.check()
        return 200, {"data": render(select().page(None, True, len(r.world.entities.accounts))[0])}

    return handle


# --- config, wallet auth -----------------------------------------------------------
def get_config(r: Request) -> tuple[int, Any]:
    return 200, r.world.platform_config()


def _wallet_account(r: Request) -> int:
    q = Query(r.params)
    account_id = q.text("accountId")
    if account_id is None:
        q.fail("accountId", "is required")
    q.check()
    assert account_id is not None
    # the interface documents no 404 on these lists: an unknown account is a bad parameter
    row = r.world.entities.account_index.get(account_id)
    if row is None or not r.world.wallets.is_wallet(row):
        raise invalid(
            [{"field": "accountId", "message": "must be an Embedded Wallet internal account"}]
        )
    return row


def list_credentials(r: Request) -> tuple[int, Any]:
    return 200, {"data": r.world.wallets.list_credentials(_wallet_account(r))}


def list_sessions(r: Request) -> tuple[int, Any]:
    return 200, {"data": r.world.wallets.list_sessions(_wallet_account(r), r.world.now_us)}


# --- wallet writes (signed retries; semantics in _world_wallets) ----------------------------------

_AUTH_TYPES = ("EMAIL_OTP", "SMS_OTP", "OAUTH", "PASSKEY")
_TRANSPORTS = ("usb", "nfc", "ble", "internal", "hybrid")
_PUBLIC_KEY_FORM = re.compile(r"^(0[23][0-9a-fA-F]{64}|04[0-9a-fA-F]{128})$")


def _signed(r: Request, operation: str) -> SignedRequest:
    return SignedRequest(operation, r.body, r.headers, r.world.now_us)


def _texts(obj: Any, names: tuple[str, ...], prefix: str, errors: list[dict[str, str]]) -> None:
    """Each of `names` must be a non-empty string of the object `obj` (named `prefix`)."""
    if not isinstance(obj, dict):
        errors.append({"field": prefix.rstrip("."), "message": "is required and must be an object"})
        return
    for name in names:
        if not isinstance(obj.get(name), str) or not obj[name]:
            errors.append({"field": prefix + name, "message": "is required and must be a string"})


def _client_key(body: dict[str, Any], errors: list[dict[str, str]], *, required: bool) -> Any:
    value = body.get("clientPublicKey")
    if value is None and not required:
        return None
    if not isinstance(value, str) or not _PUBLIC_KEY_FORM.match(value):
        errors.append(
            {"field": "clientPublicKey", "message": "must be a P-256 public key in hex (02/03/04…)"}
        )
        return None
    if not is_p256_point(value):
        errors.append({"field": "clientPublicKey", "message": "is not a point on P-256"})
    return value


def _checked(errors: list[dict[str, str]]) -> None:
    if errors:
        raise invalid(errors)


def _body_key(r: Request, *, required: bool) -> Any:
    """The checked `clientPublicKey` of the body (None when absent and optional)."""
    errors: list[dict[str, str]] = []
    key = _client_key(_body(r), errors, required=required)
    _checked(errors)
    return key


def add_credential(r: Request) -> tuple[int, Any]:
    body, errors = _body(r), []
    kind = body.get("type")
    if kind not in _AUTH_TYPES:
        errors.append({"field": "type", "message": f"must be one of {', '.join(_AUTH_TYPES)}"})
    _texts(body, ("accountId",), "", errors)
    if kind == "OAUTH":
        _texts(body, ("oidcToken",), "", errors)
    if kind == "PASSKEY":
        _texts(body, ("nickname", "challenge"), "", errors)
        attestation = body.get("attestation")
        _texts(
            attestation,
            ("credentialId", "clientDataJson", "attestationObject"),
            "attestation.",
            errors,
        )
        transports = attestation.get("transports") if isinstance(attestation, dict) else None
        if transports is not None and (
            not isinstance(transports, list) or any(t not in _TRANSPORTS for t in transports)
        ):
            errors.append(
                {"field": "attestation.transports", "message": f"items: {', '.join(_TRANSPORTS)}"}
            )
    _checked(errors)
    row = r.world.account_row(body["accountId"])
    if not r.world.wallets.is_wallet(row):
        raise invalid(
            [{"field": "accountId", "message": "must be an Embedded Wallet internal account"}]
        )
    return r.world.wallets.add(_signed(r, "POST /auth/credentials"), row, str(kind), body)


def revoke_credential(r: Request) -> tuple[int, Any]:
    operation = f"DELETE /auth/credentials/{r.args[0]}"
    return r.world.wallets.revoke(_signed(r, operation), r.args[0])


def challenge_credential(r: Request) -> tuple[int, Any]:
    key = _body_key(r, required=False)
    return 200, r.world.wallets.challenge(r.args[0], key, r.world.now_us)


def verify_credential(r: Request) -> tuple[int, Any]:
    w, body, errors = r.world, _body(r), []
    credential = w.wallets.credential(r.args[0])[1]
    kind = credential["type"]
    if body.get("type") != kind:
        errors.append({"field": "type", "message": f"must be {kind}, the credential's type"})
    elif kind == "OAUTH":
        _texts(body, ("oidcToken",), "", errors)
        key = _client_key(body, errors, required=True)
    elif kind == "PASSKEY":
        fields = ("credentialId", "clientDataJson", "authenticatorData", "signature")
        _texts(body.get("assertion"), fields, "assertion.", errors)
    else:
        _texts(body, ("encryptedOtpBundle",), "", errors)
    _checked(errors)
    signed = _signed(r, f"POST /auth/credentials/{r.args[0]}/verify")
    if kind == "OAUTH":
        return 200, w.wallets.verify_oauth(r.args[0], body["oidcToken"], key, w.now_us)
    if kind == "PASSKEY":
        request_id = signed.header("request-id")
        return 200, w.wallets.verify_passkey(r.args[0], request_id, body["assertion"], w.now_us)
    return w.wallets.verify_otp(signed, r.args[0], body["encryptedOtpBundle"])


def revoke_session(r: Request) -> tuple[int, Any]:
    operation = f"DELETE /auth/sessions/{r.args[0]}"
    return r.world.wallets.revoke_session_signed(_signed(r, operation), r.args[0])


def refresh_session(r: Request) -> tuple[int, Any]:
    key = _body_key(r, required=True)
    operation = f"POST /auth/sessions/{r.args[0]}/refresh"
    return r.world.wallets.refresh(_signed(r, operation), r.args[0], key)


def export_account(r: Request) -> tuple[int, Any]:
    key = _body_key(r, required=True)
    row = r.world.account_row(r.args[0])
    if not r.world.wallets.is_wallet(row):
        raise invalid([{"field": "id", "message": "must be an Embedded Wallet internal account"}])
    operation = f"POST /internal-accounts/{r.args[0]}/export"
    return r.world.wallets.export(_signed(r, operation), row, key)


def patch_customer(r: Request) -> tuple[int, Any]:
    w = r.world
    row = w.customer_row(r.args[0])
    body = _body(r)
    kind = CUSTOMER_TYPES[w.entities.customers.kind[row]]
    if "email" in body and "phoneNumber" in body:
        raise invalid(
            [{"field": "phoneNumber", "message": "update email and phoneNumber in separate calls"}]
        )
    errors: list[dict[str, str]] = [
        {"field": name, "message": "the sandbox updates only a customer's email"}
        for name in sorted(set(body) - {"customerType", "email"})
    ]
    if body.get("customerType") != kind:
        errors.append({"field": "customerType", "message": f"must be {kind}, the customer's type"})
    _texts(body, ("email",), "", errors)
    _checked(errors)
    signed = _signed(r, f"PATCH /customers/{r.args[0]}")
    return w.wallets.update_email(signed, row, body["email"], lambda: w.views.customer(row))


# --- routing --------------------------------------------------------------------------------------

ROUTES: dict[str, dict[str, Handler]] = {
    "/transactions": {"GET": list_transactions},
    "/transactions/{id}": {"GET": get_transaction},
    "/transactions/{id}/cancel": {"POST": cancel_transaction},
    "/transactions/{id}/approve": {"POST": approve_transaction},
    "/transactions/{id}/reject": {"POST": reject_transaction},
    "/transactions/{id}/confirm": {"POST": confirm_transaction},
    "/cards": {"GET": list_cards},
    "/cards/{id}": {"GET": get_card, "PATCH": patch_card},
    "/customers": {"GET": list_customers},
    "/customers/{id}": {"GET": get_customer, "PATCH": patch_customer},
    "/customers/internal-accounts": {
        "GET": _account_list("internal-accounts", external=False, platform=False)
    },
    "/platform/internal-accounts": {
        "GET": _account_list(
            "platform-internal-accounts", external=False, platform=True, paginated=False
        )
    },
    "/customers/external-accounts": {
        "GET": _account_list("external-accounts", external=True, platform=False)
    },
    "/platform/external-accounts": {
        "GET": _account_list("platform-external-accounts", external=True, platform=True)
    },
    "/quotes": {"POST": idempotent("createQuote", create_quote)},
    "/quotes/{id}": {"GET": get_quote},
    "/quotes/{id}/execute": {"POST": idempotent("executeQuote", execute_quote)},
    "/exchange-rates": {"GET": list_exchange_rates},
    "/config": {"GET": get_config},
    "/auth/credentials": {"GET": list_credentials, "POST": add_credential},
    "/auth/credentials/{id}": {"DELETE": revoke_credential},
    "/auth/credentials/{id}/challenge": {"POST": challenge_credential},
    "/auth/credentials/{id}/verify": {"POST": verify_credential},
    "/auth/sessions": {"GET": list_sessions},
    "/auth/sessions/{id}": {"DELETE": revoke_session},
    "/auth/sessions/{id}/refresh": {"POST": refresh_session},
    "/internal-accounts/{id}/export": {"POST": export_account},
}
ROUTES.update(SANDBOX_ROUTES)
#: Methods the interface defines on paths the sandbox serves only in part (501 for these).
INTERFACE_ONLY: dict[str, frozenset[str]] = {
    "/cards": frozenset({"POST"}),
    "/customers": frozenset({"POST"}),
    "/customers/{id}": frozenset({"DELETE"}),
    "/customers/external-accounts": frozenset({"POST"}),
    "/platform/external-accounts": frozenset({"POST"}),
    "/config": frozenset({"PATCH"}),
}
_TEMPLATES = sorted(ROUTES, key=lambda t: t.count("{"))  # literal segments win over {id}


def _match(path: str) -> tuple[str, list[str]] | None:
    parts = path.rstrip("/").split("/") if path != "/" else [""]
    for template in _TEMPLATES:
        pattern = template.split("/")
        if len(pattern) != len(parts):
            continue
        args = []
        for want, got in zip(pattern, parts, strict=True):
            if want.startswith("{"):
                if not got:
                    break
                args.append(got)
            elif want != got:
                break
        else:
            return template, args
    return None


def dispatch(
    world: World,
    method: str,
    path: str,
    params: dict[str, list[str]],
    body: Any | None,
    headers: Mapping[str, str],
) -> tuple[int, Any]:
    """Answer one request: `(status, JSON value)` (None for 204), or raise ServiceError."""
    matched = _match(path)
    if matched is None:
        raise ServiceError(404, "NOT_FOUND", f"no route {path}")
    template, args = matched
    handler = ROUTES[template].get(method.upper())
    if handler is None:
        if method.upper() in INTERFACE_ONLY.get(template, ()):
            raise ServiceError(
                501, "NOT_IMPLEMENTED", f"{method} {template} is not served by the sandbox"
            )
        raise ServiceError(
            405,
            "METHOD_NOT_ALLOWED",
            f"{method} is not allowed on {template}",
            headers={
                "Allow": ", ".join(sorted({*ROUTES[template], *INTERFACE_ONLY.get(template, ())}))
            },
        )
    return handler(Request(world, args, params, body, headers))
