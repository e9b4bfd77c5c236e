"""`make report`'s HTML page, opened in a real headless browser (Chromium from Debian's packages, which
.ci/run installs): it renders its tables and its embedded plots, from the recorded runs alone."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.bench import report

RUNS = Path(__file__).resolve().parent.parent / "results" / "runs"
RECORDED = ["20261123T133942Z-41adb2-shares", "20261122T052307Z-ede900-batch-sweep"]
CONTEST = "20261206T185955Z-f0e410-triangle"  # `make bench` from nothing at 162ee03


def test_the_memory_wall_is_drawn_from_its_newest_run_alone(tmp_path):
    import json

    for directory, caps in (("20261101T000000Z-a-memory", ["1g", "640m"]), ("20261102T000000Z-b-memory", ["1g", "448m"])):
        (tmp_path / directory).mkdir()
        for i, cap in enumerate(caps):
            record = {"workload": "memory", "implementation": "bigjoin", "status": "OK", "semantics": "undirected"}
            record |= {"query": {"name": "clique4"}, "dataset": {"name": "g"}, "params": {"workers": 2, "memory_per_worker": cap}}
            (tmp_path / directory / f"{i}.json").write_text(json.dumps(record))
    runs = report.load_runs(tmp_path)["memory"]
    assert {r.params["memory_per_worker"] for r in runs} == {"1g", "640m", "448m"}  # each cell's latest
    newest = report.newest_run(runs)
    assert {r.params["memory_per_worker"] for r in newest} == {"1g", "448m"} and {r.read_from for r in newest} == {
        "20261102T000000Z-b-memory"
    }
    assert report.newest_run([]) == []


def test_a_reused_index_is_charged_and_marked_in_the_report(tmp_path):
    """The triangle contest at 162ee03: bigjoin-carry and bigjoin-s reused bigjoin's index (0.71 s). The
    report's index s is each run's own build plus the build it reused, marked and named as the contest does."""
    shutil.copytree(RUNS / CONTEST, tmp_path / "runs" / CONTEST)
    page = report.build(tmp_path / "runs", tmp_path / "report").read_text()
    rows = {cells[1].strip(): cells for line in page.splitlines() if (cells := line.split("|"))[1:2]}
    assert rows["bigjoin-carry"][5].strip() == "0.75*"  # 0.0369 own + 0.7129 bigjoin's
    assert rows["bigjoin-s"][5].strip() == "1.78*"  # 1.0652 + 0.7129
    assert rows["bigjoin"][5].strip() == "0.71" and rows["local-gj"][5].strip() == "0.48"  # their own builds, unmarked
    assert (
        "An index s marked * includes a reused index's build, charged at its builder's seconds: bigjoin-carry's from bigjoin; bigjoin-s's from bigjoin."
        in page
    )


def _browser() -> str:
    found = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if found is None:
        message = "no headless browser: `apt-get install chromium` (.ci/run does)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)  # CI installs it: a missing browser there is a failure, not a skip
        pytest.skip(message)
    return found


def _chromium(browser: str, *args: str) -> subprocess.CompletedProcess:
    # As root Chromium needs --no-sandbox; a private profile keeps runs apart.
    return subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_html_report_is_self_contained_and_renders_in_a_browser(tmp_path):
    browser = _browser()
    runs = tmp_path / "runs"
    for name in RECORDED:
        shutil.copytree(RUNS / name, runs / name)
    page = report.build(runs, tmp_path / "report").with_suffix(".html")
    text = page.read_text()
    assert text.count('src="data:image/png;base64,') >= 2 and 'src="time-' not in text  # plots inside the page
    alone = tmp_path / "alone" / "index.html"  # no PNG beside it: the page must not need them
    alone.parent.mkdir()
    shutil.copy(page, alone)

    profile = tmp_path / "profile"
    dom = _chromium(browser, f"--user-data-dir={profile}", "--dump-dom", alone.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<h1>Benchmark report</h1>" in dom.stdout and "<table>" in dom.stdout
    assert "local-gj" in dom.stdout and "clique4 / rmat-16 / W=2" in dom.stdout

    shot = tmp_path / "shot.png"
    run = _chromium(browser, f"--user-data-dir={profile}", f"--screenshot={shot}", "--window-size=1280,2400", alone.as_uri())
    assert run.returncode == 0 and shot.is_file(), run.stderr[-2000:]
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[:2] == (2400, 1280)
    colours = {tuple(p) for p in (pixels[::8, ::8, :3] * 255).astype(int).reshape(-1, 3)}
    assert len(colours) > 50, f"a blank page: {len(colours)} colours"  # text, table rules and plot colours
