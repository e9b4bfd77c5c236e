"""One Spark session per test session, and a private dataset cache so tests start from nothing."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

_CACHE = tempfile.mkdtemp(prefix="harness-test-store-")
os.environ["HARNESS_STORE"] = _CACHE
os.environ.pop("HARNESS_CACHE", None)
_EVENTLOGS = tempfile.mkdtemp(prefix="harness-test-eventlogs-")  # not the user's results/eventlogs
os.environ["HARNESS_EVENTLOG_DIR"] = _EVENTLOGS
# C1 alone in every JVM a test starts, in this process or a harness it runs (harness.spark.session.jit):
# a test's JVM lives seconds, and C2 spent about a third of its CPU. `make gate` and benchmarks keep the default.
os.environ.setdefault("HARNESS_JVM_QUICK", "1")

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("HARNESS_SHARED", REPO.parent / "shared"))


@pytest.fixture(scope="session")
def spark():
    from harness.spark import session as factory

    session = factory.get_session(workers=2)
    yield session
    factory.stop_session()
    shutil.rmtree(_CACHE, ignore_errors=True)
    shutil.rmtree(_EVENTLOGS, ignore_errors=True)


@pytest.fixture(scope="session")
def runner(spark):
    from harness.bench.runner import Runner

    return Runner()


@pytest.fixture(scope="session")
def shared_datasets():
    manifest = SHARED / "datasets" / "manifest.json"
    if not manifest.is_file():
        pytest.skip(f"shared datasets not found at {manifest} (tests expect shared/ beside the repository)")
    return SHARED / "datasets"
