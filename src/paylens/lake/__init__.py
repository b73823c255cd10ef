"""The team's tables: a warehouse published as Apache Iceberg tables in a SQL catalog
(PostgreSQL for a team, SQLite on one machine), and `Lake`, the same reading surface as a
`Warehouse` over them. Needs the `lake` extra (pyiceberg)."""

from ._lake import Lake
from ._publish import TABLES, PublishReport, publish

__all__ = ["TABLES", "Lake", "PublishReport", "publish"]
