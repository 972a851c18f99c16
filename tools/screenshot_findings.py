"""Screenshot a report's health findings in headless Chromium: python3 tools/screenshot_findings.py REPORT.html OUT.png.

Opens the first folded entry with a mouse click first, when there is one (the report of 5c5c097 had none).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from browser_page import Page  # noqa: E402

with Page(Path(sys.argv[1]).resolve().as_uri(), height=1100) as page:
    if page.evaluate("!!document.querySelector('details.finding')"):
        page.click("details.finding > summary")
    page.screenshot(sys.argv[2], "#health")
