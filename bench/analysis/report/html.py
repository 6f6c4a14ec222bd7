"""HTML pieces: tables whose cells carry their exact values, and the page around the sections."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import pandas as pd

from bench.analysis.runs.formats import fmt

CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
h1{font-size:1.6em}h2{font-size:1.2em;border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
th,td{border:1px solid #ddd;padding:.25em .5em;text-align:right}th{background:#f4f4f4}
td.text{text-align:left}td[data-col="run_id"]{white-space:nowrap;font-size:.8em}.failed{color:#a00}.note{color:#555;font-size:.9em}
figure{margin:.5em 0}svg{max-width:100%;height:auto}
"""


def table(frame: pd.DataFrame, columns: Sequence[tuple[str, str, str]], css_id: str = "") -> str:
    """columns: (column, header, kind). Every cell keeps its exact value in data-value."""
    if frame.empty:
        return '<p class="note">No runs of this kind.</p>'
    head = "".join(f"<th>{html.escape(h)}</th>" for _, h, _ in columns)
    body = []
    for _, row in frame.iterrows():
        cells = []
        for col, _, kind in columns:
            value = row.get(col)
            text_cls = ' class="text"' if kind == "text" else ""
            raw = "" if value is None or (isinstance(value, float) and math.isnan(value)) else value
            cells.append(f'<td{text_cls} data-col="{col}" data-value="{html.escape(str(raw))}">'
                         f"{html.escape(fmt(value, kind))}</td>")
        run_id = html.escape(str(row.get("run_id", "")))
        body.append(f'<tr data-run="{run_id}">{"".join(cells)}</tr>')
    ident = f' id="{css_id}"' if css_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def section(ident: str, title: str, *parts: str) -> str:
    return f'<section id="{ident}"><h2>{html.escape(title)}</h2>{"".join(parts)}</section>'


def folded(summary: str, content: str) -> str:
    """A long table, closed until the reader opens it."""
    return f"<details><summary>{html.escape(summary)}</summary>{content}</details>"


def figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption class=\"note\">{html.escape(caption)}</figcaption></figure>"


def note(text: str) -> str:
    return f'<p class="note">{html.escape(text)}</p>'


def page(title: str, intro: str, sections: Sequence[str]) -> str:
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}"
            f"</title><style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>{intro}"
            f"{''.join(sections)}</body></html>")
