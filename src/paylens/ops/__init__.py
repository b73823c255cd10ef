"""Bulk operations as plan -> review -> apply, with a journal so a re-run never acts twice.

plan = paylens.ops.plan_cancel(wh, "payment_rail = 'ACH' AND status = 'PENDING'", reason="dup")
plan                                   # review: every item, its eligibility and why; totals
result = plan.apply(client)            # or plan.apply(client, dry_run=True)

plan_revoke_sessions(wh, wh.stale_sessions(), signer=key) revokes wallet sessions the same way.
"""

from typing import TYPE_CHECKING

from paylens import _lazy

from ._actions import ACTIONS, ELIGIBLE

if TYPE_CHECKING:
    from ._apply import apply_plan
    from ._plan import Plan, plan_approve, plan_cancel, plan_confirm_receipt, plan_reject
    from ._sessions import plan_revoke_sessions

#: The outcome that means each action took effect.
SUCCESSES = {name: action.verb for name, action in ACTIONS.items()} | {"revoke_session": "revoked"}

__all__ = [
    "ACTIONS",
    "ELIGIBLE",
    "SUCCESSES",
    "Plan",
    "apply_plan",
    "plan_approve",
    "plan_cancel",
    "plan_confirm_receipt",
    "plan_reject",
    "plan_revoke_sessions",
]

#: Loaded on first use: the actions' declarations (which `paylens`'s commands are made from)
#: load without the plans' and applies' pandas and client.
__getattr__, __dir__ = _lazy.attributes(
    __name__,
    {
        "apply_plan": ("._apply", "apply_plan"),
        "plan_revoke_sessions": ("._sessions", "plan_revoke_sessions"),
        **{
            name: ("._plan", name)
            for name in (
                "Plan",
                "plan_approve",
                "plan_cancel",
                "plan_confirm_receipt",
                "plan_reject",
            )
        },
    },
    __all__,
)
