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

from ._currencies import CODES, CUR, FUNDABLE, RECEIVE_OPTIONS, REGIONS
from ._gen_entities import CARD_STATES, CUSTOMER_TYPES, INTERNAL_TYPES, NO_ROW
from ._generate import CARD_STATUSES, KINDS, ST, STATUSES
from ._idempotency import MAX_KEY_LENGTH, KeyReused
from ._request import Handler, Query, Request, is_int, parse_time
from ._routes_sandbox import SANDBOX_ROUTES
from ._world import QuoteRequest, ServiceError, World, invalid
from ._world_store import RowSet
from ._world_wallets import SignedRequest, is_p256_point

MAX_LIMIT = 100
MAX_LOCKED_AMOUNT = 9_000_000_000_000_000  # the interface's maximum of lockedCurrencyAmount
DEFAULT_LIMIT = 20
MAX_RATE_AMOUNT = 10**15  # the largest sendingAmount the exchange-rate list converts
_UNKNOWN = -2  # an id that matches nothing (NO_ROW would match "no account")
#: The transaction list's filters take the interface's values (`status`: TransactionStatus;
#: `type`: INCOMING, OUTGOING) and, beyond them, the card statuses and CARD, because paylens'
#: warehouse sync re-reads open card transactions with `status=AUTHORIZED|PARTIALLY_SETTLED` and
#: its client filters `type=CARD`: a known leniency until those stop relying on it (the real
#: service may refuse them with 400).
_TX_STATUSES = tuple(s for s in STATUSES if s not in CARD_STATUSES) + tuple(sorted(CARD_STATUSES))


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
    kind = q.choice("type", KINDS)
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


def _optional_text(body: dict[str, Any], name: str, errors: list[dict[str, str]]) -> str | None:
    """An optional string field: absent is None, but a present one (null included) must be text."""
    value = body.get(name)
    if name in body and not isinstance(value, str):
        errors.append({"field": name, "message": "must be a string"})
        return None
    return value


def _reason(r: Request) -> str | None:
    """The optional free-text `reason` of a cancel or reject body."""
    errors: list[dict[str, str]] = []
    reason = _optional_text(_body(r), "reason", errors)
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


# --- quotes, rates, config, wallet auth -----------------------------------------------------------


def get_quote(r: Request) -> tuple[int, Any]:
    return 200, r.world.get_quote(r.args[0])


def execute_quote(r: Request) -> tuple[int, Any]:
    return 200, r.world.execute_quote(r.args[0])


def create_quote(r: Request) -> tuple[int, Any]:
    w = r.world
    body = r.body if isinstance(r.body, dict) else {}
    errors: list[dict[str, str]] = []
    acc = w.entities.accounts

    def account(part: str, kind_field: str, kind_value: str) -> int | None:
        obj = body.get(part)
        if not isinstance(obj, dict):
            errors.append({"field": part, "message": "is required and must be an object"})
            return None
        if obj.get(kind_field) != kind_value:
            errors.append(
                {
                    "field": f"{part}.{kind_field}",
                    "message": f"the sandbox quotes between accounts: must be {kind_value}",
                }
            )
            return None
        row = (
            w.entities.account_index.get(obj.get("accountId"))
            if isinstance(obj.get("accountId"), str)
            else None
        )
        if row is None:
            errors.append(
                {"field": f"{part}.accountId", "message": "must be the id of an existing account"}
            )
        return row

    source = body.get("source")
    funding = None
    if isinstance(source, dict) and source.get("sourceType") == "REALTIME_FUNDING":
        funding = _funding_source(w, source, errors)
        src: int | None = None if funding is None else NO_ROW
    else:
        src = account("source", "sourceType", "ACCOUNT")

    def sending_currency() -> str | None:
        if funding is not None:
            return CODES[funding[1]]
        return None if src is None or src == NO_ROW else CODES[acc.currency[src]]

    destination = body.get("destination")
    uma = None
    if isinstance(destination, dict) and destination.get("destinationType") == "UMA_ADDRESS":
        uma = _uma_destination(w, destination, sending_currency(), errors)
        dst: int | None = None if uma is None else NO_ROW
    else:
        dst = account("destination", "destinationType", "ACCOUNT")
    if src is not None and src != NO_ROW and (acc.external[src] or acc.owner[src] == NO_ROW):
        errors.append(
            {"field": "source.accountId", "message": "must be an internal account of a customer"}
        )
    if src is not None and src == dst:
        errors.append(
            {"field": "destination.accountId", "message": "must differ from the source account"}
        )
    rail = (
        body["destination"].get("paymentRail")
        if isinstance(body.get("destination"), dict)
        else None
    )
    if rail is not None and dst is not None and dst != NO_ROW:
        rails = (
            [name for name, _ in RECEIVE_OPTIONS[acc.kind[dst]].rails] if acc.external[dst] else []
        )
        if rail not in rails:
            errors.append(
                {
                    "field": "destination.paymentRail",
                    "message": f"must be one of the account's rails: {', '.join(rails) or 'none'}",
                }
            )
    side = body.get("lockedCurrencySide")
    if side not in ("SENDING", "RECEIVING"):
        errors.append({"field": "lockedCurrencySide", "message": "must be SENDING or RECEIVING"})
    amount = body.get("lockedCurrencyAmount")
    if not is_int(amount, 1, MAX_LOCKED_AMOUNT):
        errors.append(
            {
                "field": "lockedCurrencyAmount",
                "message": f"must be an integer in minor units from 1 to {MAX_LOCKED_AMOUNT}",
            }
        )
    execute = body.get("immediatelyExecute", False)
    if not isinstance(execute, bool):
        errors.append({"field": "immediatelyExecute", "message": "must be a boolean"})
    elif execute and funding is not None:
        errors.append(
            {
                "field": "immediatelyExecute",
                "message": "a REALTIME_FUNDING quote executes when its funds arrive",
            }
        )
    description = _optional_text(body, "description", errors)
    override = _fee_override(body.get("platformFeeOverride"), sending_currency(), errors)
    if errors:
        raise invalid(errors)
    assert src is not None and dst is not None
    request = QuoteRequest(
        src,
        dst,
        side,
        amount,
        rail=rail,
        execute=execute,
        description=description,
        fee_override=override,
        funding=funding,
        uma=uma,
    )
    return 201, w.create_quote(request)


def _uma_destination(
    w: World, destination: dict[str, Any], sending: str | None, errors: list[dict[str, str]]
) -> tuple[int, int] | None:
    """(person row, receiving currency code) of a UMA_ADDRESS destination: one of the sandbox's
    counterparties (the UMA addresses its transactions show); the receiving currency defaults
    to the sending one."""
    address, currency = destination.get("umaAddress"), destination.get("currency", sending)
    if not isinstance(address, str) or not address.startswith("$") or "@" not in address:
        errors.append({"field": "destination.umaAddress", "message": "must be a UMA address"})
        return None
    if not isinstance(currency, str) or currency not in CUR:
        errors.append({"field": "destination.currency", "message": "must be a currency code"})
        return None
    person = w.tx.person_by_uma(address)
    if person is None:
        raise ServiceError(
            400,
            "INVALID_RECEIVER",
            f"no receiver at {address}",
            {"errors": [{"field": "destination.umaAddress", "message": "no receiver there"}]},
        )
    return person, CUR[currency]


def _funding_source(
    w: World, source: dict[str, Any], errors: list[dict[str, str]]
) -> tuple[int, int] | None:
    """(customer row, currency code) of a REALTIME_FUNDING source: the platform sends the funds
    as the quote's `paymentInstructions` say (`POST /sandbox/send` simulates it)."""
    customer_id, currency = source.get("customerId"), source.get("currency")
    customer = w.entities.customer_index.get(customer_id) if isinstance(customer_id, str) else None
    if customer is None:
        errors.append(
            {
                "field": "source.customerId",
                "message": "the sandbox funds quotes of customers: must be a customer's id",
            }
        )
    if not isinstance(currency, str) or currency not in FUNDABLE:
        errors.append(
            {"field": "source.currency", "message": f"must be one of {', '.join(FUNDABLE)}"}
        )
    if customer is None or currency not in FUNDABLE:
        return None
    return customer, CUR[currency]


def _fee_override(
    value: Any, sending: str | None, errors: list[dict[str, str]]
) -> tuple[int, int] | None:
    if value is None:
        return None
    fixed = value.get("platformFixedFee") if isinstance(value, dict) else None
    bps = value.get("platformVariableFeeBps") if isinstance(value, dict) else None
    ok_fixed = (
        isinstance(fixed, dict) and is_int(fixed.get("amount")) and fixed.get("currency") == sending
    )
    if not ok_fixed or not is_int(bps, 0, 10_000):
        errors.append(
            {
                "field": "platformFeeOverride",
                "message": "needs platformFixedFee {amount >= 0, currency: the sending currency} and platformVariableFeeBps from 0 to 10000",
            }
        )
        return None
    return bps, fixed["amount"]


def list_exchange_rates(r: Request) -> tuple[int, Any]:
    q = Query(r.params)
    source = q.text("sourceCurrency")
    destinations = q.texts("destinationCurrency")
    # past this, converted amounts and fees would leave the int64 range in some corridors
    amount = q.integer("sendingAmount", 10_000, 0, MAX_RATE_AMOUNT)
    q.check()
    return 200, {"data": r.world.exchange_rates(source, destinations, amount)}


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
    return r.world.wallets.add(_signed(r, "POST /auth/credentials"), row, kind, body)


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


def idempotent(operation: str, handler: Handler) -> Handler:
    """`handler` with the Idempotency-Key header honoured."""

    def handle(r: Request) -> tuple[int, Any]:
        key = r.headers.get("idempotency-key")
        if key is None:
            return handler(r)
        if not key or len(key) > MAX_KEY_LENGTH:
            raise invalid(
                [
                    {
                        "field": "Idempotency-Key",
                        "message": f"must be 1 to {MAX_KEY_LENGTH} characters",
                    }
                ]
            )
        fingerprint = hashlib.sha256(
            orjson.dumps([r.args, r.body], option=orjson.OPT_SORT_KEYS)
        ).hexdigest()
        try:
            return r.world.idempotency.run(operation, key, fingerprint, lambda: handler(r))
        except KeyReused:
            raise invalid(
                [
                    {
                        "field": "Idempotency-Key",
                        "message": "was already used with another request; use a new key",
                    }
                ],
                "the idempotency key was used with a different request",
            ) from None

    return handle


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
