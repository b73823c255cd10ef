"""The client's resources against the sandbox: typed results equal the service's records."""

from __future__ import annotations

from datetime import UTC, date, datetime

import httpx
import pytest

from paylens import Client, InvalidArgumentError, Sandbox
from paylens import models as m
from paylens.errors import (
    BadRequestError,
    ConflictError,
    NotFoundError,
    ResponseValidationError,
)

from ._helpers import same_instants


def _truth(sandbox: Sandbox) -> list[dict]:
    return list(sandbox.world.all_transactions())


def test_each_transaction_variant_round_trips(shared_sandbox: Sandbox) -> None:
    client = shared_sandbox.client()
    truth = _truth(shared_sandbox)
    expected = {
        "INCOMING": m.IncomingTransaction,
        "OUTGOING": m.OutgoingTransaction,
        "CARD": m.CardTransaction,
    }
    for kind, cls in expected.items():
        wire = next(t for t in truth if t["type"] == kind)
        tx = client.transactions.get(wire["id"])
        assert isinstance(tx, cls)
        assert same_instants(tx.to_wire()) == same_instants(wire)


def test_listing_returns_every_record_exactly_as_the_service_holds_it(
    shared_sandbox: Sandbox,
) -> None:
    client = shared_sandbox.client()
    truth = {t["id"]: t for t in _truth(shared_sandbox)}
    listed = list(client.transactions.list(sort_order="asc"))
    assert len(listed) == len(truth)
    assert [t.id for t in listed] == list(truth)
    assert all(same_instants(t.to_wire()) == same_instants(truth[t.id]) for t in listed)


def test_money_is_integer_minor_units(shared_sandbox: Sandbox) -> None:
    client = shared_sandbox.client()
    outgoing = next(iter(client.transactions.list(type="OUTGOING", status="COMPLETED", limit=5)))
    assert isinstance(outgoing, m.OutgoingTransaction)
    assert type(outgoing.sent_amount.amount) is int
    assert type(outgoing.fees) is int
    assert isinstance(outgoing.sent_amount.currency.decimals, int)


def test_pages_carry_total_count_and_default_to_100(shared_sandbox: Sandbox) -> None:
    client = shared_sandbox.client()
    total = shared_sandbox.world.transaction_count()
    pages = list(client.transactions.list().pages())
    assert [len(p.data) for p in pages[:-1]] == [100] * (len(pages) - 1)
    assert sum(len(p.data) for p in pages) == total
    assert {p.total_count for p in pages} == {total}
    assert pages[-1].has_more is False


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_every_item_once_across_pages_in_both_orders(shared_sandbox: Sandbox, order: str) -> None:
    client = shared_sandbox.client()
    ids = [t.id for t in client.transactions.list(sort_order=order, limit=37)]
    assert len(ids) == len(set(ids)) == shared_sandbox.world.transaction_count()
    stamps = [t["createdAt"] for t in _truth(shared_sandbox)]
    by_id = {t["id"]: t["createdAt"] for t in _truth(shared_sandbox)}
    listed = [by_id[i] for i in ids]
    assert listed == (sorted(stamps) if order == "asc" else sorted(stamps, reverse=True))


def test_filters_match_a_brute_force_selection(shared_sandbox: Sandbox) -> None:
    client = shared_sandbox.client()
    truth = _truth(shared_sandbox)
    sample = next(t for t in truth if t["type"] == "OUTGOING")

    def ids(**filters: object) -> set[str]:
        return {t.id for t in client.transactions.list(**filters)}

    assert ids(type="INCOMING") == {t["id"] for t in truth if t["type"] == "INCOMING"}
    assert ids(status="PENDING") == {t["id"] for t in truth if t["status"] == "PENDING"}
    assert ids(customer_id=sample["customerId"]) == {
        t["id"] for t in truth if t["customerId"] == sample["customerId"]
    }
    assert ids(platform_customer_id=sample["platformCustomerId"]) == {
        t["id"] for t in truth if t["platformCustomerId"] == sample["platformCustomerId"]
    }
    assert ids(type="OUTGOING", status="FAILED") == {
        t["id"] for t in truth if t["type"] == "OUTGOING" and t["status"] == "FAILED"
    }
    # dates: whole inclusive UTC days
    day = date.fromisoformat(sample["createdAt"][:10])
    assert ids(start_date=day, end_date=day) == {
        t["id"] for t in truth if t["createdAt"][:10] == day.isoformat()
    }
    since = datetime.fromisoformat(sample["createdAt"].replace("Z", "+00:00"))
    assert ids(start_date=since) == {
        t["id"]
        for t in truth
        if datetime.fromisoformat(t["createdAt"].replace("Z", "+00:00")) >= since
    }


@pytest.mark.parametrize(
    ("filters", "argument"),
    [
        ({"status": "SETTLED_ISH"}, "status"),
        ({"type": "REFUND"}, "type"),
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
        ({"limit": True}, "limit"),
        ({"start_date": datetime(2025, 1, 1)}, "start_date"),  # naive
        ({"end_date": "2025-01-01T10:00:00"}, "end_date"),  # naive ISO
        ({"end_date": "last tuesday"}, "end_date"),
        ({"sort_order": "newest"}, "sort_order"),
    ],
)
def test_bad_arguments_fail_before_any_request(
    sandbox: Sandbox, client: Client, filters: dict, argument: str
) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        client.transactions.list(**filters)
    assert info.value.argument == argument
    assert argument in str(info.value)
    assert sandbox.requests.count() == 0


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda c: c.transactions.get("12345"), "transaction_id"),
        (
            lambda c: c.transactions.get("Customer:6f1c1a38-8f0e-4c4e-9d47-1d2a3b4c5d6e"),
            "transaction_id",
        ),
        (lambda c: c.transactions.cancel("Transaction:not-a-uuid"), "transaction_id"),
        (lambda c: c.cards.get("Transaction:6f1c1a38-8f0e-4c4e-9d47-1d2a3b4c5d6e"), "card_id"),
        (lambda c: c.customers.get("cust_1"), "customer_id"),
        (lambda c: c.quotes.get("Quote:xyz"), "quote_id"),
        (
            lambda c: c.cards.update("Card:6f1c1a38-8f0e-4c4e-9d47-1d2a3b4c5d6e", state="LOST"),
            "state",
        ),
    ],
)
def test_wrong_id_forms_fail_before_any_request(
    sandbox: Sandbox, client: Client, call, argument: str
) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        call(client)
    assert info.value.argument == argument
    assert sandbox.requests.count() == 0


def test_aware_datetimes_in_other_zones_become_utc(sandbox: Sandbox, client: Client) -> None:
    from datetime import timedelta, timezone

    plus2 = timezone(timedelta(hours=2))
    list(
        client.transactions.list(
            start_date=datetime(2025, 9, 1, 2, 0, tzinfo=plus2), limit=1
        ).pages()
    )
    method, path, _ = sandbox.requests.entries[-1]
    assert (method, path) == ("GET", "/transactions")


def _pending_bank_transfers(sandbox: Sandbox) -> list[dict]:
    return [
        t
        for t in sandbox.world.all_transactions()
        if t["type"] == "OUTGOING"
        and t["status"] in ("PENDING", "PROCESSING")
        and t.get("paymentRail") in ("ACH", "WIRE")
    ]


def test_cancel_outcomes(sandbox: Sandbox, client: Client) -> None:
    candidates = _pending_bank_transfers(sandbox)
    assert candidates, "the sandbox generates pending ACH and wire transfers"
    cancelled, refused = [], []
    for wire in candidates:
        try:
            cancelled.append(client.transactions.cancel(wire["id"], reason="duplicate payment"))
        except ConflictError as exc:
            assert exc.code == "TRANSACTION_NOT_CANCELLABLE"
            refused.append(wire["id"])
    assert cancelled and refused, "some inside their cancellation window and some past it"
    for tx in cancelled:
        assert same_instants(tx.to_wire()) == same_instants(
            sandbox.world.get_transaction_wire(tx.id)
        )
        assert tx.status != "PENDING"
    with pytest.raises(ConflictError):  # a second cancel of the same transfer is refused
        client.transactions.cancel(cancelled[0].id)
    card = next(t for t in sandbox.world.all_transactions() if t["type"] == "CARD")
    with pytest.raises(BadRequestError):
        client.transactions.cancel(card["id"])
    with pytest.raises(NotFoundError) as info:
        client.transactions.cancel("Transaction:00000000-0000-4000-8000-000000000000")
    assert info.value.code == "TRANSACTION_NOT_FOUND"


def test_approve_and_reject_agent_payments() -> None:
    sandbox = Sandbox(seed=5, transactions=6_000)
    client = sandbox.client()
    waiting = [
        t for t in sandbox.world.all_transactions() if t.get("agentId") and t["status"] == "PENDING"
    ]
    assert len(waiting) >= 2
    approved = client.transactions.approve(waiting[0]["id"])
    rejected = client.transactions.reject(waiting[1]["id"], reason="not authorised")
    assert approved.id == waiting[0]["id"] and rejected.id == waiting[1]["id"]
    assert approved.status != "PENDING" or rejected.status != "PENDING"
    for tid in (waiting[0]["id"], waiting[1]["id"]):
        with pytest.raises(ConflictError) as info:
            client.transactions.approve(tid)
        assert info.value.code == "TRANSACTION_NOT_PENDING_PLATFORM_APPROVAL"


def test_confirm_receipt(sandbox: Sandbox, client: Client) -> None:
    wire = next(
        t
        for t in sandbox.world.all_transactions()
        if t["type"] == "OUTGOING" and t["status"] == "COMPLETED"
    )
    when = datetime(2025, 10, 1, 9, 30, tzinfo=UTC)
    tx = client.transactions.confirm_receipt(wire["id"], confirmed_at=when)
    assert tx.receipt_delivery_confirmed_at == when


def test_card_state_changes_follow_the_table(sandbox: Sandbox, client: Client) -> None:
    card = next(c for c in client.cards.list(state="ACTIVE"))
    assert client.cards.update(card.id, state="FROZEN").state == "FROZEN"
    assert client.cards.update(card.id, state="ACTIVE").state == "ACTIVE"
    assert client.cards.update(card.id, state="CLOSED").state == "CLOSED"
    with pytest.raises(ConflictError) as info:
        client.cards.update(card.id, state="CLOSED")
    assert info.value.code == "CARD_ALREADY_CLOSED"
    with pytest.raises(ConflictError) as info:
        client.cards.update(card.id, state="ACTIVE")
    assert info.value.code in ("CARD_NOT_MUTABLE", "INVALID_STATE_TRANSITION")
    assert client.cards.get(card.id).state == "CLOSED"


def test_other_resources_are_typed(shared_sandbox: Sandbox) -> None:
    client = shared_sandbox.client()
    customers = list(client.customers.list(limit=50))
    assert customers and all(c.id.startswith("Customer:") for c in customers)
    assert client.customers.get(customers[0].id).id == customers[0].id
    accounts = list(client.internal_accounts.list(customer_id=customers[0].id))
    assert all(isinstance(a, m.InternalAccount) for a in accounts)
    assert all(isinstance(a, m.InternalAccount) for a in client.internal_accounts.list_platform())
    assert all(isinstance(a, m.ExternalAccount) for a in client.external_accounts.list(limit=20))
    cards = list(client.cards.list())
    assert cards and all(isinstance(c, m.Card) for c in cards)
    rates = client.exchange_rates.list(source_currency="USD")
    assert rates and all(isinstance(r, m.ExchangeRate) for r in rates)
    config = client.config.get()
    assert isinstance(config, m.PlatformConfig)
    quote_id = next(
        t["quoteId"] for t in shared_sandbox.world.all_transactions() if t.get("quoteId")
    )
    assert client.quotes.get(quote_id).id == quote_id


@pytest.mark.http
def test_listing_over_loopback_equals_in_process(sandbox: Sandbox, http_client: Client) -> None:
    over_http = [
        same_instants(t.to_wire()) for t in http_client.transactions.list(sort_order="asc")
    ]
    assert over_http == [same_instants(t) for t in sandbox.world.all_transactions()]


@pytest.mark.parametrize(
    ("filters", "named"),
    [
        ({"type": "CARD"}, "type"),
        ({"status": "SETTLED"}, "status"),
        ({"status": "AUTHORIZED"}, "status"),
    ],
)
def test_list_filters_take_only_the_interfaces_values(
    shared_sandbox: Sandbox, filters: dict[str, str], named: str
) -> None:
    # card transactions are listed, but the interface's filters cannot select them: the client
    # says so before sending (the sandbox's 400: test_sandbox_validation)
    with pytest.raises(InvalidArgumentError, match=named):
        shared_sandbox.client().transactions.list(**filters)


def test_a_date_time_string_keeps_its_digits_past_the_microsecond() -> None:
    # RFC 3339 allows any fraction: a service writing nanoseconds is asked at nanoseconds
    from paylens.client import _params

    assert _params.timestamp("end_date", "2025-01-01T02:00:00.000000999+02:00") == (
        "2025-01-01T00:00:00.000000999Z"
    )
    assert _params.timestamp("end_date", "2025-01-01T00:00:00.123456000Z") == (
        "2025-01-01T00:00:00.123456Z"
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"id": "PlatformConfig:1", "umaDomain": 7}', "PlatformConfig:1"),  # no model built
        (b'{"umaDomain": "x"}', None),
        (b'{"id": 12}', None),
        (b"[]", ResponseValidationError),
        (b"<html>", ResponseValidationError),
    ],
)
def test_config_get_id_reads_the_id_alone(body: bytes, expected: object) -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    with Client("https://api.example.com/2025-10-13", "id", "secret", transport=transport) as c:
        if isinstance(expected, type):
            with pytest.raises(expected, match="GET /2025-10-13/config answered a body"):
                c.config.get_id()
        else:
            assert c.config.get_id() == expected
