"""Open a smoke run's report.html in headless Chromium: every figure loads, the verdicts render,
nothing is wider than the page (wide tables scroll inside their box instead of clipping).

``TAILMEM_REPORT=results/cpu/report.html`` checks an existing report instead of a fresh smoke one
(``TAILMEM_SCREENSHOT`` names the full-page screenshot; docs/report_cpu.png is made this way).

Marked ``browser``: it needs Debian's ``chromium`` and the ``playwright`` package (``.ci/run``
installs both). Run with ``python -m pytest -m browser``.
"""

import os
import shutil
from pathlib import Path

import pytest

from tailmem.cli import main

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SMOKE_EXPERIMENTS = "assoc-two-group,assoc-scaling,qa-sensitivity,qa-map"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def smoke_report(tmp_path_factory) -> Path:
    if "TAILMEM_REPORT" in os.environ:
        return Path(os.environ["TAILMEM_REPORT"])
    out = tmp_path_factory.mktemp("results")
    assert (
        main(["reproduce", "--preset", "smoke", "--only", SMOKE_EXPERIMENTS, "--out", str(out)])
        == 0
    )
    return out / "report.html"


def test_report_renders_in_chromium(smoke_report):
    if CHROMIUM is None:
        pytest.fail("chromium is not installed (apt-get install chromium chromium-driver)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    screenshot = Path(os.environ.get("TAILMEM_SCREENSHOT", smoke_report.with_suffix(".png")))
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(smoke_report.resolve().as_uri())
        page.wait_for_load_state("load")
        images = page.evaluate(
            "Array.from(document.images).map(i => [i.alt, i.complete, i.naturalWidth])"
        )
        verdict_rows = page.locator("table.claims tbody tr").count()
        summary = page.locator("table.summary").inner_text()
        headings = page.locator("h2").all_inner_texts()
        page_width = page.evaluate("document.documentElement.scrollWidth")
        page.screenshot(path=str(screenshot), full_page=True)
        browser.close()
    assert images, "the report has no figures"
    broken = [alt for alt, complete, width in images if not complete or width == 0]
    assert not broken, f"figures that did not load: {broken}"
    assert verdict_rows > 0
    assert page_width <= 1280, f"the page is {page_width} px wide: something is clipped"
    assert "reproduced" in summary
    if "TAILMEM_REPORT" not in os.environ:  # the smoke report has both QA studies' sections
        assert any("sensitivity" in h.lower() for h in headings), headings
        assert any("map" in h.lower() for h in headings), headings
    assert screenshot.stat().st_size > 10_000
    print(f"screenshot: {screenshot}")
