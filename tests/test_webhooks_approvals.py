"""Incoming payment approvals at the receiver: the policy's answer (200/403/422/202) for an
`INCOMING_PAYMENT.PENDING` on an approval rail, decided once per payment (a redelivery, or
another delivery of it, gets the same answer; two receiver processes racing never decide
twice), `--approve-where` as plan selections read, and the bulk actions skipping what the
receiver decided."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from paylens import Sandbox, ops
from paylens.webhooks import Decision, EventStore, Verdict, app, events_path

from ._receiver import Signer, env, incoming_pending, served_app, signer, start_cli, store

__all__ = ["signer", "store"]  # the fixtures this module uses

pytestmark = pytest.mark.http


def _post(url: str, body: bytes, signer: Signer) -> httpx.Response:
    return httpx.post(url, content=body, headers=signer.headers(body), timeout=60)


def test_each_payment_is_decided_once_and_every_delivery_gets_that_answer(
    signer: Signer, store: EventStore
) -> None:
    asked: list[str] = []

    def policy(payment: dict[str, Any]) -> bool | Verdict:
        asked.append(payment["id"])
        amount = payment["receivedAmount"]["amount"]
        if amount > 100_000:
            return Verdict.reject("over the limit")
        if amount == 77_700:
            return Verdict.more_information(["TAX_ID", "REGISTRATION_NUMBER"])
        if amount == 42:
            return Verdict.defer()
        return True

    with served_app(app(store, public_keys=[signer.public_pem], approve=policy)) as url:
        small = _post(url, incoming_pending("Webhook:1", "Transaction:a", 50_000), signer)
        again = _post(url, incoming_pending("Webhook:1", "Transaction:a", 50_000), signer)
        other = _post(url, incoming_pending("Webhook:2", "Transaction:a", 50_000), signer)
        big = _post(url, incoming_pending("Webhook:3", "Transaction:b", 500_000), signer)
        info = _post(url, incoming_pending("Webhook:4", "Transaction:c", 77_700), signer)
        later = _post(url, incoming_pending("Webhook:5", "Transaction:d", 42), signer)
        bank = _post(url, incoming_pending("Webhook:6", "Transaction:e", 9, uma=False), signer)
    assert [(a.status_code, a.json()) for a in (small, again, other)] == [(200, {})] * 3
    assert (big.status_code, big.json()) == (
        403,
        {"code": "PAYMENT_REJECTED", "message": "over the limit", "reason": "over the limit"},
    )
    assert (info.status_code, info.json()) == (
        422,
        {
            "code": "COUNTERPARTY_INFORMATION_REQUIRED",
            "message": "more counterparty information is required: TAX_ID, REGISTRATION_NUMBER",
            "requiredFields": ["TAX_ID", "REGISTRATION_NUMBER"],
        },
    )
    assert (later.status_code, bank.status_code) == (202, 200)
    assert asked == ["Transaction:a", "Transaction:b", "Transaction:c", "Transaction:d"]
    assert [(d.transaction_id, d.webhook_id, d.status) for d in store.decisions()] == [
        ("Transaction:a", "Webhook:1", 200),
        ("Transaction:b", "Webhook:3", 403),
        ("Transaction:c", "Webhook:4", 422),
        ("Transaction:d", "Webhook:5", 202),
    ]
    assert store.count() == 6  # Webhook:1 once; the bank-rail payment stored, not decided


def test_an_approval_carries_the_receiver_information_the_sender_asked_for(
    signer: Signer, store: EventStore
) -> None:
    """The interface: approving a payment whose webhook names
    `requestedReceiverCustomerInfoFields`, the 200 must carry them in `receiverCustomerInfo`.
    Only the fields asked for leave (no more of a customer's data than asked); an approval
    without a mandatory one cannot be answered as the interface wants, so it is a rejection
    naming what was missing. A redelivery gets the same answer."""
    from ._helpers import contract_errors

    info = {"FULL_NAME": "Ada Lovelace", "BIRTH_DATE": "1815-12-10", "NATIONALITY": "GB"}

    def policy(payment: dict[str, Any]) -> bool | Verdict:
        if payment["id"] == "Transaction:bare":
            return True
        return Verdict.approve("known customer", receiver_customer_info=info)

    asked = {"FULL_NAME": True, "BIRTH_DATE": False}
    with served_app(app(store, public_keys=[signer.public_pem], approve=policy)) as url:
        given = _post(url, incoming_pending("Webhook:1", "Transaction:a", requested=asked), signer)
        again = _post(url, incoming_pending("Webhook:1", "Transaction:a", requested=asked), signer)
        optional = _post(
            url,
            incoming_pending("Webhook:2", "Transaction:b", requested={"BIRTH_DATE": False}),
            signer,
        )
        bare = _post(
            url, incoming_pending("Webhook:3", "Transaction:bare", requested=asked), signer
        )
        bare_again = _post(
            url, incoming_pending("Webhook:4", "Transaction:bare", requested=asked), signer
        )
    wanted = {"receiverCustomerInfo": {"FULL_NAME": "Ada Lovelace", "BIRTH_DATE": "1815-12-10"}}
    assert [(a.status_code, a.json()) for a in (given, again)] == [(200, wanted)] * 2
    assert (optional.status_code, optional.json()) == (
        200,
        {"receiverCustomerInfo": {"BIRTH_DATE": "1815-12-10"}},
    )
    reason = "approved without the receiver information the sender asked for: FULL_NAME"
    assert [(a.status_code, a.json()["reason"]) for a in (bare, bare_again)] == [(403, reason)] * 2
    errors = contract_errors()
    if errors is not None:
        assert errors(given.json(), "IncomingPaymentWebhookResponse") == []
    assert [(d.transaction_id, d.status) for d in store.decisions()] == [
        ("Transaction:a", 200),
        ("Transaction:b", 200),
        ("Transaction:bare", 403),
    ]


def test_without_a_policy_a_pending_payment_is_deferred_and_nothing_decided(
    signer: Signer, store: EventStore
) -> None:
    with served_app(app(store, public_keys=[signer.public_pem])) as url:
        answer = _post(url, incoming_pending("Webhook:1", "Transaction:a"), signer)
    assert (answer.status_code, answer.json()) == (202, {})
    assert store.decisions() == [] and store.count() == 1


def test_a_policy_that_fails_decides_nothing_and_the_redelivery_asks_again(
    signer: Signer, store: EventStore
) -> None:
    calls: list[int] = []

    def flaky(payment: dict[str, Any]) -> bool:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the policy's database is down")
        return False

    body = incoming_pending("Webhook:1", "Transaction:a")
    with served_app(app(store, public_keys=[signer.public_pem], approve=flaky)) as url:
        first = _post(url, body, signer)
        assert (first.status_code, store.decisions()) == (500, [])
        second = _post(url, body, signer)
    assert second.status_code == 403
    assert [(d.transaction_id, d.status) for d in store.decisions()] == [("Transaction:a", 403)]
    assert store.count() == 1


def test_approve_where_reads_the_payment_as_a_transactions_row(
    signer: Signer, store: EventStore
) -> None:
    from paylens.webhooks import approve_where

    policy = approve_where("amount_minor <= 100000 AND currency = 'USD' AND type = 'INCOMING'")
    with served_app(app(store, public_keys=[signer.public_pem], approve=policy)) as url:
        small = _post(url, incoming_pending("Webhook:1", "Transaction:a", 100_000), signer)
        big = _post(url, incoming_pending("Webhook:2", "Transaction:b", 100_001), signer)
    assert small.status_code == 200
    assert big.json()["reason"] == (
        "does not match amount_minor <= 100000 AND currency = 'USD' AND type = 'INCOMING'"
    )


#: A receiver process with a fixed policy: approve everything, or reject everything.
_RECEIVER = """
import sys
from pathlib import Path
from paylens.webhooks._serve import serve
verdict = sys.argv[3] == "approve"
serve(sys.argv[1], public_keys=[Path(sys.argv[2])], port=0, approve=lambda payment: verdict,
      ready=lambda url: print(url, flush=True))
"""


def test_two_receiver_processes_racing_on_a_payment_never_decide_twice(
    signer: Signer, tmp_path: Path
) -> None:
    db = tmp_path / "wh.duckdb"
    key = signer.write_public(tmp_path / "key.pem")
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _RECEIVER, str(db), str(key), verdict],
            stdout=subprocess.PIPE,
            text=True,
            env=env(),
        )
        for verdict in ("approve", "reject")
    ]
    try:
        urls = [p.stdout.readline().strip() for p in processes]  # type: ignore[union-attr]
        assert all(u.endswith("/webhooks") for u in urls), urls
        payments = [f"Transaction:{n}" for n in range(40)]

        def both(n: int) -> list[int]:  # the same payment, to each process at once
            bodies = [incoming_pending(f"Webhook:{n}-{k}", payments[n]) for k in (0, 1)]
            with ThreadPoolExecutor(2) as pool:
                return [
                    a.status_code
                    for a in pool.map(lambda i: _post(urls[i], bodies[i], signer), (0, 1))
                ]

        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(both, range(len(payments))))
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=60)
    with EventStore(events_path(db)) as store:
        decided = {d.transaction_id: d.status for d in store.decisions()}
        assert store.count() == 2 * len(payments)
    assert sorted(decided) == sorted(payments)
    for payment, (first, second) in zip(payments, answers, strict=True):
        assert first == second == decided[payment], payment
    assert set(decided.values()) <= {200, 403}


def test_cli_approve_where_decides(signer: Signer, tmp_path: Path) -> None:
    db = tmp_path / "wh.duckdb"
    key = signer.write_public(tmp_path / "key.pem")
    process, url = start_cli(db, key, extra=("--approve-where", "amount_minor < 1000"))
    try:
        small = _post(url, incoming_pending("Webhook:1", "Transaction:a", 999), signer)
        big = _post(url, incoming_pending("Webhook:2", "Transaction:b", 1000), signer)
    finally:
        process.terminate()
        process.wait(timeout=60)
    assert (small.status_code, big.status_code) == (200, 403)


def test_the_bulk_actions_skip_what_the_receiver_decided(tmp_path: Path) -> None:
    from paylens.warehouse import Warehouse

    sandbox = Sandbox(seed=5, transactions=6_000)
    client = sandbox.client()
    with Warehouse(tmp_path / "approvals.duckdb") as wh:
        wh.sync(client, progress=False, resources=["transactions"])
        waiting = list(
            wh.sql(
                "SELECT id FROM transactions WHERE agent_id IS NOT NULL AND status = 'PENDING'"
                " ORDER BY created_at, id"
            )["id"]
        )
        assert len(waiting) >= 3
        with EventStore.beside(wh.path) as store:
            store.decide(Decision(waiting[0], "Webhook:1", 403, "no", "2025-10-01T00:00:00+00:00"))
            store.decide(
                Decision(waiting[1], "Webhook:2", 202, "later", "2025-10-01T00:00:00+00:00")
            )
        for plan in (ops.plan_approve(wh, waiting[:3]), ops.plan_reject(wh, waiting[:3])):
            assert list(plan.items["eligibility"]) == [
                "skipped: decided by the webhook receiver (rejected, 403, "
                "2025-10-01T00:00:00+00:00)",
                "eligible",  # deferred (202): an approve or reject call is what it waits for
                "eligible",
            ]
        applied = ops.plan_approve(wh, waiting[:1]).apply(client, progress=False)
        assert list(applied["outcome"]) == ["skipped"]
        # decided by the receiver after the plan was made: skipped when applied, journaled
        plan = ops.plan_reject(wh, waiting[2:3])
        assert list(plan.items["eligibility"]) == ["eligible"]
        with EventStore.beside(wh.path) as store:
            store.decide(Decision(waiting[2], "Webhook:3", 200, "ok", "2025-10-02T00:00:00+00:00"))
        applied = plan.apply(client, progress=False)
        said = (
            "decided by the webhook receiver since the plan (approved, 200, "
            "2025-10-02T00:00:00+00:00)"
        )
        assert list(zip(applied["outcome"], applied["message"], strict=True)) == [
            ("skipped_changed", said)
        ]
        journal = wh.journal()
        assert list(journal[journal["item_id"] == waiting[2]]["message"]) == [said]
        sent = [
            p
            for m, p, _ in sandbox.requests.entries
            if m == "POST" and ("/approve" in p or "/reject" in p)
        ]
        assert sent == []


def test_a_verdict_is_one_of_the_four_answers_and_a_policy_answers_one(
    signer: Signer, store: EventStore
) -> None:
    from paylens.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="500 is not 200, 202, 403 or 422"):
        Verdict(500)
    with pytest.raises(InvalidArgumentError, match="name the counterparty fields wanted"):
        Verdict.more_information([])

    def confused(payment: dict[str, Any]) -> Any:
        return "yes"

    with served_app(app(store, public_keys=[signer.public_pem], approve=confused)) as url:
        answer = _post(url, incoming_pending("Webhook:1", "Transaction:a"), signer)
    assert (answer.status_code, answer.json()["code"]) == (500, "APPROVAL_POLICY_FAILED")
    assert store.decisions() == []
