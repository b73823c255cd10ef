"""The sandbox's customers, accounts and cards as rendered: a render never shows a stale value.

The views keep what each entity's seed derives (names, numbers, addresses) after its first
render; what changes (balances, emails, card states, timestamps, what the clock brings) must
show at once. Checked differentially: a sandbox that rendered everything before the changes
answers, byte for byte, what a twin that never rendered before answers after the same changes.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import orjson

from paylens import Sandbox
from paylens.sandbox.routes import dispatch

LISTS = (
    "/customers",
    "/customers/internal-accounts",
    "/customers/external-accounts",
    "/platform/internal-accounts",
    "/cards",
)


def pages(sandbox: Sandbox) -> list[bytes]:
    """Every page of every list, deleted customers included, as the wire sends them."""
    out = []
    for path in LISTS:
        cursor = None
        while True:
            query = {"limit": ["100"]}
            if path == "/customers":
                query["isIncludingDeleted"] = ["true"]
            if cursor:
                query["cursor"] = [cursor]
            status, body = dispatch(sandbox.world, "GET", path, query, None, {})
            assert status == 200, body
            out.append(orjson.dumps(body))
            cursor = body.get("nextCursor")
            if not body.get("hasMore"):
                break
    return out


def change(sandbox: Sandbox) -> dict[str, Any]:
    """Change a balance, an email and a card's state, then let a day pass; what was changed."""
    w = sandbox.world
    client = sandbox.client()
    account = next(iter(client.internal_accounts.list()))
    status, funded = dispatch(
        w,
        "POST",
        f"/sandbox/internal-accounts/{account.id}/fund",
        {},
        {"amount": 12_345, "currency": account.balance.currency.code},
        {},
    )
    assert status == 200, funded
    customer = next(iter(client.customers.list()))
    client.auth.update_customer_email(
        customer.id, "renamed@example.com", customer_type=str(customer.customer_type)
    )
    card = next(iter(client.cards.list(state="ACTIVE")))
    client.cards.update(card.id, state="FROZEN")
    sandbox.advance(timedelta(days=1))
    return {"account": account, "funded": funded, "customer": customer.id, "card": card.id}


def test_a_render_never_shows_a_stale_value() -> None:
    seen, fresh = Sandbox(seed=4, transactions=1_500), Sandbox(seed=4, transactions=1_500)
    before = pages(seen)  # every entity rendered once: its derived details kept
    changed = change(seen)
    change(fresh)
    after = pages(seen)
    assert after == pages(fresh)
    assert after != before
    text = b"".join(after)
    assert b"renamed@example.com" in text
    balance = changed["account"].balance.amount + 12_345
    assert changed["funded"]["balance"]["amount"] == balance
    listed = {a.id: a for a in seen.client().internal_accounts.list()}
    assert listed[changed["account"].id].balance.amount == balance
    assert seen.client().cards.get(changed["card"]).state == "FROZEN"


def test_renders_are_the_same_bytes_every_time() -> None:
    sandbox = Sandbox(seed=8, transactions=800, profile="remittance")
    first = pages(sandbox)
    assert pages(sandbox) == first
    twin = Sandbox(seed=8, transactions=800, profile="remittance")
    assert (
        hashlib.sha256(b"".join(pages(twin))).digest() == hashlib.sha256(b"".join(first)).digest()
    )
