"""Wire shapes of transactions and quotes: each row rendered once to JSON text, and kept.

A row's text depends on its columns and on the clock only through its planned events (`t1`,
`t2`, `t3`; a card's first 30 seconds), so it is kept until the clock reaches the next of them
or the row changes through the interface (`forget`). The world renders every row when it is
generated; a page is then a gather of kept texts, which the wire layer writes as they are
(`WireRows`), and only rows whose text went stale are rendered again.

Rows are rendered in batches, a column at a time, never a dict at a time: columns are gathered
with one numpy fancy-index each; ids, references and timestamps are formatted as digit matrices,
numbers by one orjson call; what rows share (accounts, customers, cards, people, currencies,
enums) is encoded once per world. Each row is then one join of its type's template with its
column values; the template's optional members take `,"name":value` or nothing. The text is
what orjson writes for the interface's variant, member for member and in the same order;
`transactions` decodes it for the callers that want values (ground truth, quotes), so the list
endpoint and the ground truth cannot drift apart.

References (`reconciliationInstructions.reference`) and quote ids are derived from the
transaction's UUID and map back to it, so both can be looked up without an index of their own.
"""

from .rows import WireRows, decode, hi_of_reference, quote_uuid, shows_reference
from .tables import merchant_code
from .transactions import TransactionViews

__all__ = [
    "TransactionViews",
    "WireRows",
    "decode",
    "hi_of_reference",
    "merchant_code",
    "quote_uuid",
    "shows_reference",
]
