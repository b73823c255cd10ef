"""Spark reads what paylens published, through the same SQL catalog (Iceberg's JDBC catalog on
the PostgreSQL server the tests start), and its headline figures equal paylens's to the minor
unit. Slow (a JVM) and marked `spark`; run with

    pip install 'pyspark==3.5.*' 'snowpark-connect-deps-iceberg==1.0.1'   # the Iceberg runtime jar
    apt-get install -y default-jre-headless libpostgresql-jdbc-java
    python -m pytest -m spark tests/test_lake_spark.py

(no Maven repository is needed: the Iceberg Spark runtime comes from that Python package;
1.0.3 of it is broken)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from paylens import Sandbox, Warehouse, analysis
from tests.test_lake import pg_catalog, pg_url  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.slow, pytest.mark.spark]

JDBC_JAR = Path("/usr/share/java/postgresql.jar")


def _iceberg_jar() -> Path | None:
    spec = importlib.util.find_spec("snowpark_connect_deps_iceberg")
    if spec is None or spec.origin is None:
        return None
    found = sorted(Path(spec.origin).parent.glob("jars/iceberg-spark-runtime-3.5_2.12-*.jar"))
    return found[-1] if found else None


def test_spark_recomputes_the_headline_figures(pg_catalog: str, tmp_path: Path) -> None:  # noqa: F811
    pyspark = pytest.importorskip("pyspark")
    jar = _iceberg_jar()
    if jar is None or not JDBC_JAR.exists():
        pytest.skip("needs snowpark-connect-deps-iceberg==1.0.1 and libpostgresql-jdbc-java")
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.sync(Sandbox(seed=35, transactions=2_000).client(), progress=False)
        wh.publish(pg_catalog, "team", location=tmp_path / "lake")
        figures = analysis.fees_collected(wh, by="sent_currency")
    ours = {
        r.sent_currency: (r.transaction_count, r.sent_minor, r.fees_minor)
        for r in figures.itertuples()
    }
    url = pg_catalog.replace("postgresql+psycopg2://paylens@", "jdbc:postgresql://")
    spark = (
        pyspark.sql.SparkSession.builder.master("local[1]")
        .config("spark.jars", f"{jar},{JDBC_JAR}")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.catalog.paylens", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.paylens.catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog")
        .config("spark.sql.catalog.paylens.uri", url)
        .config("spark.sql.catalog.paylens.jdbc.user", "paylens")
        .config("spark.sql.catalog.paylens.warehouse", str(tmp_path / "lake"))
        .getOrCreate()
    )
    try:
        rows = spark.sql(
            "SELECT sent_amount_currency, count(*), sum(sent_amount_minor), sum(fees_minor)"
            " FROM paylens.team.outgoing_fees WHERE status = 'COMPLETED'"
            " GROUP BY sent_amount_currency"
        ).collect()
        count = spark.sql("SELECT count(*) FROM paylens.team.transactions").collect()[0][0]
    finally:
        spark.stop()
    assert count == 2_000 and len(ours) >= 2
    theirs = {r[0]: (r[1], r[2], r[3]) for r in rows}
    assert theirs == ours
