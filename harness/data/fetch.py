"""Download registry datasets into the data directory: resumable (`.part` + HTTP Range), checked
against the expected sha256 and size, renamed into place atomically. `--from PATH` takes a file
supplied by hand instead. Offline, it fails at once naming the URLs, and leaves nothing behind."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

from harness.core.errors import DataError
from harness.data.datasets import Source, data_root
from harness.data.edgelist import sha256_file

CHUNK = 1 << 20


def download(url: str, target: Path, timeout_s: float = 20.0) -> None:
    """Fetch url into target via target.part, resuming a partial .part with a Range request."""
    part = target.with_name(target.name + ".part")
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    with urllib.request.urlopen(request, timeout=timeout_s) as resp:
        resumed = have and resp.status == 206
        mode = "ab" if resumed else "wb"
        total = resp.headers.get("Content-Length")
        total = (int(total) + (have if resumed else 0)) if total else None
        with open(part, mode) as out:
            shutil.copyfileobj(resp, out, CHUNK)
    if total is not None and part.stat().st_size != total:
        raise OSError(f"incomplete download: {part.stat().st_size} of {total} bytes (run fetch again to resume)")
    os.replace(part, target)


def _check(path: Path, source: Source) -> dict:
    size = path.stat().st_size
    if source.bytes is not None and size != source.bytes:
        raise DataError(f"{path}: {size} bytes, expected {source.bytes}")
    digest = sha256_file(path)
    if source.sha256 and digest != source.sha256:
        raise DataError(f"{path}: sha256 {digest}, expected {source.sha256}")
    return {"bytes": size, "sha256": digest}


def _unpack_member(archive: Path, member: str, target: Path) -> None:
    tmp = target.with_name(target.name + ".part")
    with tarfile.open(archive, "r:*") as tar:
        info = next((m for m in tar if m.name == member or m.name.endswith("/" + member)), None)
        if info is None:
            raise DataError(f"{archive}: no member '{member}'")
        src = tar.extractfile(info)
        if src is None:
            raise DataError(f"{archive}: member '{info.name}' is not a file")
        with src, open(tmp, "wb") as out:
            shutil.copyfileobj(src, out, CHUNK)
    os.replace(tmp, target)


def fetch(source: Source, from_path: Path | None = None, timeout_s: float = 20.0) -> Path:
    """Return the local edge file of a downloadable registry dataset, fetching it if needed."""
    if not source.urls:
        raise DataError(f"dataset '{source.name}' has no download URLs (it is {source.kind}: {source.location})")
    directory = data_root() / source.name
    download_name = source.download_name or Path(source.urls[0]).name
    downloaded = directory / download_name
    edge_file = Path(source.location)
    if edge_file.exists():
        return edge_file
    created = [d for d in (directory.parent, directory) if not d.exists()]
    directory.mkdir(parents=True, exist_ok=True)
    try:
        if not downloaded.exists():
            if from_path is not None:
                if not from_path.is_file():
                    raise DataError(f"--from {from_path}: not found")
                tmp = downloaded.with_name(downloaded.name + ".part")
                shutil.copyfile(from_path, tmp)
                os.replace(tmp, downloaded)
            else:
                errors = []
                for url in source.urls:
                    try:
                        download(url, downloaded, timeout_s)
                        break
                    except (urllib.error.URLError, OSError, ValueError) as exc:
                        errors.append(f"{url} ({getattr(exc, 'reason', exc)})")
                else:
                    raise DataError(
                        f"cannot download '{source.name}': "
                        + "; ".join(errors)
                        + f". Download it by other means and run: python -m harness datasets fetch {source.name} --from /path/to/{download_name}"
                    )
        try:
            record = _check(downloaded, source)
        except DataError:
            downloaded.unlink()  # never keep a file that failed its checks
            raise
        if source.member:
            _unpack_member(downloaded, source.member, edge_file)
        (directory / "FETCHED.json").write_text(json.dumps({"file": download_name, **record, "urls": source.urls}, indent=1))
        return edge_file
    except BaseException:
        # Keep a partial .part for resuming; remove anything else this call created.
        part = downloaded.with_name(downloaded.name + ".part")
        if part.exists() and part.stat().st_size == 0:
            part.unlink()
        for made in reversed(created):  # directories this call made, if still empty
            if made.exists() and not any(made.iterdir()):
                made.rmdir()
        raise
