"""Dataset resolution (registry name, generator spec or edge-list path), canonicalisation under a
semantics, and the Parquet cache keyed by content hash and semantics."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from . import edgelist, generators
from .errors import DataError

REPO = Path(__file__).resolve().parent.parent
REGISTRY_FILE = REPO / "datasets" / "registry.yaml"
CANON_VERSION = "canon-v1"


def cache_root() -> Path:
    return Path(os.environ.get("HARNESS_CACHE", REPO / ".cache"))


def shared_root() -> Path:
    return Path(os.environ.get("HARNESS_SHARED", REPO.parent / "shared"))


@dataclass(frozen=True)
class Source:
    """Where a graph comes from, before canonicalisation."""

    name: str
    kind: str  # "file" | "generator"
    location: str  # file path or canonical generator spec
    fmt: str | None = None
    published: dict = field(default_factory=dict)
    citation: str | None = None


# ---------------------------------------------------------------- registry


def _published_from_manifest(entry: dict) -> dict:
    pub = entry.get("published", {})
    out = {k: pub[k] for k in ("nodes", "edges") if k in pub}
    if "triangles" in pub:
        out["undirected"] = {"triangle": pub["triangles"]}
    return out


def load_registry(path: Path = REGISTRY_FILE) -> dict[str, Source]:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise DataError(f"{path}: invalid YAML ({exc})") from None
    allowed = {"shared_manifest", "datasets"}
    unknown = set(data) - allowed
    if unknown:
        raise DataError(f"{path}: unknown key '{sorted(unknown)[0]}' (allowed: {', '.join(sorted(allowed))})")
    sources: dict[str, Source] = {}
    manifest_ref = data.get("shared_manifest")
    if manifest_ref:
        manifest = shared_root() / Path(manifest_ref).relative_to("shared") if manifest_ref.startswith("shared/") else (path.parent / manifest_ref)
        if manifest.is_file():
            for entry in json.loads(manifest.read_text()):
                sources[entry["name"]] = Source(
                    name=entry["name"], kind="file", location=str(manifest.parent / entry["file"]),
                    fmt=entry.get("format"), published=_published_from_manifest(entry), citation=entry.get("cite"),
                )
    for name, entry in (data.get("datasets") or {}).items():
        where = f"{path}: datasets.{name}"
        if not isinstance(entry, dict):
            raise DataError(f"{where}: must be a mapping")
        bad = set(entry) - {"generator", "file", "format", "published", "description", "cite"}
        if bad:
            raise DataError(f"{where}: unknown key '{sorted(bad)[0]}'")
        if "generator" in entry:
            kind, params = generators.parse_spec(entry["generator"])
            sources[name] = Source(name, "generator", generators.canonical_spec(kind, params), published=entry.get("published", {}))
        elif "file" in entry:
            sources[name] = Source(name, "file", str((REPO / entry["file"]).resolve()), entry.get("format"), entry.get("published", {}), entry.get("cite"))
        else:
            raise DataError(f"{where}: needs key 'generator' or 'file'")
    return sources


def resolve(spec: str) -> Source:
    """A registry name, a generator spec (`rmat:scale=...`) or an edge-list path."""
    registry = load_registry()
    if spec in registry:
        return registry[spec]
    head = spec.split(":", 1)[0]
    if ":" in spec and head in generators.GENERATORS:
        kind, params = generators.parse_spec(spec)
        canon = generators.canonical_spec(kind, params)
        return Source(canon, "generator", canon)
    path = Path(spec)
    if path.is_file():
        for entry in registry.values():  # a registry file given by path keeps its name and published counts
            if entry.kind == "file" and Path(entry.location).resolve() == path.resolve():
                return entry
        return Source(path.name, "file", str(path.resolve()))
    if os.sep in spec or "." in path.name:
        raise DataError(f"edge file {spec}: not found")
    raise DataError(f"unknown dataset '{spec}' (not in {REGISTRY_FILE.name}, not a generator spec like 'rmat:scale=12', not a file)")


# ---------------------------------------------------------------- canonical graphs


@dataclass
class Graph:
    """A canonical edge relation under one semantics, materialised as Parquet and cached in Spark.

    undirected: one row (src < dst) per edge of the simple graph. directed: distinct (src, dst) rows,
    self-loops kept."""

    name: str
    source: str
    semantics: str
    path: Path
    vertices: int
    edges: int
    sha256: str
    sha256_of: str
    fingerprint: str
    cleaning: dict
    max_degree: int
    published: dict
    cache_hit: bool
    df: DataFrame | None = None

    def describe(self) -> dict:
        return {
            "name": self.name, "source": self.source, "semantics": self.semantics,
            "vertices": self.vertices, "edges": self.edges, "sha256": self.sha256, "sha256_of": self.sha256_of,
            "fingerprint": self.fingerprint, "max_degree": self.max_degree, "cleaning": self.cleaning,
            "published": self.published, "parquet": str(self.path), "cache_hit": self.cache_hit,
        }

    def parquet_glob(self) -> str:
        return str(self.path / "edges.parquet" / "*.parquet")


def canonicalize(raw: DataFrame, semantics: str) -> tuple[DataFrame, dict]:
    """Reduce raw (src, dst) rows to the canonical relation; count every row each step removes.
    Returns the relation and {vertices, edges, cleaning}."""
    stats = raw.agg(
        F.count(F.lit(1)).alias("raw"),
        F.sum(F.when(F.col("src") == F.col("dst"), 1).otherwise(0)).alias("loops"),
    ).first()
    raw_rows, loops = stats["raw"], stats["loops"] or 0
    vertices = raw.select(F.col("src").alias("v")).union(raw.select(F.col("dst").alias("v"))).distinct().count()
    if semantics == "directed":
        canonical = raw.distinct()
        edges = canonical.count()
        cleaning = {"input_rows": raw_rows, "duplicates_dropped": raw_rows - edges, "self_loops_kept": loops}
    else:
        non_loop = raw.filter(F.col("src") != F.col("dst"))
        directed_distinct = non_loop.distinct().count()
        canonical = non_loop.select(
            F.least("src", "dst").alias("src"), F.greatest("src", "dst").alias("dst")
        ).distinct()
        edges = canonical.count()
        cleaning = {
            "input_rows": raw_rows,
            "self_loops_dropped": loops,
            "duplicates_dropped": raw_rows - loops - directed_distinct,
            "reverse_pairs_merged": directed_distinct - edges,
        }
    return canonical, {"vertices": vertices, "edges": edges, "cleaning": cleaning}


def _fingerprint(df: DataFrame) -> str:
    row = df.agg(F.count(F.lit(1)).alias("n"), F.sum(F.xxhash64("src", "dst").cast("decimal(38,0)")).alias("h")).first()
    return f"{row['n']}:{row['h'] or 0}"


def _max_degree(df: DataFrame) -> int:
    """Largest number of distinct neighbours (self-loops excluded) of any vertex."""
    links = df.filter(F.col("src") != F.col("dst"))
    pairs = links.select(F.col("src").alias("v"), F.col("dst").alias("n")).union(links.select(F.col("dst"), F.col("src")))
    ends = pairs.distinct()
    row = ends.groupBy("v").count().agg(F.max("count").alias("m")).first()
    return int(row["m"] or 0)


def _write_atomic(target: Path, write) -> None:
    tmp = target.with_name(f"{target.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        tmp.mkdir(parents=True)
        write(tmp)
        if target.exists():  # another process won the race; its copy is identical
            shutil.rmtree(tmp)
        else:
            os.rename(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _materialize(spark: SparkSession, key_material: str, semantics: str, build_raw, meta: dict, partitions: int) -> Graph:
    key = hashlib.sha256(f"{key_material}|{semantics}|{CANON_VERSION}".encode()).hexdigest()[:24]
    target = cache_root() / "graphs" / key
    hit = (target / "meta.json").is_file()
    if not hit:
        def write(tmp: Path) -> None:
            raw = build_raw().persist()
            canonical, summary = canonicalize(raw, semantics)
            files = max(1, min(64, summary["edges"] // 2_000_000))
            canonical.coalesce(files).write.parquet(str(tmp / "edges.parquet"))
            raw.unpersist()
            written = spark.read.parquet(str(tmp / "edges.parquet"))
            info = dict(meta, **summary, fingerprint=_fingerprint(written), max_degree=_max_degree(written))
            (tmp / "meta.json").write_text(json.dumps(info, indent=1))
        _write_atomic(target, write)
    info = json.loads((target / "meta.json").read_text())
    df = spark.read.parquet(str(target / "edges.parquet")).repartition(partitions).persist()
    count = df.count()
    if count != info["edges"]:
        raise DataError(f"cache {target}: holds {count} edges, metadata says {info['edges']}; delete it and rerun")
    return Graph(
        name=info["name"], source=info["source"], semantics=semantics, path=target, vertices=info["vertices"],
        edges=info["edges"], sha256=info["sha256"], sha256_of=info["sha256_of"], fingerprint=info["fingerprint"],
        cleaning=info["cleaning"], max_degree=info["max_degree"], published=info.get("published", {}), cache_hit=hit, df=df,
    )


def load(spark: SparkSession, source: Source, semantics: str, partitions: int = 2) -> Graph:
    """Canonicalise (or fetch from cache) and return a Graph whose DataFrame is cached in Spark."""
    scratch = cache_root() / "links"
    if source.kind == "generator":
        kind, params = generators.parse_spec(source.location)
        digest = hashlib.sha256(source.location.encode()).hexdigest()
        meta = {"name": source.name, "source": source.location, "sha256": digest, "sha256_of": "generator spec", "published": source.published}
        return _materialize(spark, digest, semantics, lambda: generators.generate(spark, kind, params, partitions), meta, partitions)
    path = Path(source.location)
    if not path.is_file():
        raise DataError(f"edge file {path}: not found")
    fmt = source.fmt or edgelist.detect_format(path)
    digest = edgelist.sha256_file(path)
    meta = {"name": source.name, "source": str(path), "sha256": digest, "sha256_of": "file", "format": fmt, "published": source.published}
    return _materialize(spark, digest, semantics, lambda: edgelist.read_edges(spark, path, fmt, scratch), meta, partitions)


def from_edges(spark: SparkSession, edges: list[tuple[int, int]], semantics: str, name: str = "inline", partitions: int = 2) -> Graph:
    """A graph given as a Python list of (src, dst), through the same canonicalisation and cache."""
    text = "\n".join(f"{s} {d}" for s, d in edges)
    digest = hashlib.sha256(text.encode()).hexdigest()
    meta = {"name": name, "source": "inline", "sha256": digest, "sha256_of": "edge list text", "published": {}}

    def build() -> DataFrame:
        return spark.createDataFrame(edges or [], "src bigint, dst bigint")

    return _materialize(spark, digest, semantics, build, meta, partitions)
