"""Routes of quotes and exchange rates: the checks of a quote request (account, REALTIME_FUNDING
and UMA_ADDRESS ends, amounts, fee override) before the world creates it, and `Idempotency-Key`
on the operations that declare it (semantics in `wire.idempotency`)."""

from __future__ import annotations

from typing import Any

from ..currencies import CURRENCY_CODES, CURRENCY_INDEX, FUNDABLE, RECEIVE_OPTIONS
from ..errors import ServiceError, invalid
from ..generate.entities import NO_ROW
from ..wire.idempotency import idempotent
from ..wire.request import Query, Request, is_int, optional_text
from ..world.quotes import QuoteRequest
from ..world.world import World
from .registry import route

MAX_LOCKED_AMOUNT = 9_000_000_000_000_000  # the interface's maximum of lockedCurrencyAmount
MAX_RATE_AMOUNT = 10**15  # the largest sendingAmount the exchange-rate list converts
_OTHER_KINDS = {"source": "REALTIME_FUNDING", "destination": "UMA_ADDRESS"}


@route("GET", "/quotes/{id}")
def get_quote(request: Request) -> tuple[int, Any]:
    return 200, request.world.get_quote(request.args[0])


@route("POST", "/quotes/{id}/execute")
@idempotent("executeQuote")
def execute_quote(request: Request) -> tuple[int, Any]:
    return 200, request.world.execute_quote(request.args[0])


@route("POST", "/quotes")
@idempotent("createQuote")
def create_quote(request: Request) -> tuple[int, Any]:
    world = request.world
    body = request.body if isinstance(request.body, dict) else {}
    errors: list[dict[str, str]] = []
    acc = world.entities.accounts

    def account(part: str, kind_field: str, kind_value: str) -> int | None:
        obj = body.get(part)
        if not isinstance(obj, dict):
            errors.append({"field": part, "message": "is required and must be an object"})
            return None
        if obj.get(kind_field) != kind_value:
            errors.append(
                {
                    "field": f"{part}.{kind_field}",
                    "message": f"must be {kind_value} or {_OTHER_KINDS[part]}",
                }
            )
            return None
        account_id = obj.get("accountId")
        row = world.entities.account_index.get(account_id) if isinstance(account_id, str) else None
        if row is None:
            errors.append(
                {"field": f"{part}.accountId", "message": "must be the id of an existing account"}
            )
        return row

    source = body.get("source")
    funding = None
    if isinstance(source, dict) and source.get("sourceType") == "REALTIME_FUNDING":
        funding = _funding_source(world, source, errors)
        src: int | None = None if funding is None else NO_ROW
    else:
        src = account("source", "sourceType", "ACCOUNT")

    def sending_currency() -> str | None:
        if funding is not None:
            return CURRENCY_CODES[funding[1]]
        return None if src is None or src == NO_ROW else CURRENCY_CODES[acc.currency[src]]

    destination = body.get("destination")
    uma = None
    if isinstance(destination, dict) and destination.get("destinationType") == "UMA_ADDRESS":
        uma = _uma_destination(world, destination, sending_currency(), errors)
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
    description = optional_text(body, "description", errors)
    override = _fee_override(body.get("platformFeeOverride"), sending_currency(), errors)
    if errors:
        raise invalid(errors)
    assert src is not None and dst is not None
    assert isinstance(side, str) and isinstance(amount, int)
    quote = QuoteRequest(
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
    return 201, world.create_quote(quote)


def _uma_destination(
    world: World, destination: dict[str, Any], sending: str | None, errors: list[dict[str, str]]
) -> tuple[int, int] | None:
    """(person row, receiving currency code) of a UMA_ADDRESS destination: one of the sandbox's
    counterparties (the UMA addresses its transactions show); the receiving currency defaults
    to the sending one."""
    address, currency = destination.get("umaAddress"), destination.get("currency", sending)
    if not isinstance(address, str) or not address.startswith("$") or "@" not in address:
        errors.append({"field": "destination.umaAddress", "message": "must be a UMA address"})
        return None
    if not isinstance(currency, str) or currency not in CURRENCY_INDEX:
        errors.append({"field": "destination.currency", "message": "must be a currency code"})
        return None
    person = world.tx.person_by_uma(address)
    if person is None:
        raise ServiceError(
            400,
            "INVALID_RECEIVER",
            f"no receiver at {address}",
            {"errors": [{"field": "destination.umaAddress", "message": "no receiver there"}]},
        )
    return person, CURRENCY_INDEX[currency]


def _funding_source(
    world: World, source: dict[str, Any], errors: list[dict[str, str]]
) -> tuple[int, int] | None:
    """(customer row, currency code) of a REALTIME_FUNDING source: the platform sends the funds
    as the quote's `paymentInstructions` say (`POST /sandbox/send` simulates it)."""
    customer_id, currency = source.get("customerId"), source.get("currency")
    customer = (
        world.entities.customer_index.get(customer_id) if isinstance(customer_id, str) else None
    )
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
    return customer, CURRENCY_INDEX[currency]


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
    assert isinstance(fixed, dict) and isinstance(bps, int)
    return bps, int(fixed["amount"])


@route("GET", "/exchange-rates")
def list_exchange_rates(request: Request) -> tuple[int, Any]:
    query = Query(request.params)
    source = query.currency("sourceCurrency")
    destinations = query.currencies("destinationCurrency")
    # past this, converted amounts and fees would leave the int64 range in some corridors
    amount = query.integer("sendingAmount", 10_000, 0, MAX_RATE_AMOUNT)
    query.check()
    return 200, {"data": request.world.exchange_rates(source, destinations, amount)}
