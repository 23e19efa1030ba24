"""The admin overview page in headless Chromium, on the example shop with a real worker:
an operator logs in, sees every role running, the carts' turns in the throughput chart, a
dead letter (in its card and its chart), and follows a drill-down link. The screenshot is
kept (``overview-<vendor>.png`` in the screenshot folder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.browser.conftest import Shop
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WORK = """
from django.contrib.auth.models import User
from shop.actors import ShoppingCart
User.objects.create_superuser("operator", "operator@example.com", "operator-password")
for n in range(12):
    ShoppingCart.ref(f"overview-{n}").sync().add_item("shirt", 1 + n % 3)
try:
    ShoppingCart.ref("overview-0").sync().remove_item("no-such-product")
except Exception:
    pass
# A dead letter: a quantity that is no number fails the turn (TypeError), and with one
# attempt (stored with the message when it is enqueued) its first failure is final.
from django.conf import settings
from django.test import override_settings
from solid_objects import MessageFailed
with override_settings(SOLID_OBJECTS={**settings.SOLID_OBJECTS, "MAX_ATTEMPTS": 1}):
    try:
        ShoppingCart.ref("overview-broken").sync().add_item("shirt", "many")
    except MessageFailed:
        pass
    else:
        raise AssertionError("the broken turn did not fail")
"""


def js(browser: Any, script: str) -> Any:
    return browser.execute_script(script)


def test_the_overview_page_in_a_browser(shop: Shop, browser: Any, screenshots: Path):
    shop.shell(WORK)
    browser.get(shop.url + "admin/login/?next=/admin/solid_objects/")
    browser.find_element("name", "username").send_keys("operator")
    browser.find_element("name", "password").send_keys("operator-password")
    browser.find_element("css selector", "input[type=submit]").click()
    wait_until(
        lambda: "so-overview-link" in browser.page_source, what="the app index with its link"
    )
    browser.find_element("css selector", "#so-overview-link a").click()

    def every_role_live() -> bool:
        browser.refresh()
        return not js(browser, "return document.getElementById('so-missing-roles') !== null")

    wait_until(every_role_live, what="the overview shows every role running", details=shop.log)
    assert browser.title.startswith("Actors overview")
    roles = js(browser, "return document.getElementById('so-roles').innerText")
    for kind in ("worker", "effect", "reminder", "broadcast"):
        assert kind in roles
    assert js(browser, "return document.querySelectorAll('svg.so-chart').length") == 3
    bars = js(
        browser,
        "return Array.from(document.querySelectorAll('#so-charts .so-card:first-child rect'))"
        ".map(r => parseFloat(r.getAttribute('height')))",
    )
    assert len(bars) == 60 and max(bars) > 0  # the carts' turns, in the last minutes
    dead = js(browser, "return document.getElementById('so-dead-letters').innerText")
    assert "1 not retried" in dead, dead
    assert "shop.cart/overview-broken" in dead and "add_item" in dead, dead
    assert "TypeError" in dead, dead
    dead_bars = js(
        browser,
        "return Array.from(document.querySelectorAll("
        "'svg.so-chart[aria-label^=\"Dead letters\"] rect'))"
        ".map(r => parseFloat(r.getAttribute('height')))",
    )
    assert len(dead_bars) == 60 and max(dead_bars) > 0  # the dead letters chart shows it
    browser.set_window_size(1280, 1300)  # the whole page, charts included
    shot = screenshots / f"overview-{connection.vendor}.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000

    link = browser.find_element("css selector", "#so-mailboxes a, #so-roles td a")
    target = link.get_attribute("href")
    link.click()
    wait_until(lambda: browser.current_url == target, what="the drill-down link opens")
    assert "Select" in browser.title or "select" in browser.page_source.lower()
