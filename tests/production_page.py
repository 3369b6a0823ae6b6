"""The page's first hour in Chromium, against a started server (tests/production_smoke.py
runs it on the production server installed from the wheel): sign in, upload a file, its
job done, a question citing it, the original opened in the page's viewer.

Debian's chromium driven by Playwright (tests/browser.py), no browser download.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.browser import DESKTOP, chromium, sign_in_with_token, unavailable

WAIT_MS = 90_000  # one offline answer takes seconds; this only turns a hang into a failure
FACT = "The smoke page's parking code for visitors is ORCA-88."
QUESTION = "What is the parking code for visitors?"


class PageFailure(Exception):
    """A step of the page flow failed (its message names the step)."""


def page_flow(url: str, token: str, folder: Path) -> list[str]:
    """The steps in one tab; returns what each proved. ``folder``: where the upload is written."""
    why = unavailable()
    if why:
        raise PageFailure(f"the page in Chromium: {why}")
    from playwright.sync_api import Error as PlaywrightError

    note = folder / "parking.md"
    note.write_text(f"# Parking\n\n{FACT}\n", encoding="utf-8")
    done = []
    with chromium() as browser:
        context = browser.new_context(locale="en-US", viewport=DESKTOP)
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        try:
            _steps(page, url, token, note, done)
        except PlaywrightError as exc:  # a timeout: the step after the last one done
            raise PageFailure(f"page: after {done[-1:] or 'nothing'}: {exc}") from exc
        finally:
            context.close()
    return done


def _steps(page: Any, url: str, token: str, note: Path, done: list[str]) -> None:
    """The flow, appending each step to ``done`` as it passes (a failure names the next)."""
    page.goto(f"{url}/ui/")
    sign_in_with_token(page, token)
    page.wait_for_selector("#question", state="visible")
    done.append("page: signed in")
    page.click("#tab-docs")
    page.set_input_files("#upload-input", str(note))
    page.click("#upload-form button[type=submit]")
    page.wait_for_selector(".upload-file[data-status=done]")
    done.append(f"page: uploaded {note.name}, job done")
    page.click("#tab-chat")
    page.fill("#question", QUESTION)
    page.press("#question", "Enter")
    page.wait_for_selector("article.turn.assistant .facts .meta")
    turn = page.locator("article.turn.assistant").last
    answer = turn.locator(".answer").inner_text()
    if "ORCA-88" not in answer:
        raise PageFailure(f"page: the answer does not hold the upload's fact: {answer!r}")
    turn.locator("button.pill.internal").first.click()
    card = page.locator("#source-card")
    where = card.locator(".where").inner_text()
    if note.name not in where:
        raise PageFailure(f"page: the answer's source is {where!r}, not {note.name}")
    done.append(f"page: answered citing {note.name}")
    card.locator("a.original").click()
    viewer = page.locator("#original-viewer")
    viewer.wait_for(state="visible")
    if "ORCA-88" not in viewer.locator(".viewer-text").inner_text():
        raise PageFailure("page: the original opened without the upload's text")
    done.append("page: the original opened in the viewer")
