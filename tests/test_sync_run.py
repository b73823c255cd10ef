"""The sync's run: the writer behind the readers (its threads are what it is about: a fake
typer and committer stand in for DuckDB)."""

from __future__ import annotations

from paylens.warehouse.sync.fetch import Landing
from paylens.warehouse.sync.plan import Window
from paylens.warehouse.sync.run import Writer
from paylens.warehouse.sync.save import Batch


def test_landings_and_batches_are_bounded_in_bytes_as_well_as_records() -> None:
    # memory stays bounded whatever a record weighs: heavy records make smaller batches

    def prepare(landings: list[Landing]) -> Batch:
        return Batch(landings, None, [], sum(len(landing.buffer) for landing in landings))

    cases = {
        "heavy records: the byte bound ends each batch": (1, 4_000, [3, 3, 3, 1]),
        "many records: the record bound ends each batch": (400, 4, [3, 3, 3, 1]),
        "neither bound: the flush ends the one batch": (1, 10, [10]),
    }
    for case, (records, size, expected) in cases.items():
        committed: list[list[Landing]] = []
        writer = Writer(
            prepare,
            lambda batch, committed=committed: committed.append(batch.landings),
            max_rows=1_000,
            max_bytes=10_000,
            queue_size=32,
            gather_seconds=60,  # only the bounds or the flush end a batch
        )
        sent = [
            Landing(
                Window(None, None),
                {f"tx-{n}-{i}": b"{}" for i in range(records)},
                [],
                None,
                False,
                size,
            )
            for n in range(10)
        ]
        for landing in sent:
            writer.put(landing)
        writer.flush()
        writer.close()
        assert [len(batch) for batch in committed] == expected, case
        assert [landing for batch in committed for landing in batch] == sent, case
