"""The report's Markdown as one self-contained HTML page: the same headings, tables and text, with every
plot embedded (base64 PNG), so the file opens in a browser anywhere, offline, on its own. Renders the
subset of Markdown the report writes: #-headings, pipe tables, ![plots](file.png), `code` and paragraphs."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

_STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px; padding: 0 1em; color: #222; }
h1, h2, h3 { line-height: 1.2; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } tr:nth-child(even) td { background: #fafafa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; border: 1px solid #eee; margin: .5em 0; }
code { background: #f3f3f3; padding: 0 3px; border-radius: 3px; }
"""
_IMAGE = re.compile(r"^!\[(?P<alt>[^\]]*)\]\((?P<src>[^)]+)\)$")
_NUMBER = re.compile(r"^[<>~]?-?[\d,]+(\.\d+)?\s?(x|s|%|[KMGT]iB|B)?\*?$")  # *: a charged shared index


def _inline(text: str) -> str:
    """Escape, then `code`, **bold** and <br> (the report's table cells use it)."""
    out = html.escape(text, quote=False).replace("&lt;br&gt;", "<br>")
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table(rows: list[str]) -> str:
    header, body = _cells(rows[0]), [_cells(r) for r in rows[2:]]  # rows[1] is the |---| rule
    out = ["<table>", "<tr>" + "".join(f"<th>{_inline(c)}</th>" for c in header) + "</tr>"]
    for row in body:
        cells = "".join(f'<td class="num">{_inline(c)}</td>' if _NUMBER.match(c) else f"<td>{_inline(c)}</td>" for c in row)
        out.append(f"<tr>{cells}</tr>")
    return "\n".join([*out, "</table>"])


def _image(alt: str, src: str, base: Path) -> str:
    path = base / src
    if not path.is_file():
        return f"<p><em>missing plot {html.escape(src)}</em></p>"
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def render(markdown: str, base: Path, title: str) -> str:
    """The page for `markdown`, whose images are files relative to `base`."""
    parts: list[str] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        if line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append(lines[i])
                i += 1
            parts.append(_table(block))
            continue
        heading = re.match(r"^(#{1,3}) (.*)$", line)
        image = _IMAGE.match(line)
        if heading:
            level = len(heading.group(1))
            parts.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif image:
            parts.append(_image(image.group("alt"), image.group("src"), base))
        elif line:
            parts.append(f"<p>{_inline(line)}</p>")
        i += 1
    body = "\n".join(parts)
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def write(markdown_page: Path) -> Path:
    """index.md -> index.html beside it, self-contained."""
    out = markdown_page.with_suffix(".html")
    out.write_text(render(markdown_page.read_text(), markdown_page.parent, "Benchmark report"))
    return out
