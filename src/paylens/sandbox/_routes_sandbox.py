"""The interface's own sandbox routes (`/sandbox/...` under the version root): what a simulator of
the service lets a platform trigger that the real service only lets the outside world do.

- `POST /sandbox/uma/receive`: an incoming UMA payment to a customer, waiting for the platform's
  approve or reject (see `_world_incoming`); answers the IncomingTransaction.
- `POST /sandbox/internal-accounts/{accountId}/fund`: adds to an internal account's balance;
  answers the InternalAccount.
- `POST /sandbox/cards/{id}/simulate/authorization|clearing|return`: card events (see
  `_world_cards`); answer 202 with the issuer transaction token.

These routes are the service's, not paylens' own control channel (`/_control/...`, see `_app`).
"""

from __future__ import annotations

from typing import Any

from ._currencies import CUR
from ._gen_entities import NO_ROW
from ._request import INT64_MAX, Handler, Request, is_int
from ._world import ServiceError, invalid
from ._world_incoming import receive_uma_payment

#: The interface's maximum of one sandbox funding (minor units).
MAX_FUNDING = 100_000_000_000


def _object(r: Request) -> dict[str, Any]:
    if not isinstance(r.body, dict):
        raise invalid([{"field": "body", "message": "must be a JSON object"}])
    return r.body


def receive_uma(r: Request) -> tuple[int, Any]:
    w, body = r.world, _object(r)
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
    if isinstance(customer_id, str):
        customer = w.customer_row(customer_id)
    else:
        customer = w.views.customer_by_uma(receiver)
        if customer < 0:
            raise ServiceError(404, "UMA_NOT_FOUND", f"no receiver at {receiver}")
    account = _internal_account_in(r, customer, code)
    row = receive_uma_payment(w, account, amount)
    return 200, w.tx.transactions([row], w.now_us)[0]


def _internal_account_in(r: Request, customer: int, code: str) -> int:
    """The customer's first internal (non-wallet) account in currency `code`."""
    w = r.world
    acc = w.entities.accounts
    currency = CUR.get(code, NO_ROW)
    for row in range(len(acc)):
        if (
            acc.owner[row] == customer
            and not acc.external[row]
            and acc.currency[row] == currency
            and not w.wallets.is_wallet(row)
        ):
            return row
    raise ServiceError(
        400,
        "INVALID_CURRENCY",
        f"the receiver holds no internal account in {code}",
        {"errors": [{"field": "receivingCurrencyCode", "message": "not held by the receiver"}]},
    )


def fund_internal_account(r: Request) -> tuple[int, Any]:
    w = r.world
    row = w.account_row(r.args[0])
    acc = w.entities.accounts
    if acc.external[row]:
        raise ServiceError(404, "REFERENCE_NOT_FOUND", f"no internal account {r.args[0]}")
    amount = _object(r).get("amount")
    if not is_int(amount, 1, MAX_FUNDING):
        raise invalid(
            [{"field": "amount", "message": f"must be an integer from 1 to {MAX_FUNDING}"}]
        )
    balance = int(acc.balance[row])
    if balance + amount > INT64_MAX:
        raise invalid([{"field": "amount", "message": "the balance would pass the int64 range"}])
    acc.balance[row] = balance + amount
    return 200, w.views.internal_account(row)


SANDBOX_ROUTES: dict[str, dict[str, Handler]] = {
    "/sandbox/uma/receive": {"POST": receive_uma},
    "/sandbox/internal-accounts/{id}/fund": {"POST": fund_internal_account},
}
