"""The account pages (www/register.html, login.html, welcome.html) in a real
headless Chromium against a tern with the users application: a person
fills the register form, then the login form, and sees the welcome page
with their name; error messages from the API show in the page; logging
out leaves the browser without its session. Screenshots are kept in
build/test-artifacts/ for people to look at.

The driver is cdp.py: the Chrome DevTools Protocol spoken directly over
Chromium's --remote-debugging-pipe, from the standard library. Chosen over
selenium + chromedriver (a pip package, and a chromedriver that must match
the browser's exact version) and playwright-core (node and npm packages,
a protocol layer pinned to other Chromium revisions) because it needs
nothing beyond Debian's chromium, has no debugging port to race for, and
still drives the page as a person does: keyboard input (Input.insertText)
and real mouse presses on the buttons, so the page's own handlers, fetch
calls, cookies and navigations run as they would for a user."""

import json
import shutil
from pathlib import Path

import pytest

from auth_api import auth_config, error_of, login, register
from cdp import Browser, find_chromium
from tern_server import merge

REPO = Path(__file__).resolve().parents[3]
ARTIFACTS = REPO / "build" / "test-artifacts"
PAGES = ["index.html", "register.html", "login.html", "welcome.html", "auth.js", "style.css", "images/tern.svg"]

pytestmark = pytest.mark.skipif(find_chromium() is None, reason="chromium is not installed (scripts/test installs it)")

USER = "wren_42"
PASSWORD = "a long password"


@pytest.fixture
def site(tmp_path):
    """The account pages and what they use, copied from www/."""
    root = tmp_path / "site"
    for rel in PAGES:
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / "www" / rel, target)
    return root


@pytest.fixture
def account_app(tern_factory, tmp_path, site):
    """A tern serving the pages, with the users application on SQLite."""
    db = tmp_path / "db"
    db.mkdir()
    return tern_factory(merge(auth_config(f"sqlite:{db / 'users.db'}"), {"static": {"root": str(site)}}))


@pytest.fixture
def browser():
    with Browser(window=(1000, 760)) as b:
        yield b


def as_shown(message):
    """An API error message as the pages show it (auth.js's asSentence)."""
    message = message.strip()
    message = message[:1].upper() + message[1:]
    return message if message[-1:] in ".!?" else message + "."


def message_of(page):
    """Waits for the page's #message to show; returns (text, class)."""
    page.wait_for("!document.getElementById('message').hidden && document.getElementById('message').textContent")
    return page.text("#message").strip(), page.evaluate("document.getElementById('message').className")


def test_register_log_in_and_see_the_welcome_page(account_app, browser):
    page = browser.new_page()
    page.goto(account_app.url("/register.html"))
    page.type_into("#username", USER)
    page.type_into("#password", PASSWORD)
    page.click("#submit")

    page.wait_for_path("/login.html")
    assert page.evaluate("document.getElementById('username').value") == USER
    text, kind = message_of(page)
    assert USER in text and "created" in text and "ok" in kind, (text, kind)
    page.type_into("#password", PASSWORD)
    page.click("#submit")

    page.wait_for_path("/welcome.html")
    page.wait_for(f"document.getElementById('welcome').textContent === {json.dumps('Welcome, ' + USER)}")
    assert page.evaluate("document.getElementById('welcome').children.length") == 0  # text, not markup
    assert page.evaluate("!document.getElementById('logout').hidden")
    # The session cookie is HttpOnly: the browser has it, scripts cannot read it.
    assert "tern_session" not in page.evaluate("document.cookie")
    cookies = {c["name"]: c for c in page.call("Network.getCookies")["cookies"]}
    assert "tern_session" in cookies and cookies["tern_session"]["httpOnly"], cookies
    assert cookies["tern_session"]["sameSite"] == "Lax", cookies["tern_session"]
    assert page.evaluate("fetch('/api/me').then(r => r.json())") == {"username": USER}
    shot = page.screenshot(ARTIFACTS / "auth-welcome.png")
    assert shot.stat().st_size > 10000

    page.click("#logout")
    page.wait_for_path("/login.html")
    text, _ = message_of(page)
    assert "logged out" in text, text
    assert "tern_session" not in {c["name"] for c in page.call("Network.getCookies")["cookies"]}
    # Without a session the welcome page sends the browser to log in.
    page.goto(account_app.url("/welcome.html"))
    page.wait_for_path("/login.html")
    assert page.exceptions() == [], page.exceptions()


def test_pages_show_the_api_error_messages(account_app, browser):
    assert register(account_app, "taken_name", "some password").status == 201
    page = browser.new_page()

    # Each message in the page is the API's own {"error"} for the same
    # request, written as a sentence.
    page.goto(account_app.url("/register.html"))
    page.type_into("#username", "taken_name")
    page.type_into("#password", "another password")
    page.click("#submit")
    text, kind = message_of(page)
    assert text == as_shown(error_of(register(account_app, "taken_name", "another password"), 409))
    assert "error" in kind
    assert page.evaluate("location.pathname") == "/register.html"

    page.type_into("#username", "ab")
    page.click("#submit")
    page.wait_for(f"document.getElementById('message').textContent !== {json.dumps(text)}")
    text, _ = message_of(page)
    assert text == as_shown(error_of(register(account_app, "ab", "another password"), 400))

    page.goto(account_app.url("/login.html"))
    page.type_into("#username", "taken_name")
    page.type_into("#password", "not the password")
    page.click("#submit")
    text, kind = message_of(page)
    assert text == as_shown(error_of(login(account_app, "taken_name", "not the password"), 401))
    assert "error" in kind
    assert page.evaluate("location.pathname") == "/login.html"
    page.screenshot(ARTIFACTS / "auth-login-error.png")
    assert page.exceptions() == [], page.exceptions()


def test_account_pages_without_the_api_show_an_error(tern_factory, site, browser):
    """A tern with no [auth] block: the pages say something went wrong
    instead of failing silently."""
    srv = tern_factory({"static": {"root": str(site)}})
    page = browser.new_page()
    page.goto(srv.url("/register.html"))
    page.type_into("#username", USER)
    page.type_into("#password", PASSWORD)
    page.click("#submit")
    text, kind = message_of(page)
    assert "error" in kind and "HTTP" in text, (text, kind)
    assert page.evaluate("location.pathname") == "/register.html"
    page.goto(srv.url("/welcome.html"))
    text, kind = message_of(page)
    assert "error" in kind, (text, kind)
    assert page.exceptions() == [], page.exceptions()
