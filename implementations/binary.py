"""Edge-at-a-time baseline: a left-deep plan of Spark shuffled hash joins, one relation at a time."""

from __future__ import annotations

from functools import reduce
from typing import NamedTuple

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from implementations.base import Implementation, Listed, Outcome

VALUE_BYTES = 8  # one attribute of an intermediate row: a long


class JoinOutput(NamedTuple):
    rows: int
    columns: int


def join_outputs(node) -> list[JoinOutput]:
    """Each join's output (rows, attributes) in an executed Spark plan (a py4j SparkPlan), innermost
    first: the intermediate results a binary plan materialises."""
    name = node.nodeName()
    if name.startswith("AdaptiveSparkPlan"):
        return join_outputs(node.executedPlan())
    if "QueryStage" in name:
        return join_outputs(node.plan())
    children = node.children()
    inner = [out for i in range(children.size()) for out in join_outputs(children.apply(i))]
    if not name.endswith("Join"):
        return inner
    rows = node.metrics().get("numOutputRows")
    return [*inner, JoinOutput(rows.get().value() if rows.isDefined() else 0, node.output().size())]


class BinaryJoin(Implementation):
    name = "binary"
    description = "left-deep plan of Spark DataFrame shuffled hash joins (edge-at-a-time)"
    anti_edges = True  # each anti pair is a left_anti join once both its attributes are bound
    writes_matches = True  # the plan's rows, written by Spark's Parquet writer
    vertex_labels = True  # a relation binding a labelled attribute is first semi-joined with the vertices of its label

    def _relation(self, x: str, y: str) -> DataFrame:
        """edge(x, y) with columns named by the attributes it binds."""
        spec, edges = self.ctx.spec, self.ctx.edges
        if x == y:  # directed self-loop atom: a unary relation
            return edges.filter(F.col("src") == F.col("dst")).select(F.col("src").alias(x))
        if spec.semantics == "undirected":
            # Canonical rows have src < dst; use them directly where the order constraints fix the
            # direction, else both directions.
            if spec.implies_less(x, y):
                return edges.select(F.col("src").alias(x), F.col("dst").alias(y))
            if spec.implies_less(y, x):
                return edges.select(F.col("dst").alias(x), F.col("src").alias(y))
            both = edges.union(edges.select(F.col("dst").alias("src"), F.col("src").alias("dst")))
            return both.select(F.col("src").alias(x), F.col("dst").alias(y))
        return edges.select(F.col("src").alias(x), F.col("dst").alias(y))

    def _with_labels(self, rel: DataFrame, attributes: set[str]) -> DataFrame:
        """`rel` keeping the rows whose newly bound `attributes` carry the labels the pattern requires:
        a left_semi join with the label table's vertices of that label (an unlisted vertex has none)."""
        required = self.ctx.spec.query.label_of
        for a in sorted(attributes & required.keys()):
            labels = self.ctx.graph.labels_df
            assert labels is not None  # the harness refuses a labelled pattern on an unlabelled graph
            having = labels.filter(F.col("label") == required[a]).select(F.col("vertex").alias(a))
            rel = rel.join(having.hint("shuffle_hash"), on=a, how="left_semi")
        return rel

    def _without_edge(self, result: DataFrame, x: str, y: str) -> DataFrame:
        """The rows of `result` whose values of x and y no edge joins (an anti pair of the spec): a
        left_anti join against the edge relation, read as the canonical (smaller, larger) rows in
        undirected semantics and as x -> y in directed."""
        spec, edges = self.ctx.spec, self.ctx.edges
        lo, hi = "__anti_lo", "__anti_hi"  # the edge columns, named apart from the attributes
        absent = edges.select(F.col("src").alias(lo), F.col("dst").alias(hi)).hint("shuffle_hash")
        if spec.semantics == "undirected":
            first, second = F.least(F.col(x), F.col(y)), F.greatest(F.col(x), F.col(y))
            if spec.implies_less(x, y) or spec.implies_less(y, x):  # the order is known: plain column keys
                first, second = (F.col(x), F.col(y)) if spec.implies_less(x, y) else (F.col(y), F.col(x))
        else:
            first, second = F.col(x), F.col(y)
        return result.join(absent, (first == F.col(lo)) & (second == F.col(hi)), how="left_anti")

    def plan(self) -> DataFrame:
        spec = self.ctx.spec
        position = {a: i for i, a in enumerate(spec.attribute_order)}
        # Join each relation once its later attribute is reached (the extending one first).
        atoms = sorted(spec.query.edges, key=lambda e: (max(position[e[0]], position[e[1]]), min(position[e[0]], position[e[1]])))
        filters = [(F.col(x) < F.col(y), {x, y}) for x, y in spec.less_than]
        filters += [(F.col(x) != F.col(y), {x, y}) for x, y in spec.distinct]
        anti = list(spec.anti)
        result, bound = None, set[str]()
        for x, y in atoms:
            rel = self._relation(x, y)
            if spec.query.labels:  # the attributes this relation binds first, filtered before the join
                rel = self._with_labels(rel, {x, y} - bound)
            if result is None:
                result = rel
            else:
                keys = [a for a in dict.fromkeys((x, y)) if a in bound]  # connected patterns: never empty
                result = result.join(rel.hint("shuffle_hash"), on=keys, how="inner")
            bound |= {x, y}
            ready = [cond for cond, attrs in filters if attrs <= bound]
            filters = [(cond, attrs) for cond, attrs in filters if not attrs <= bound]
            if ready:
                result = result.filter(reduce(lambda a, b: a & b, ready))
            for x, y in [pair for pair in anti if set(pair) <= bound]:  # as soon as both are bound, as filters are
                result = self._without_edge(result, x, y)
            anti = [pair for pair in anti if not set(pair) <= bound]
        assert result is not None  # a query has at least one edge
        return result.select(*spec.query.attributes)

    def count(self) -> Outcome:
        counted = self.plan().groupBy().count()
        count = counted.collect()[0][0]
        joins = join_outputs(counted._jdf.queryExecution().executedPlan())  # filled in by the run
        largest = max(joins, key=lambda j: j.rows * j.columns, default=JoinOutput(0, 0))
        counters = {
            "join_output_rows": [j.rows for j in joins],
            "largest_intermediate_rows": largest.rows,
            "largest_intermediate_bytes": largest.rows * largest.columns * VALUE_BYTES,
        }
        return Outcome(count=count, counters=counters)

    def write_matches(self, path: str | None, limit: int | None) -> Listed:
        """The plan's rows (the graph's own vertex ids) written by the executors with Spark's Parquet
        writer, counted as they are written; a limit is Spark's (each partition stops at N, then N of those are kept). Spark does not
        say when the first row appeared: first_match_s is unknown."""
        matches = self.plan() if limit is None else self.plan().limit(limit)
        if path is None:
            return Listed(count=matches.count())
        written = Observation("written")  # counted as the write job runs: no second pass over the matches
        matches.observe(written, F.count(F.lit(1)).alias("rows")).write.parquet(path)
        return Listed(count=int(written.get["rows"]))

    def matches(self, limit: int) -> list[tuple]:
        return [tuple(r) for r in self.plan().limit(limit).collect()]
