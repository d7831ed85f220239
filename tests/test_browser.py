"""Open reports in headless Chromium.

- A real smoke reproduce's report.html: every figure loads, the verdicts render, nothing is
  wider than the page (wide tables scroll inside their box instead of clipping), and its first
  screen says that smoke verdicts are not evidence.
- A cpu-style report, built from a hand-made results folder (tests/report_fixture.py: runs
  written file by file, nothing trained), and the same folder at the smoke preset: at 1280 × 800
  the first screen holds the preset banner, every answer and the table of contents.

``TAILMEM_REPORT=results/cpu/report.html`` checks an existing report instead of a fresh smoke one
(``TAILMEM_SCREENSHOT`` names the full-page screenshot: .ci/run keeps one of the smoke report
in ci-artifacts/report.png).

Marked ``browser``: it needs Debian's ``chromium`` and the ``playwright`` package (``.ci/run``
installs both). Run with ``python -m pytest -m browser``.
"""

import os
import shutil
from pathlib import Path

import pytest

from report_fixture import BENCH_ANSWERS, QA_ANSWERS, cpu_style_folder
from tailmem.cli import main
from tailmem.experiments import headline_questions
from tailmem.report.render import write_report

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


def _playwright():
    if CHROMIUM is None:
        pytest.fail("chromium is not installed (apt-get install chromium chromium-driver)")
    return pytest.importorskip("playwright.sync_api", reason="pip install playwright")


def test_report_renders_in_chromium(smoke_report):
    sync_api = _playwright()
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
        banner = page.locator(".banner").first.inner_text()
        page_width = page.evaluate("document.documentElement.scrollWidth")
        page.screenshot(path=str(screenshot), full_page=True)
        browser.close()
    assert images, "the report has no figures"
    broken = [alt for alt, complete, width in images if not complete or width == 0]
    assert not broken, f"figures that did not load: {broken}"
    assert verdict_rows > 0
    assert page_width <= 1280, f"the page is {page_width} px wide: something is clipped"
    assert "reproduced" in summary
    if "TAILMEM_REPORT" not in os.environ:
        assert banner == (
            "Preset smoke: checks the code runs end to end; its verdicts are not evidence."
        )
    if "TAILMEM_REPORT" not in os.environ:  # the smoke report has both QA studies' sections
        assert any("sensitivity" in h.lower() for h in headings), headings
        assert any("map" in h.lower() for h in headings), headings
    assert screenshot.stat().st_size > 10_000
    print(f"screenshot: {screenshot}")


FIRST_SCREEN = {"width": 1280, "height": 800}
BANNERS = {
    "cpu": "Preset cpu: a laptop-scale reproduction: the papers' effects on small models; what "
    "it cannot show: the paper's 160M scale.",
    "smoke": "Preset smoke: checks the code runs end to end; its verdicts are not evidence.",
}


@pytest.mark.parametrize("preset", ["cpu", "smoke"])
def test_the_first_screen_holds_the_banner_the_answers_and_the_contents(tmp_path, preset):
    sync_api = _playwright()
    report = write_report(cpu_style_folder(tmp_path / "results", preset), headline_questions())
    screenshot = tmp_path / f"first_screen_{preset}.png"
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport=FIRST_SCREEN)
        page.goto(report.resolve().as_uri())
        page.wait_for_load_state("load")
        boxes = {
            name: page.locator(selector).first.bounding_box()
            for name, selector in (
                ("banner", ".banner"),
                ("answers", "#answers"),
                ("contents", "nav.toc"),
            )
        }
        banner = page.locator(".banner").first.inner_text()
        answers = page.locator("table.answers tbody tr").all_inner_texts()
        links = page.locator("nav.toc a").all_inner_texts()
        sections = page.locator("main > section").count()
        last_link = page.locator("nav.toc a").last.bounding_box()
        folded = page.locator("details:not([open]) img").first.is_visible()
        page_width = page.evaluate("document.documentElement.scrollWidth")
        page.screenshot(path=str(screenshot))
        browser.close()
    for name, box in boxes.items():
        assert box is not None, f"the report has no {name}"
        bottom = box["y"] + box["height"]
        assert box["y"] >= 0 and bottom <= FIRST_SCREEN["height"], (
            f"{name} spans y {box['y']:.0f}..{bottom:.0f}: not on the first screen"
        )
    assert banner == BANNERS[preset]
    expected = [*QA_ANSWERS, *BENCH_ANSWERS]
    assert len(answers) == len(expected)
    for shown, answer in zip(answers, expected, strict=True):
        assert shown.startswith(answer["question"]) and answer["evidence"] in shown
    assert len(links) == sections and links[:2] == ["Answers", "Verdicts"]
    assert last_link is not None and last_link["y"] + last_link["height"] <= FIRST_SCREEN["height"]
    assert not folded  # the extra figures wait behind their <details>
    assert page_width <= FIRST_SCREEN["width"]
    print(f"screenshot: {screenshot}")
