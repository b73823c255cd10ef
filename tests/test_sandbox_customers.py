"""The sandbox's customers list: its filters select on each customer's current state."""

from __future__ import annotations

from datetime import timedelta

from paylens import Client, Sandbox


def test_updated_after_selects_a_customer_by_its_current_updated_at(
    sandbox: Sandbox, client: Client
) -> None:
    customer = next(iter(client.customers.list()))
    sandbox.advance(timedelta(hours=1))
    patched_at = sandbox.now
    client.auth.update_customer_email(
        customer.id, "moved@example.com", customer_type=str(customer.customer_type)
    )
    assert client.customers.get(customer.id).updated_at == patched_at
    changed = list(client.customers.list(updated_after=patched_at))
    assert [c.id for c in changed] == [customer.id]
    assert changed[0].email == "moved@example.com"
    before = {c.id for c in client.customers.list(updated_before=patched_at - timedelta(seconds=1))}
    assert customer.id not in before
