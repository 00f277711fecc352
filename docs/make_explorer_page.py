"""Make docs/figures/explorer_en_de.html (an example explorer page) and docs/figures/explorer.png, its screenshot in
headless Chromium (the README and docs/README.md show it).

    python docs/make_explorer_page.py        # needs Playwright (pip install -e ".[dev]") and .ci/install-browser

The model is that of tutorials 06 and 09: the main job's export when it is there, else the tutorials' own short run
(trained first if needed, about two minutes on 2 CPU cores).
"""

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "tutorials"))

from tutorial_support import add_model_flags, load_translation_model, parse_args  # noqa: E402

from hf_attention.inspection.explorer import explore  # noqa: E402

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TEXT = "Could not open file"


def main() -> None:
    args = parse_args("The example explorer page and its screenshot.", add_model_flags)
    model, tokenizer, origin = load_translation_model(args)
    name = "outputs/translation_en_de/final" if "main job" in origin else "outputs/tutorial_en_de/final"
    page = explore(
        model,
        tokenizer,
        TEXT,
        kind="cross",
        layer=1,
        head="mean",
        title=name,
        path=args.figures / "explorer_en_de.html",
    )
    print(f"wrote {page.path}")

    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as profile:
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path="/usr/bin/chromium",
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1180, "height": 620},
            device_scale_factor=1,
        )
        tab = context.new_page()
        tab.route(
            "**/*", lambda route: route.continue_() if route.request.url.startswith("file://") else route.abort()
        )
        tab.goto(page.path.resolve().as_uri())
        tab.wait_for_selector("body[data-ready=true]")
        tab.hover('#view .qtok[data-q="2"]')  # a highlighted row, as when a reader points at a token
        tab.screenshot(path=str(args.figures / "explorer.png"), full_page=True)
        context.close()
    print(f"wrote {args.figures / 'explorer.png'}")


if __name__ == "__main__":
    main()
