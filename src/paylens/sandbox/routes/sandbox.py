"""The interface's own sandbox routes (`/sandbox/...` under the version root): what a simulator of
the service lets a platform trigger that the real service only lets the outside world do.

- `POST /sandbox/send`: the funds of a REALTIME_FUNDING quote arrive (see `world.funding`);
  answers the transaction.
- `POST /sandbox/uma/receive`: an incoming UMA payment to a customer, waiting for the platform's
  approve or reject (see `world.incoming`); answers the IncomingTransaction.
- `POST /sandbox/internal-accounts/{accountId}/fund`: adds to an internal account's balance;
  answers the InternalAccount.
- `POST /sandbox/cards/{id}/simulate/authorization|clearing|return`: card events (see
  `world.cards`); answer 202 with the issuer transaction token.
- `POST /sandbox/webhooks/test`: posts the TEST webhook to the configured endpoint and answers
  what the endpoint answered (`TestWebhookResponse`); 400 `WEBHOOK_ENDPOINT_NOT_SET` without
  one, 400 `WEBHOOK_DELIVERY_ERROR` when it cannot be reached (see `wire.webhooks`).

These routes are the service's, not paylens' own control channel (`/_control/...`, see `wire.app`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..currencies import CURRENCY_CODES, CURRENCY_INDEX
from ..errors import ServiceError, invalid
from ..generate.entities import NO_ROW
from ..generate.schema import CARD
from ..wire.request import INT64_MAX, Request, is_int
from ..world.cards import CardEventRefused, authorize, clear, refund
from ..world.events import Transition
from ..world.funding import FundingRefused, send_funds
from ..world.incoming import receive_uma_payment
from .registry import route

#: The interface's maximum of one sandbox funding (minor units).
MAX_FUNDING = 100_000_000_000


def _object(request: Request) -> dict[str, Any]:
    if not isinstance(request.body, dict):
        raise invalid([{"field": "body", "message": "must be a JSON object"}])
    return request.body


@route("POST", "/sandbox/webhooks/test")
def send_test_webhook(r: Request) -> tuple[int, Any]:
    send = r.world.test_webhook
    if send is None:
        raise ServiceError(400, "WEBHOOK_ENDPOINT_NOT_SET", "no webhook endpoint is configured")
    return 200, send()


@route("POST", "/sandbox/uma/receive")
def receive_uma(request: Request) -> tuple[int, Any]:
    world, body = request.world, _object(request)
    errors: list[dict[str, str]] = []
    sender = body.get("senderUmaAddress")
    if not isinstance(sender, str) or not sender.startswith("$") or "@" not in sender:
        errors.append({"field": "senderUmaAddress", "message": "must be a UMA address ($a@b)"})
    receiver, customer_id = body.get("receiverUmaAddress"), body.get("customerId")
    if receiver is None and customer_id is None:
        errors.append(
            {"field": "customerId", "message": "customerId or receiverUmaAddress is required"}
        )
    for name, value in (("receiverUmaAddress", receiver), ("customerId", customer_id)):
        if value is not None and not isinstance(value, str):
            errors.append({"field": name, "message": "must be a string"})
    code = body.get("receivingCurrencyCode")
    if not isinstance(code, str):
        errors.append({"field": "receivingCurrencyCode", "message": "is required"})
    amount = body.get("receivingCurrencyAmount")
    if not is_int(amount, 1, INT64_MAX // 2):
        errors.append(
            {"field": "receivingCurrencyAmount", "message": "must be a positive int64 amount"}
        )
    if errors:
        raise invalid(errors)
    assert isinstance(code, str) and isinstance(amount, int) and isinstance(sender, str)
    if isinstance(customer_id, str):
        customer = world.customer_row(customer_id)
    else:
        customer = world.views.customer_by_uma(str(receiver))
        if customer < 0:
            raise ServiceError(404, "UMA_NOT_FOUND", f"no receiver at {receiver}")
    account = _internal_account_in(request, customer, code)
    row = receive_uma_payment(world, account, amount, sender)
    return 200, world.tx.transactions(np.array([row]), world.now_us)[0]


def _internal_account_in(request: Request, customer: int, code: str) -> int:
    """The customer's first internal (non-wallet) account in currency `code`."""
    world = request.world
    e = world.entities
    currency = CURRENCY_INDEX.get(code, NO_ROW)
    owned = e.internal_of.items[e.internal_of.start[customer] : e.internal_of.start[customer + 1]]
    for row in sorted(owned.tolist()):
        if e.accounts.currency[row] == currency and not world.wallets.is_wallet(row):
            return int(row)
    raise ServiceError(
        400,
        "INVALID_CURRENCY",
        f"the receiver holds no internal account in {code}",
        {"errors": [{"field": "receivingCurrencyCode", "message": "not held by the receiver"}]},
    )


@route("POST", "/sandbox/internal-accounts/{id}/fund")
def fund_internal_account(request: Request) -> tuple[int, Any]:
    world = request.world
    row = world.account_row(request.args[0])
    acc = world.entities.accounts
    if acc.external[row]:
        raise ServiceError(404, "REFERENCE_NOT_FOUND", f"no internal account {request.args[0]}")
    amount = _object(request).get("amount")
    if not isinstance(amount, int) or not is_int(amount, 1, MAX_FUNDING):
        raise invalid(
            [{"field": "amount", "message": f"must be an integer from 1 to {MAX_FUNDING}"}]
        )
    balance = int(acc.balance[row])
    if balance + amount > INT64_MAX:
        raise invalid([{"field": "amount", "message": "the balance would pass the int64 range"}])
    acc.balance[row] = balance + amount
    world.ledger.funded(row)
    account = world.views.internal_account(row)
    world.announce(
        [Transition("internal_account", "INTERNAL_ACCOUNT.BALANCE_UPDATED", account, world.now_us)]
    )
    return 200, account


def _card_event(
    request: Request, body: dict[str, Any], errors: list[dict[str, str]], *, low: int
) -> tuple[int, int]:
    """(card row, transaction row) of a clearing or return, after checking its body."""
    world = request.world
    card = world.card_row(request.args[0])
    transaction_id = body.get("cardTransactionId")
    if not isinstance(transaction_id, str) or not transaction_id:
        errors.append({"field": "cardTransactionId", "message": "is required"})
    if not is_int(body.get("amount"), low):
        errors.append({"field": "amount", "message": f"must be an integer from {low}"})
    if errors:
        raise invalid(errors)
    assert isinstance(transaction_id, str)
    row = world.transaction_row(transaction_id)
    if world.store.col("card")[row] != card or world.store.col("kind")[row] != CARD:
        raise ServiceError(
            404, "TRANSACTION_NOT_FOUND", f"no transaction {transaction_id} on this card"
        )
    return card, row


def _simulated(event: Any) -> tuple[int, Any]:
    try:
        return 202, event()
    except CardEventRefused as refused:
        raise invalid([{"field": refused.field, "message": refused.message}]) from None


@route("POST", "/sandbox/cards/{id}/simulate/authorization")
def simulate_authorization(request: Request) -> tuple[int, Any]:
    world = request.world
    card = world.card_row(request.args[0])
    body, errors = _object(request), []
    amount = body.get("amount")
    if not is_int(amount, 1):
        errors.append({"field": "amount", "message": "must be a positive int64 amount"})
    currency = body.get("currency")
    code = CURRENCY_CODES[int(world.entities.cards.currency[card])]
    if not isinstance(currency, dict) or currency.get("code") != code:
        errors.append({"field": "currency.code", "message": f"must be {code}, the card's currency"})
    else:
        if "decimals" in currency and not is_int(currency["decimals"]):
            errors.append({"field": "currency.decimals", "message": "must be an integer from 0"})
        for name in ("name", "symbol"):
            if name in currency and not isinstance(currency[name], str):
                errors.append({"field": f"currency.{name}", "message": "must be a string"})
    merchant = body.get("merchant")
    if not isinstance(merchant, dict) or not isinstance(merchant.get("descriptor"), str):
        errors.append({"field": "merchant.descriptor", "message": "is required"})
    elif not merchant["descriptor"].strip():
        errors.append({"field": "merchant.descriptor", "message": "must not be empty"})
    for name in ("mcc", "country"):
        if isinstance(merchant, dict) and not isinstance(merchant.get(name, ""), str):
            errors.append({"field": f"merchant.{name}", "message": "must be a string"})
    if errors:
        raise invalid(errors)
    assert isinstance(merchant, dict) and isinstance(amount, int)
    return _simulated(lambda: authorize(world, card, amount, merchant))


@route("POST", "/sandbox/cards/{id}/simulate/clearing")
def simulate_clearing(request: Request) -> tuple[int, Any]:
    body = _object(request)
    _, row = _card_event(request, body, [], low=0)
    return _simulated(lambda: clear(request.world, row, body["amount"]))


@route("POST", "/sandbox/cards/{id}/simulate/return")
def simulate_return(request: Request) -> tuple[int, Any]:
    body = _object(request)
    _, row = _card_event(request, body, [], low=1)
    return _simulated(lambda: refund(request.world, row, body["amount"]))


@route("POST", "/sandbox/send")
def sandbox_send(request: Request) -> tuple[int, Any]:
    body, errors = _object(request), []
    quote_id, code = body.get("quoteId"), body.get("currencyCode")
    if not isinstance(quote_id, str) or not quote_id:
        errors.append({"field": "quoteId", "message": "is required"})
    if not isinstance(code, str) or not code:
        errors.append({"field": "currencyCode", "message": "is required"})
    amount = body.get("currencyAmount")
    if "currencyAmount" in body and not is_int(amount, 1):
        errors.append({"field": "currencyAmount", "message": "must be a positive int64 amount"})
    if errors:
        raise invalid(errors)
    assert isinstance(quote_id, str) and isinstance(code, str)
    row = request.world.quote_row(quote_id)
    try:
        return 200, send_funds(request.world, row, code, amount)
    except FundingRefused as refused:
        raise invalid([{"field": refused.field, "message": refused.message}]) from None
