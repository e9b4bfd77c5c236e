"""Dataset resolution (registry name, generator spec or edge-list path), canonicalisation under a
semantics, and the Parquet cache keyed by content hash and semantics."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import yaml
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from harness.core import store
from harness.core.errors import DataError
from harness.data import canonical, edgelist, generators, labels

REPO = Path(__file__).resolve().parents[2]
REGISTRY_FILE = REPO / "datasets" / "registry.yaml"
CANON_VERSION = "canon-v2"


def cache_root() -> Path:
    """The canonical graph cache lives in the store (HARNESS_STORE), which every host sees."""
    return store.root()


def shared_root() -> Path:
    return Path(os.environ.get("HARNESS_SHARED", REPO.parent / "shared"))


def data_root() -> Path:
    """Where `datasets fetch` puts downloaded files."""
    return Path(os.environ.get("HARNESS_DATA", REPO / ".data"))


@dataclass(frozen=True)
class Source:
    """Where a graph comes from, before canonicalisation."""

    name: str
    kind: str  # "file" | "generator"
    location: str  # file path or canonical generator spec
    fmt: str | None = None
    published: dict = field(default_factory=dict)
    citation: str | None = None
    description: str = ""
    directed: bool | None = None
    # Downloadable datasets: mirrors, the downloaded file's name, its checks, an archive member.
    urls: tuple[str, ...] = ()
    download_name: str | None = None
    sha256: str | None = None
    bytes: int | None = None
    member: str | None = None
    notes: str = ""
    twin_of: str | None = None  # a synthetic stand-in for this real graph (`bench --from` swaps it in)
    labels: str | None = None  # a vertex label file (harness/data/labels.py): registry key `labels`, or --labels

    @property
    def labelled(self) -> bool:
        """Whether the graph carries vertex labels: a label file, or a generator's `labels=K`."""
        if self.labels is not None:
            return True
        return self.kind == "generator" and generators.label_count(generators.parse_spec(self.location)[1]) is not None


# ---------------------------------------------------------------- registry


def _published_from_manifest(entry: dict) -> dict:
    pub = entry.get("published", {})
    out = {k: pub[k] for k in ("nodes", "edges", "note") if k in pub}
    if "triangles" in pub:
        out["undirected"] = {"triangle": pub["triangles"]}
    return out


def _published_from_reference(entry: dict) -> dict:
    out = {k: entry[k] for k in ("nodes", "undirected_edges", "note") if k in entry}
    if "directed_edges" in entry:
        out["edges"] = entry["directed_edges"]
    if "undirected" in entry:
        out["undirected"] = dict(entry["undirected"])
    if "directed_triangles" in entry:
        out["directed"] = {"triangle": entry["directed_triangles"]}
    if "induced_motifs" in entry:  # undirected, vertex-induced: checks a motif census (harness/bench/census.py)
        out["induced_motifs"] = dict(entry["induced_motifs"])
    return out


def _shared_path(ref: str, base: Path) -> Path:
    return shared_root() / Path(ref).relative_to("shared") if ref.startswith("shared/") else base / ref


_ENTRY_KEYS = {
    "generator",
    "file",
    "download",
    "format",
    "directed",
    "published",
    "published_from",
    "description",
    "cite",
    "notes",
    "twin_of",
    "labels",
}
_DOWNLOAD_KEYS = {"urls", "file", "sha256", "bytes", "member", "unpacked_file"}


def load_registry(path: Path = REGISTRY_FILE) -> dict[str, Source]:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise DataError(f"{path}: invalid YAML ({exc})") from None
    allowed = {"shared_manifest", "published_counts", "datasets"}
    unknown = set(data) - allowed
    if unknown:
        raise DataError(f"{path}: unknown key '{sorted(unknown)[0]}' (allowed: {', '.join(sorted(allowed))})")
    sources = _shared_sources(data.get("shared_manifest"), path.parent)
    reference: dict = {}
    if data.get("published_counts"):
        ref_file = _shared_path(data["published_counts"], path.parent)
        if ref_file.is_file():
            reference = json.loads(ref_file.read_text()).get("graphs", {})
    for name, entry in (data.get("datasets") or {}).items():
        sources[name] = _registry_source(name, entry, f"{path}: datasets.{name}", reference)
    for name, source in sources.items():
        if source.twin_of is not None and (source.twin_of not in sources or not sources[source.twin_of].urls):
            raise DataError(f"{path}: datasets.{name}: key 'twin_of': '{source.twin_of}' is not a downloadable dataset")
    return sources


def _shared_sources(manifest_ref: str | None, base: Path) -> dict[str, Source]:
    """The shared SNAP graphs the manifest lists (none if the registry names no manifest, or it is absent)."""
    sources: dict[str, Source] = {}
    manifest = _shared_path(manifest_ref, base) if manifest_ref else None
    if manifest is None or not manifest.is_file():
        return sources
    for entry in json.loads(manifest.read_text()):
        sources[entry["name"]] = Source(
            name=entry["name"],
            kind="file",
            location=str(manifest.parent / entry["file"]),
            fmt=entry.get("format"),
            published=_published_from_manifest(entry),
            citation=entry.get("cite"),
            directed=entry.get("stored_as") == "directed",
            sha256=entry.get("sha256"),
            bytes=entry.get("bytes"),
            description=f"SNAP {entry['name']}, stored as {entry.get('stored_as')}",
        )
    return sources


def _registry_source(name: str, entry, where: str, reference: dict) -> Source:
    """One entry of the registry's `datasets`: a generator, a download or a file in the repository."""
    if not isinstance(entry, dict):
        raise DataError(f"{where}: must be a mapping")
    bad = set(entry) - _ENTRY_KEYS
    if bad:
        raise DataError(f"{where}: unknown key '{sorted(bad)[0]}'")
    published = dict(entry.get("published") or {})
    if "published_from" in entry:
        if entry["published_from"] not in reference:
            raise DataError(f"{where}: key 'published_from': '{entry['published_from']}' is not in the published counts file")
        published = {**_published_from_reference(reference[entry["published_from"]]), **published}
    common = dict(
        published=published,
        citation=entry.get("cite"),
        description=entry.get("description", ""),
        directed=entry.get("directed"),
        notes=entry.get("notes", ""),
        twin_of=entry.get("twin_of"),
        labels=str(_shared_path(entry["labels"], REPO)) if entry.get("labels") else None,
    )
    if "generator" in entry:
        kind, params = generators.parse_spec(entry["generator"])
        return Source(name, "generator", generators.canonical_spec(kind, params), **common)
    if "download" in entry:
        dl = entry["download"]
        if not isinstance(dl, dict) or not dl.get("urls") or not dl.get("file"):
            raise DataError(f"{where}: key 'download' needs 'urls' and 'file'")
        bad = set(dl) - _DOWNLOAD_KEYS
        if bad:
            raise DataError(f"{where}: unknown key 'download.{sorted(bad)[0]}'")
        edge_file = dl.get("unpacked_file") or dl["file"]
        return Source(
            name,
            "file",
            str(data_root() / name / edge_file),
            entry.get("format"),
            urls=tuple(dl["urls"]),
            download_name=dl["file"],
            sha256=dl.get("sha256"),
            bytes=dl.get("bytes"),
            member=dl.get("member"),
            **common,
        )
    if "file" in entry:
        return Source(name, "file", str((REPO / entry["file"]).resolve()), entry.get("format"), **common)
    raise DataError(f"{where}: needs key 'generator', 'download' or 'file'")


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
    raise DataError(
        f"unknown dataset '{spec}' (not in {REGISTRY_FILE.name}, not a generator spec like 'rmat:scale=12', not a file)"
    )


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
    degrees: dict
    published: dict
    cache_hit: bool
    df: DataFrame  # the canonical relation, cached in Spark
    relation: Path | None = None  # the relation's Parquet when it is not path/edges.parquet (a dynamic run's state)
    # Vertex labels (harness/data/labels.py), when the graph carries them: their Parquet (vertex, label), where
    # they came from, and the table cached in Spark. A vertex not in the table has no label.
    labels_path: Path | None = None
    labels_from: str | None = None
    labels_df: DataFrame | None = None
    _edge_arrays: tuple | None = field(default=None, repr=False, compare=False)
    _label_arrays: labels.LabelArrays | None = field(default=None, repr=False, compare=False)

    @property
    def edge_arrays_read(self) -> bool:
        return self._edge_arrays is not None

    def edges_location(self) -> Path:
        """The canonical relation's Parquet files (a directory)."""
        return self.relation or self.path / "edges.parquet"

    def edge_arrays(self):
        """(src, dst) int64 numpy arrays of the canonical relation, read from its Parquet files on
        the driver once per Graph: the load of implementations that compute on the driver."""
        if self._edge_arrays is None:
            self._edge_arrays = read_edge_arrays(self.edges_location())
        return self._edge_arrays

    def label_arrays(self) -> labels.LabelArrays:
        """The vertex labels as arrays sorted by vertex, read on the driver once per Graph."""
        if self.labels_path is None:
            raise DataError(f"dataset '{self.name}' has no vertex labels")
        if self._label_arrays is None:
            self._label_arrays = labels.read_arrays(self.labels_path)
        return self._label_arrays

    def labels_glob(self) -> str | None:
        """The label table's Parquet files, for the oracles; None without labels."""
        return None if self.labels_path is None else str(self.labels_path / "*.parquet")

    def describe(self) -> dict:
        return {
            "name": self.name,
            "source": self.source,
            "semantics": self.semantics,
            "vertices": self.vertices,
            "edges": self.edges,
            "sha256": self.sha256,
            "sha256_of": self.sha256_of,
            "fingerprint": self.fingerprint,
            "degrees": self.degrees,
            "cleaning": self.cleaning,
            "published": self.published,
            "parquet": str(self.path),
            "cache_hit": self.cache_hit,
            **({"labels": self.labels_from} if self.labels_from is not None else {}),
        }

    def parquet_glob(self) -> str:
        return str(self.path / "edges.parquet" / "*.parquet")


def read_edge_arrays(location: str | Path) -> tuple:
    """(src, dst) int64 numpy arrays of a canonical relation's Parquet files, read in this process."""
    import pyarrow.parquet as pq

    table = pq.read_table(location, columns=["src", "dst"])
    return tuple(table.column(c).to_numpy().astype(np.int64, copy=False) for c in ("src", "dst"))


def _fingerprint(df: DataFrame) -> tuple[int, str]:
    """(rows, fingerprint): the row count and the exact sum of the rows' xxhash64, in one job. The hashes' high
    and low 32 bits are summed apart as longs (exact below 2^31 rows), three times faster than one decimal sum."""
    h = F.xxhash64("src", "dst")
    row = df.agg(
        F.count(F.lit(1)).alias("n"),
        F.sum(F.shiftright(h, 32)).alias("high"),
        F.sum(h.bitwiseAND(F.lit(0xFFFFFFFF))).alias("low"),
    ).first()
    assert row is not None  # an aggregate without grouping has exactly one row
    return row["n"], f"{row['n']}:{((row['high'] or 0) << 32) + (row['low'] or 0)}"


def degree_stats_from_histogram(histogram: list[tuple[int, int]]) -> dict:
    n = sum(c for _, c in histogram)
    if n == 0:
        return {"max_degree": 0, "median_degree": 0, "p99_degree": 0, "p99_over_median": None, "gini": None}
    total = sum(d * c for d, c in histogram)

    def quantile(q: float) -> int:
        rank, seen = max(1, math.ceil(q * n)), 0
        for d, c in histogram:
            seen += c
            if seen >= rank:
                return d
        return histogram[-1][0]

    # Gini = sum_i (2i - n - 1) x_i / (n sum x) over ascending x; a run of c equal values starting
    # after rank r contributes d * c * (2r + c - n).
    acc, rank = 0, 0
    for d, c in histogram:
        acc += d * c * (2 * rank + c - n)
        rank += c
    median, p99 = quantile(0.5), quantile(0.99)
    return {
        "max_degree": histogram[-1][0],
        "median_degree": median,
        "p99_degree": p99,
        "p99_over_median": round(p99 / median, 3),
        "gini": round(acc / (n * total), 4),
    }


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


def _cache_dir(key_material: str, semantics: str) -> Path:
    return cache_root() / "graphs" / hashlib.sha256(f"{key_material}|{semantics}|{CANON_VERSION}".encode()).hexdigest()[:24]


def _key_material(source: Source) -> tuple[str, str] | None:
    """(sha256, what it is the sha256 of) identifying the input, or None if it is not there."""
    if source.kind == "generator":
        return hashlib.sha256(source.location.encode()).hexdigest(), "generator spec"
    path = Path(source.location)
    if path.is_file():
        return edgelist.sha256_file(path), "file"
    if path.exists():  # a Parquet directory
        return hashlib.sha256(str(path.resolve()).encode()).hexdigest(), "path"
    return None


def _present_key_material(source: Source) -> tuple[str, str]:
    """_key_material of a source `load` has found present (a generator spec always is)."""
    material = _key_material(source)
    if material is None:  # a file removed since load checked it
        raise DataError(f"dataset '{source.name}': {source.location} not found")
    return material


def cached_semantics(source: Source) -> list[str]:
    """Semantics for which a canonical copy of `source` is in the cache (hashes the file)."""
    material = _key_material(source)
    return [s for s in ("undirected", "directed") if material and (_cache_dir(material[0], s) / "meta.json").is_file()]


def _written(rows: Callable[[], DataFrame]) -> Callable[[Path], str]:
    """A raw-rows builder for canonical.canonicalize: Spark writes `rows()` as Parquet where it is told."""

    def write(where: Path) -> str:
        rows().write.parquet(str(where))
        return str(where / "*.parquet")

    return write


# Spark's setting for the largest file split it reads as one partition.
MAX_PARTITION_BYTES = "spark.sql.files.maxPartitionBytes"
# Read in splits and merged without a shuffle only with this many of the canonical file's row groups per partition,
# so that the partitions stay within a few per cent of each other.
_ROW_GROUPS_PER_PARTITION = 32


def _cached_relation(spark: SparkSession, location: Path, edges: int, partitions: int) -> tuple[DataFrame, int, str]:
    """The relation in Spark's cache as `partitions` partitions, with (count, fingerprint) from the job that fills it.
    A large one is read in four splits a partition and merged, with no shuffle; a small one is hashed by pair (not
    dealt round-robin: Spark sorts every row before a round-robin split, 70 of the 80-94 s a 69M-edge load took)."""
    if edges < _ROW_GROUPS_PER_PARTITION * canonical.ROW_GROUP_ROWS * partitions:
        df = spark.read.parquet(str(location)).repartition(partitions, "src", "dst").persist()
        return (df, *_fingerprint(df))
    total = sum(f.stat().st_size for f in location.glob("*.parquet"))
    before = spark.conf.get(MAX_PARTITION_BYTES)
    spark.conf.set(MAX_PARTITION_BYTES, str(max(1, total // (4 * partitions))))
    try:  # the split size is read when the first job plans the scan: this one, which fills the cache
        df = spark.read.parquet(str(location)).coalesce(partitions).persist()
        return (df, *_fingerprint(df))
    finally:
        if before is None:
            spark.conf.unset(MAX_PARTITION_BYTES)
        else:
            spark.conf.set(MAX_PARTITION_BYTES, before)


def _materialize(spark: SparkSession, key_material: str, semantics: str, build_raw, meta: dict, partitions: int) -> Graph:
    """The cached canonical copy (`build_raw(where)` gives the raw rows: a Parquet glob it wrote there, or an
    Arrow table), made once, then read into Spark's cache and checked against its metadata."""
    target = _cache_dir(key_material, semantics)
    hit = (target / "meta.json").is_file()
    if not hit:

        def write(tmp: Path) -> None:
            raw = build_raw(tmp / "raw")
            (tmp / "edges.parquet").mkdir()
            summary = canonical.canonicalize(raw, semantics, tmp / "edges.parquet" / "part-00000.parquet", tmp / "spill")
            for scratch in ("raw", "spill"):
                shutil.rmtree(tmp / scratch, ignore_errors=True)
            degrees = degree_stats_from_histogram(summary.pop("degree_histogram"))
            (tmp / "meta.json").write_text(json.dumps(dict(meta, **summary, degrees=degrees), indent=1))

        _write_atomic(target, write)
    info = json.loads((target / "meta.json").read_text())
    df, count, fingerprint = _cached_relation(spark, target / "edges.parquet", info["edges"], partitions)
    if (count, fingerprint) != (info["edges"], info["fingerprint"]):
        df.unpersist()  # else a rebuilt copy's read would be served these rows from Spark's cache
        found = f"holds {count} edges" if count != info["edges"] else f"its edges' fingerprint is {fingerprint}"
        said = info["edges"] if count != info["edges"] else info["fingerprint"]
        raise DataError(f"cache {target}: {found}, metadata says {said}; delete it and rerun")
    return Graph(
        name=info["name"],
        source=info["source"],
        semantics=semantics,
        path=target,
        vertices=info["vertices"],
        edges=info["edges"],
        sha256=info["sha256"],
        sha256_of=info["sha256_of"],
        fingerprint=info["fingerprint"],
        cleaning=info["cleaning"],
        degrees=info["degrees"],
        published=info.get("published", {}),
        cache_hit=hit,
        df=df,
    )


def load(spark: SparkSession, source: Source, semantics: str, partitions: int = 2) -> Graph:
    """Canonicalise (or fetch from cache) and return a Graph whose DataFrame is cached in Spark, with
    its vertex labels when the source has them."""
    graph = _load_edges(spark, source, semantics, partitions)
    if source.labels is not None:
        path = Path(source.labels)
        if not path.exists():
            raise DataError(f"label file {path}: not found")
        material = edgelist.sha256_file(path) if path.is_file() else str(path.resolve())
        scratch = cache_root() / "links"
        _attach_labels(
            spark, graph, lambda: labels.read_label_file(spark, path, scratch), f"file|{material}", str(path), partitions
        )
    elif source.kind == "generator":
        params = generators.parse_spec(source.location)[1]
        k = generators.label_count(params)
        if k is not None:
            seed = getattr(params, "seed", 1)
            build = lambda: labels.hashed_labels(graph.df, k, seed)  # noqa: E731
            origin = f"generator labels={k} (seed {seed})"
            _attach_labels(spark, graph, build, f"generator|{source.location}|{semantics}", origin, partitions)
    return graph


LABELS_VERSION = "labels-v1"


def _attach_labels(spark: SparkSession, graph: Graph, build, key: str, origin: str, partitions: int) -> None:
    """Materialise the label table `build()` makes as Parquet in the store (once per `key`) and attach it."""
    target = cache_root() / "labels" / hashlib.sha256(f"{key}|{LABELS_VERSION}".encode()).hexdigest()[:24]
    if not (target / "labels.parquet").exists():
        _write_atomic(target, lambda tmp: build().coalesce(1).write.parquet(str(tmp / "labels.parquet")))
    graph.labels_path = target / "labels.parquet"
    graph.labels_from = origin
    graph.labels_df = spark.read.parquet(str(graph.labels_path)).repartition(partitions).persist()
    graph.labels_df.count()


def _load_edges(spark: SparkSession, source: Source, semantics: str, partitions: int) -> Graph:
    scratch = cache_root() / "links"
    if source.kind == "generator":
        kind, params = generators.parse_spec(source.location)
        digest, of = _present_key_material(source)
        meta = {"name": source.name, "source": source.location, "sha256": digest, "sha256_of": of, "published": source.published}
        return _materialize(
            spark, digest, semantics, _written(lambda: generators.generate(spark, kind, params, partitions)), meta, partitions
        )
    path = Path(source.location)
    if source.urls and not path.exists():
        raise DataError(
            f"dataset '{source.name}' is not downloaded: run `python -m harness datasets fetch {source.name}` "
            f"(or add `--from PATH` with a copy of {source.download_name})"
        )
    if not path.exists():
        raise DataError(f"edge file {path}: not found")
    fmt = source.fmt or edgelist.detect_format(path)
    digest, of = _present_key_material(source)
    meta = {
        "name": source.name,
        "source": str(path),
        "sha256": digest,
        "sha256_of": of,
        "format": fmt,
        "published": source.published,
    }
    rows = _written(lambda: edgelist.read_edges(spark, path, fmt, scratch))
    return _materialize(spark, digest, semantics, rows, meta, partitions)


def from_edges(
    spark: SparkSession,
    edges: list[tuple[int, int]],
    semantics: str,
    name: str = "inline",
    partitions: int = 2,
    vertex_labels: list[tuple[int, int]] | None = None,
) -> Graph:
    """A graph given as a Python list of (src, dst) (and, if given, (vertex, label) pairs), through the
    same canonicalisation and cache."""
    text = "\n".join(f"{s} {d}" for s, d in edges)
    digest = hashlib.sha256(text.encode()).hexdigest()
    meta = {"name": name, "source": "inline", "sha256": digest, "sha256_of": "edge list text", "published": {}}

    def build(_where: Path) -> pa.Table:
        pairs = np.array(edges, dtype=np.int64).reshape(-1, 2)
        return pa.table({"src": pairs[:, 0], "dst": pairs[:, 1]})

    graph = _materialize(spark, digest, semantics, build, meta, partitions)
    if vertex_labels is not None:
        key = hashlib.sha256("\n".join(f"{v} {label}" for v, label in vertex_labels).encode()).hexdigest()
        table = lambda: spark.createDataFrame(vertex_labels or [], "vertex bigint, label bigint")  # noqa: E731
        _attach_labels(spark, graph, table, f"inline|{key}", "inline", partitions)
    return graph


def from_canonical_parquet(spark: SparkSession, path: Path, semantics: str, name: str, partitions: int = 2) -> Graph:
    """A graph already in canonical form (e.g. a dynamic run's current state), read as is: no cache."""
    df = spark.read.parquet(str(path)).repartition(partitions).persist()
    edges = df.count()
    return Graph(
        name=name,
        source=str(path),
        semantics=semantics,
        path=Path(path).parent,
        vertices=-1,
        edges=edges,
        sha256="",
        sha256_of="none (canonical state of a dynamic run)",
        fingerprint="",
        cleaning={},
        degrees={},
        published={},
        cache_hit=False,
        df=df,
        relation=Path(path),
    )
