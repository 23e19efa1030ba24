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
LAST_ORDER = "#last-order [data-solid-objects-observable]"  # invalidation-only


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
            "document.querySelectorAll('[data-solid-objects-state=\"live\"]').length === 3"
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


def received(browser: Any) -> int:
    """Change messages that reached the page (applied or not)."""
    return int(browser.execute_script("return window.solidObjects.received"))


def position(browser: Any, selector: str) -> tuple[int, int]:
    """The element's ``(instance_id, state_revision)``."""
    found = browser.execute_script(
        "const d = document.querySelector(arguments[0]).dataset; "
        "return [+d.solidObjectsInstance, +d.solidObjectsRevision]",
        selector,
    )
    return int(found[0]), int(found[1])


def place(browser: Any, selector: str, instance: int, revision: int, shown: str) -> None:
    """Make the element show ``shown`` as if it came from ``(instance, revision)``."""
    browser.execute_script(
        "const el = document.querySelector(arguments[0]); "
        "el.dataset.solidObjectsInstance = arguments[1]; "
        "el.dataset.solidObjectsRevision = arguments[2]; el.textContent = arguments[3];",
        selector,
        str(instance),
        str(revision),
        shown,
    )


def refreshed(browser: Any) -> None:
    """Fetch every element's value from observed_values now, and wait for the answer."""
    browser.execute_async_script(
        "window.solidObjects.refresh().then(arguments[arguments.length - 1])"
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
    assert text(browser, "#cart-count-unit") == "items"
    cart = cart_id(shop, session_key(browser))
    browser.switch_to.new_window("window")
    open_live(browser, shop)
    second = browser.current_window_handle

    # A change made elsewhere (a sync call from a shell, neither window) reaches both.
    cart_call(shop, cart, "cart.add_item('sock')")
    for window in (first, second):
        browser.switch_to.window(window)
        wait_until(
            lambda: text(browser, COUNT) == "1",
            what="each window updated live",
            details=shop.log,
        )
        assert not_reloaded(browser)
        assert text(browser, "#cart-count-unit") == "item"  # the page's change hook

    browser.switch_to.window(first)
    add_to_cart(browser, "shirt")
    wait_until(lambda: text(browser, COUNT) == "2", what="the first window reloaded")
    browser.switch_to.window(second)
    wait_until(lambda: text(browser, COUNT) == "2", what="the second window updated live")
    assert not_reloaded(browser)
    assert text(browser, "#cart-count-unit") == "items"

    browser.switch_to.window(first)
    open_live(browser, shop)
    add_to_cart(browser, "hat")
    wait_until(lambda: text(browser, COUNT) == "3", what="the first window reloaded")
    browser.switch_to.window(second)
    wait_until(lambda: text(browser, COUNT) == "3", what="the second window updated live")
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
    assert text(browser, LAST_ORDER).startswith("Last order: €39.30 — paid (PAY-")
    assert browser.find_element("id", "cart-changed").is_displayed()
    assert "stale" in browser.find_element("id", "cart-lines").get_attribute("class")
    shot = screenshots / f"live-demo-{connection.vendor}.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000


def test_values_apply_in_instance_then_revision_order(shop: Shop, browser: Any) -> None:
    """A value from an older revision, or from an older incarnation whatever its revision
    (a late socket message or a late refresh), never replaces a newer one; a newer
    incarnation's value replaces the old one even with a lower revision."""
    open_live(browser, shop)
    cart = cart_id(shop, session_key(browser))
    cart_call(shop, cart, "cart.add_item('sock')")
    wait_until(lambda: text(browser, COUNT) == "1", what="the first change", details=shop.log)
    instance, revision = position(browser, COUNT)
    assert instance > 0 and revision > 0

    def change_arrives(count: int) -> None:
        before = received(browser)
        cart_call(shop, cart, "cart.add_item('hat')")
        wait_until(
            lambda: received(browser) > before,
            what=f"the change to {count} items reached the page",
            details=shop.log,
        )

    # The page already shows a later revision of this incarnation.
    place(browser, COUNT, instance, revision + 100, "ahead")
    change_arrives(2)
    refreshed(browser)
    assert text(browser, COUNT) == "ahead"

    # The page already shows a later incarnation (created after this one): this one's
    # values, socket or refresh, are late whatever their revision.
    place(browser, COUNT, instance + 1, 1, "newer incarnation")
    refreshed(browser)
    assert text(browser, COUNT) == "newer incarnation"
    change_arrives(3)
    assert text(browser, COUNT) == "newer incarnation"

    # The reverse: the page shows an earlier incarnation, far along its revisions; the
    # current incarnation's values replace it.
    place(browser, COUNT, instance - 1, revision + 1000, "older incarnation")
    change_arrives(4)
    assert text(browser, COUNT) == "4" and position(browser, COUNT)[0] == instance
    place(browser, COUNT, instance - 1, revision + 1000, "older incarnation")
    refreshed(browser)
    assert text(browser, COUNT) == "4" and position(browser, COUNT)[0] == instance
    assert not_reloaded(browser)


def test_an_invalidation_only_observable_is_fetched_and_shown(shop: Shop, browser: Any) -> None:
    """The cart's last order (``@observable`` without ``broadcast="value"``): its broadcast
    carries no value, the page fetches it from observed_values and shows it, no reload."""
    open_live(browser, shop)
    cart = cart_id(shop, session_key(browser))
    cart_call(shop, cart, "cart.add_item('sock', 2)")
    wait_until(lambda: text(browser, COUNT) == "2", what="the count changed", details=shop.log)
    assert text(browser, LAST_ORDER) == "" and position(browser, LAST_ORDER)[0] == 0
    browser.execute_script(
        "window.__lastOrder = []; document.addEventListener('solid-objects:change', (e) => {"
        "  if (e.detail.observable === 'last_order') window.__lastOrder.push(e.detail.source);"
        "});"
    )
    refreshes = browser.execute_script("return window.solidObjects.refreshes")
    cart_call(shop, cart, "cart.checkout()")  # the worker pays; its callback commits
    wait_until(
        lambda: text(browser, LAST_ORDER).startswith("Last order: €9.80 — paid (PAY-"),
        what="the last order was fetched and shown",
        details=shop.log,
    )
    sources = browser.execute_script("return window.__lastOrder")
    assert sources and set(sources) == {"refresh"}  # applied from observed_values only
    assert browser.execute_script("return window.solidObjects.refreshes") > refreshes
    assert position(browser, LAST_ORDER)[0] == position(browser, COUNT)[0]
    # The status is a value observable of the same commit: its own broadcast, which may
    # arrive after the last order's fetch (nothing orders the two); it must arrive, with
    # the page never reloaded.
    wait_until(lambda: text(browser, STATUS) == "paid", what="the status", details=shop.log)
    assert not_reloaded(browser) and text(browser, STATUS) == "paid"
    rows = shop.shell(
        "from solid_objects.models import Broadcast; "
        "print(sorted({repr(v) for v in Broadcast.objects.filter("
        "observable_name='last_order').values_list('value', flat=True)}))"
    )
    assert rows.strip() == "['{}']"  # the rows never carried the order


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
