"""Webhooks from a service that is not the sandbox: the second service (`tests/_second_service.py`)
served on loopback, an independent signer and poster (`tests/_webhook_poster.py`, which imports
nothing of paylens) posting the interface's webhooks for every record it changed to a real
`paylens webhooks serve` process, then ONE `paylens sync --db PATH`: every card transaction's
status and every transfer's refund are the service's. A warehouse synced the same way without
the events is not (what the listings cannot show waits for the rolling re-verification), which
is what makes the first part a claim that can fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from paylens.warehouse import Warehouse

from ._helpers import run_cli
from ._second_service import Habits, SecondService, served
from ._webhook_poster import RecordWatcher, WebhookPoster

pytestmark = pytest.mark.http


def _state(records: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    """What the events must make exact: a card transaction's status, amounts settled and
    refunded; a transfer's status and its refund's status."""
    out: dict[str, tuple[Any, ...]] = {}
    for r in records:
        if r["type"] == "CARD":
            out[r["id"]] = (
                r["status"],
                (r.get("settledAmount") or {}).get("amount"),
                (r.get("refundedAmount") or {}).get("amount"),
            )
        else:
            out[r["id"]] = (r["status"], (r.get("refund") or {}).get("status"))
    return out


def _refund_again(service: SecondService, *, before: Any) -> list[str]:
    """A second partial refund on up to 8 refunded card purchases made before `before`: the
    amount refunded grows, the status stays REFUNDED, so no count of the listings moves."""
    chosen = [
        i
        for i, r in sorted(service.listed().items())
        if r["type"] == "CARD"
        and r["status"] == "REFUNDED"
        and r["createdAt"] < before.isoformat().replace("+00:00", "Z")
    ][:8]
    for i in chosen:
        r = service.txs[i].record
        settled = r["settledAmount"]["amount"]
        refunded = min(settled, r["refundedAmount"]["amount"] + max(1, settled // 5))
        code = r["refundedAmount"]["currency"]
        at = r["updatedAt"]
        service.change(
            i,
            refundedAmount={"amount": refunded, "currency": code},
            refundSummary={"count": r["refundSummary"]["count"] + 1, "totalAmount": refunded},
        )
        service.txs[i].record["lastEventAt"] = service.txs[i].record["updatedAt"]
        assert service.txs[i].record["updatedAt"] > at
    return chosen


def _stored(db: Path) -> dict[str, tuple[Any, ...]]:
    with Warehouse(db, read_only=True) as wh:
        raws = wh.sql("SELECT raw FROM transactions")["raw"]
    return _state([json.loads(raw) for raw in raws])


def test_one_sync_after_an_independent_services_webhooks_is_exact(tmp_path: Path) -> None:
    # no late arrivals: a record arriving into an old window moves its count, and the sync then
    # re-reads that whole window, finding what changed there by chance
    service = SecondService(seed=11, days=25, habits=Habits(late=0.0))
    poster = WebhookPoster("")  # its url is the receiver's, known once it is up
    pem = tmp_path / "service.pem"
    pem.write_text(poster.public_key_pem)
    with_events, without = tmp_path / "events.duckdb", tmp_path / "plain.duckdb"
    serve = ["webhooks", "serve", "--db", str(with_events), "--public-key", str(pem)]
    receiver = subprocess.Popen(
        [sys.executable, "-m", "paylens.cli", *serve, "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("PAYLENS_")},
    )
    try:
        assert receiver.stdout is not None
        poster.url = receiver.stdout.readline().strip()
        assert poster.url.endswith("/webhooks"), poster.url
        with served(service) as base:
            env = {
                "PAYLENS_BASE_URL": base,
                "PAYLENS_CLIENT_ID": service.client_id,
                "PAYLENS_CLIENT_SECRET": service.client_secret,
            }

            def sync(db: Path) -> None:
                done = run_cli("sync", "--db", str(db), "--quiet", env=env)
                assert done.returncode == 0, done.stderr

            for db in (with_events, without):
                sync(db)
            watcher = RecordWatcher(service)
            watcher.changes()  # what both warehouses hold already
            posted = 0
            synced_at = service.clock
            for step in range(3):  # the service moves on; each change is posted as it happens
                service.advance(timedelta(days=4))
                if step == 1:  # second refunds on old card purchases: no status moves
                    second_refunds = _refund_again(service, before=synced_at - timedelta(days=8))
                for event_type, record in watcher.changes():
                    assert poster.send(record, service.clock, event_type=event_type).is_success
                    posted += 1
            for db in (with_events, without):
                sync(db)
    finally:
        receiver.terminate()
        receiver.wait(30)
    truth = _state(list(service.listed().values()))
    kept, plain = _stored(with_events), _stored(without)
    cards = {i for i, r in service.listed().items() if r["type"] == "CARD"}
    refunds = {i for i, r in service.listed().items() if r.get("refund")}
    assert posted > 100 and len(cards) > 50 and len(refunds) > 5
    wrong = {i: (kept.get(i), truth[i]) for i in truth if kept.get(i) != truth[i]}
    assert wrong == {}
    # without the events, card transitions the listings cannot select are still missing
    missed = {i for i in cards | refunds if plain.get(i) != truth[i]}
    assert len(second_refunds) >= 5 and len(missed) >= 5, missed
