"""browser-use, unchanged, against one endpoint (its BrowserSession, no LLM):
navigate, read the page's state, click, type, console, tabs, screenshot, back.

Env: CDP_WS (the browser-level WebSocket URL, with the token), FIXTURE.
Prints `ok - …` per step; exits 1 on the first failure.
Installed and run by scripts/verify-agent-tools.sh (not by CI).
"""

import asyncio
import os
import sys

from browser_use import BrowserSession
from browser_use.browser.events import ClickElementEvent, GoBackEvent, TypeTextEvent

FIXTURE = os.environ["FIXTURE"]


def ok(what: str) -> None:
    print(f"ok - {what}", flush=True)


async def element(session: BrowserSession, predicate) -> object:
    await session.get_browser_state_summary()
    for node in (await session.get_selector_map()).values():
        if predicate(node):
            return node
    raise AssertionError("no such element in the selector map")


async def main() -> None:
    session = BrowserSession(cdp_url=os.environ["CDP_WS"], keep_alive=False)
    await asyncio.wait_for(session.start(), 60)
    try:
        await session.navigate_to(f"{FIXTURE}/form.html")
        # (Its page title can lag behind, on Chrome's own port too: the URL.)
        url = await session.get_current_page_url()
        assert url == f"{FIXTURE}/form.html", url
        ok("navigate")
        button = await element(session, lambda n: n.attributes.get("id") == "btn")
        await (await session.event_bus.dispatch(ClickElementEvent(node=button))).event_result(raise_if_any=True, raise_if_none=False)
        text = await session.get_state_as_text()
        assert "clicked" in text and "not clicked" not in text, text[:800]
        ok("click")
        name = await element(session, lambda n: n.attributes.get("id") == "name")
        await (await session.event_bus.dispatch(TypeTextEvent(node=name, text="Ada"))).event_result(raise_if_any=True, raise_if_none=False)
        ok("type")
        tabs = await session.get_tabs()
        assert any("form.html" in t.url for t in tabs), tabs
        ok(f"tabs ({len(tabs)})")
        png = await session.take_screenshot()
        assert png[:4] == b"\x89PNG", png[:8]
        ok("screenshot")
        await (await session.event_bus.dispatch(GoBackEvent())).event_result(raise_if_any=True, raise_if_none=False)
        ok("back")
    finally:
        await session.kill()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as error:  # noqa: BLE001 - the verdict is the exit code
        print(f"not ok - {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        sys.exit(1)
