"""Take the README's dashboard screenshots from a running `guardtrace up --demo`.

    python scripts/screenshots.py --url http://127.0.0.1:8501 --out docs/screenshots

Uses Debian's /usr/bin/chromium through Playwright (no browser download). The request
page shown is the newest unrecoverable request in the list, opened by its id.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from playwright.sync_api import sync_playwright

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8501")
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    parser.add_argument("--request-id", default=None,
                        help="request to show (default: the newest unrecoverable one)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 1100})
        page.goto(args.url, wait_until="networkidle")
        page.get_by_text("Top agents by hallucinations").wait_for(timeout=60_000)
        page.get_by_test_id("stSelectbox").first.click()  # Time range
        page.get_by_role("option", name="Last 15 minutes", exact=True).click()
        page.get_by_text("Top agents by hallucinations").wait_for(timeout=60_000)
        page.wait_for_timeout(2500)
        page.screenshot(path=str(args.out / "overview.png"), full_page=True)

        request_id = args.request_id
        if request_id:
            page.goto(f"{args.url}/requests?request_id={request_id}", wait_until="networkidle")
        else:
            page.goto(f"{args.url}/requests", wait_until="networkidle")
            page.get_by_text("Recent requests with problems").wait_for(timeout=60_000)
            boxes = page.get_by_test_id("stSelectbox")
            boxes.nth(0).click()  # Outcome
            page.get_by_role("option", name="unrecoverable", exact=True).click()
            page.wait_for_timeout(2000)
            boxes.nth(2).click()  # Open a request: the list is newest first
            option = page.get_by_role("option").nth(1)
            request_id = option.inner_text().strip()
            option.click()
        page.get_by_text("Trace timeline").wait_for(timeout=60_000)
        page.wait_for_timeout(2500)
        page.screenshot(path=str(args.out / "request.png"), full_page=True)
        browser.close()
    print(f"wrote {args.out / 'overview.png'} and {args.out / 'request.png'} ({request_id})")


if __name__ == "__main__":
    main()
