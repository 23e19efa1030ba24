"""Live pages in a real browser: the example shop served by uvicorn (broadcasts delivered in
the web process, no Redis), a real worker, headless Chromium. ``make test-browser``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.browser.conftest import Shop
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]

COUNT = "#cart-count [data-solid-objects-observable]"
STATUS = "#cart-status [data-solid-objects-observable]"


def text(browser: Any, selector: str) -> str:
    return str(browser.execute_script(f"return document.querySelector('{selector}').textContent"))


def state(browser: Any, selector: str) -> str:
    return str(
        browser.execute_script(
            f"return document.querySelector('{selector}').dataset.solidObjectsState"
        )
    )


def open_live(browser: Any, shop: Shop) -> None:
    """Load the shop and wait until every live element is subscribed; mark the document so
    a reload would be noticed."""
    browser.get(shop.url)
    wait_until(
        lambda: browser.execute_script(
            "return !!window.solidObjects && window.solidObjects.state === 'open' && "
            "document.querySelectorAll('[data-solid-objects-state=\"live\"]').length === 2"
        ),
        what="the page subscribed its live elements",
        details=shop.log,
    )
    browser.execute_script("window.__notReloaded = true")


def not_reloaded(browser: Any) -> bool:
    return bool(browser.execute_script("return window.__notReloaded === true"))


def add_to_cart(browser: Any, product: str) -> None:
    browser.execute_script(
        f"document.querySelector('form[action=\"/cart/add/{product}/\"]').submit()"
    )


def session_key(browser: Any) -> str:
    return str(browser.get_cookie("sessionid")["value"])


def cart_id(shop: Shop, key: str) -> str:
    return shop.shell(
        "from django.contrib.sessions.backends.db import SessionStore; "
        f"print(SessionStore({key!r})['shop_cart_id'])"
    ).strip()


def cart_call(shop: Shop, cart: str, code: str) -> str:
    return shop.shell(
        f"from shop.actors import ShoppingCart; cart = ShoppingCart.ref({cart!r}); {code}"
    )


def all_delivered(shop: Shop) -> bool:
    out = shop.shell(
        "from solid_objects.models import Broadcast; "
        "print(Broadcast.objects.exclude(status='delivered').count())"
    )
    return out.strip() == "0"


def test_two_windows_on_one_cart_follow_it_live(
    shop: Shop, browser: Any, screenshots: Path
) -> None:
    open_live(browser, shop)
    first = browser.current_window_handle
    assert text(browser, COUNT) == "0" and text(browser, STATUS) == "open"
    browser.switch_to.new_window("window")
    open_live(browser, shop)
    second = browser.current_window_handle

    browser.switch_to.window(first)
    add_to_cart(browser, "shirt")
    wait_until(lambda: text(browser, COUNT) == "1", what="the first window reloaded")
    browser.switch_to.window(second)
    wait_until(lambda: text(browser, COUNT) == "1", what="the second window updated live")
    assert not_reloaded(browser)
    assert text(browser, "#cart-count-unit") == "item"  # the page's solid-objects:change hook

    browser.switch_to.window(first)
    open_live(browser, shop)
    add_to_cart(browser, "hat")
    wait_until(lambda: text(browser, COUNT) == "2", what="the first window reloaded")
    browser.switch_to.window(second)
    wait_until(lambda: text(browser, COUNT) == "2", what="the second window updated live")
    browser.save_screenshot(str(screenshots / f"live-demo-{connection.vendor}-update.png"))
    browser.switch_to.window(first)
    open_live(browser, shop)
    browser.execute_script("document.querySelector('form[action=\"/cart/checkout/\"]').submit()")
    # The payment effect and its callback run in the worker; its commit reaches both windows.
    for window in (first, second):
        browser.switch_to.window(window)
        wait_until(
            lambda: text(browser, STATUS) == "paid",
            what="the worker's payment callback shows live",
            details=shop.log,
        )
    assert not_reloaded(browser) and text(browser, COUNT) == "0"
    assert browser.find_element("id", "cart-changed").is_displayed()
    assert "stale" in browser.find_element("id", "cart-lines").get_attribute("class")
    shot = screenshots / f"live-demo-{connection.vendor}.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000


def test_refused_subscriptions_never_update(shop: Shop, browser: Any) -> None:
    open_live(browser, shop)
    token_a = browser.execute_script(
        f"return document.querySelector('{COUNT}').dataset.solidObjectsToken"
    )
    cart_a = cart_id(shop, session_key(browser))
    browser.delete_all_cookies()  # now another visitor
    open_live(browser, shop)
    key_b = session_key(browser)
    cart_b = cart_id(shop, key_b)
    assert cart_b != cart_a
    forged = token_a[:-3] + ("AAA" if not token_a.endswith("AAA") else "BBB")
    browser.execute_script(
        """
        for (const [id, token] of [["other", arguments[0]], ["forged", arguments[1]]]) {
          const el = document.createElement("span");
          el.id = id; el.textContent = "untouched";
          el.dataset.solidObjectsToken = token;
          el.dataset.solidObjectsObservable = "item_count";
          document.body.appendChild(el);
        }
        window.solidObjects.reconnect();
        """,
        token_a,
        forged,
    )
    wait_until(
        lambda: state(browser, "#other") == "refused" and state(browser, "#forged") == "refused",
        what="both injected subscriptions are refused",
        details=shop.log,
    )
    assert browser.execute_script(
        "return [document.querySelector('#other').dataset.solidObjectsReason, "
        "document.querySelector('#forged').dataset.solidObjectsReason]"
    ) == ["viewer", "invalid"]
    cart_call(shop, cart_a, "cart.add_item('sock')")
    wait_until(lambda: all_delivered(shop), what="visitor A's change was broadcast")
    assert text(browser, "#other") == "untouched" and text(browser, "#forged") == "untouched"

    # The policy says no at subscribe time: this session no longer owns the cart it shows.
    shop.shell(
        "from django.contrib.sessions.backends.db import SessionStore; "
        f"s = SessionStore({key_b!r}); s['shop_cart_id'] = 'someone-else'; s.save()"
    )
    browser.execute_script("window.solidObjects.reconnect()")
    wait_until(
        lambda: state(browser, COUNT) == "refused" and state(browser, STATUS) == "refused",
        what="the page's own elements are refused by the policy",
        details=shop.log,
    )
    cart_call(shop, cart_b, "cart.add_item('sock')")
    wait_until(lambda: all_delivered(shop), what="cart B's change was broadcast")
    assert text(browser, COUNT) == "0" and not_reloaded(browser)


def test_after_the_server_restarts_the_page_catches_up(shop: Shop, browser: Any) -> None:
    open_live(browser, shop)
    cart = cart_id(shop, session_key(browser))
    shop.stop("web")
    wait_until(
        lambda: browser.execute_script("return window.solidObjects.state") != "open",
        what="the page saw the server go",
    )
    cart_call(shop, cart, "cart.add_item('sock', 3)")  # while no web server runs
    shop.start_web()
    wait_until(
        lambda: text(browser, COUNT) == "3",
        what="the page caught up after the restart",
        details=shop.log,
    )
    assert not_reloaded(browser)
    assert browser.execute_script("return window.solidObjects.connects") >= 2
    assert browser.execute_script("return window.solidObjects.refreshes") >= 1
    # And it is live again.
    cart_call(shop, cart, "cart.add_item('hat')")
    wait_until(lambda: text(browser, COUNT) == "4", what="live again", details=shop.log)


def test_a_recreated_actor_shows_its_new_incarnation(shop: Shop, browser: Any) -> None:
    open_live(browser, shop)
    cart = cart_id(shop, session_key(browser))
    for product in ("shirt", "hat", "sock"):
        cart_call(shop, cart, f"cart.add_item({product!r}, 2)")
    wait_until(lambda: text(browser, COUNT) == "6", what="the changes arrived", details=shop.log)
    old = browser.execute_script(f"return document.querySelector('{COUNT}').dataset")
    cart_call(shop, cart, "cart.destroy(); cart.add_item('hat')")
    wait_until(
        lambda: text(browser, COUNT) == "1",
        what="the new incarnation's value replaced the old one",
        details=shop.log,
    )
    new = browser.execute_script(f"return document.querySelector('{COUNT}').dataset")
    assert new["solidObjectsInstance"] != old["solidObjectsInstance"]
    assert int(new["solidObjectsRevision"]) < int(old["solidObjectsRevision"])
    assert not_reloaded(browser)


def test_with_channels_redis_the_worker_delivers(redis_shop: Shop, browser: Any) -> None:
    shop = redis_shop
    open_live(browser, shop)
    cart = cart_id(shop, session_key(browser))
    cart_call(shop, cart, "cart.add_item('sock', 2)")
    wait_until(
        lambda: text(browser, COUNT) == "2", what="delivered through Redis", details=shop.log
    )
    assert not_reloaded(browser)
    assert "embedded broadcast delivery started" not in shop.logs["web"].read_text()
    assert "leaves broadcasts to the web process" not in shop.logs["worker"].read_text()
    assert "kind=broadcast" in shop.logs["worker"].read_text()
