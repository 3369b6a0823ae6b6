"""The page's sanitiser keeps only what rendered Markdown needs (issue 53 item 15):
DOMPurify's defaults kept ``video``/``audio`` (``poster``, ``src``), ``background`` on
tables, ``area`` and ``track``, stopped from loading by the CSP alone. ``web/sanitize.js``
runs in Chromium on a page of its own (its modules served from ``web/``), no server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import chromium, unavailable

pytestmark = pytest.mark.skipif(bool(unavailable()), reason=unavailable() or "")
WEB = Path(__file__).resolve().parent.parent / "web"
ORIGIN = "http://page.test"
HOSTILE = """<video src="https://x.test/v.mp4" poster="https://x.test/p.png"></video>
<audio src="https://x.test/a.mp3"><track src="https://x.test/t.vtt"></audio>
<table background="https://x.test/bg.png"><tr><td background="https://x.test/c.png">cell</td></tr></table>
<map name="m"><area href="https://x.test/area" shape="rect"></map>
<p style="color:red" class="x" data-x="1" id="y">text</p><img src="https://x.test/i.png">"""
MARKDOWN = (
    "## Leave\n\n1. **18 days** ~~no~~ `code`\n\n| a | b |\n|:-:|--:|\n| 1 | [x](https://e.test) |"
)


@pytest.fixture(scope="module")
def page() -> Iterator[Any]:
    with chromium() as browser:
        tab = browser.new_page()
        loads: list[str] = []

        def serve(route: Any) -> None:
            path = route.request.url.removeprefix(ORIGIN + "/")
            if path == "index.html":
                body = '<script type="module">import * as s from "./sanitize.js"; window.s = s;</script>'
                route.fulfill(status=200, content_type="text/html", body=body)
            elif path.endswith(".js") and (WEB / path).is_file():
                route.fulfill(status=200, content_type="text/javascript", path=str(WEB / path))
            else:
                loads.append(route.request.url)
                route.fulfill(status=404, body="")

        tab.route("**/*", serve)
        tab.goto(f"{ORIGIN}/index.html")
        tab.wait_for_function("() => window.s !== undefined")
        tab.loads = loads
        yield tab


def rendered(page: Any, call: str, text: str) -> str:
    script = f"""t => {{ const d = document.createElement("div");
        d.append(window.s.{call}(t)); document.body.append(d); return d.innerHTML; }}"""
    return str(page.evaluate(script, text))


def test_media_areas_tracks_and_backgrounds_are_removed(page: Any) -> None:
    html = rendered(page, "sanitize", HOSTILE)
    for gone in ("<video", "<audio", "<track", "<area", "<map", "<img", "background=", "poster=",
                 "src=", "style=", "class=", "data-x", "id="):  # fmt: skip
        assert gone not in html, (gone, html)
    assert "<table>" in html and "<td>cell</td>" in html and "<p>text</p>" in html
    page.wait_for_timeout(300)
    assert page.loads == []  # nothing of the answer asked for anything


def test_markdown_still_renders_as_markdown(page: Any) -> None:
    html = rendered(page, "markdown", MARKDOWN)
    for kept in ("<h2>Leave</h2>", "<ol>", "<strong>18 days</strong>", "<del>no</del>",
                 "<code>code</code>", 'align="center"', 'align="right"',
                 'href="https://e.test"', 'target="_blank"', 'rel="noopener noreferrer"'):  # fmt: skip
        assert kept in html, (kept, html)
