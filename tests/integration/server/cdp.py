"""A small Chrome DevTools Protocol client over --remote-debugging-pipe:
headless Chromium reads commands from its fd 3 and writes replies and
events to its fd 4, one JSON message per NUL-terminated record. Standard
library only: no WebDriver, no chromedriver to keep in step with the
browser, no websocket and no debugging port to race for.

    with Browser() as browser:
        page = browser.new_page()
        page.goto("http://127.0.0.1:8080/login.html")
        page.type_into("#username", "alice")
        page.click("#submit")
        page.wait_for("location.pathname === '/welcome.html'")
        page.screenshot(path)

Every wait is bounded; a failure raises AssertionError with what the
page looked like (its URL and text).
"""

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

COMMAND_TIMEOUT = 30.0
WAIT_TIMEOUT = 15.0


def find_chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


class CdpError(Exception):
    """The browser answered a command with an error."""


class Browser:
    """One headless Chromium with a throwaway profile, driven over a pipe."""

    def __init__(self, binary=None, window=(1000, 800), extra_args=()):
        self.binary = binary or find_chromium()
        assert self.binary, "chromium is not installed (apt-get install chromium; ./scripts/test installs it)"
        self.window = window
        self.extra_args = list(extra_args)
        self.proc = None
        self.profile = None
        self._next_id = 0
        self._buffer = b""
        self.events = []  # every event received, in order: (sessionId, method, params)

    def start(self):
        self.profile = tempfile.mkdtemp(prefix="tern-chromium-")
        # Our ends: we write commands to cmd_w and read from out_r.
        cmd_r, self._cmd_w = os.pipe()
        self._out_r, out_w = os.pipe()
        # The browser's ends move above 9, clear of the 3 and 4 they go to.
        cmd_r, out_w = (self._high(fd) for fd in (cmd_r, out_w))
        # Flags as in test_browser.py: headless, as root, and no background
        # traffic to hosts that cannot be reached.
        args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-default-apps", "--disable-extensions", "--mute-audio",
                "--password-store=basic", "--use-mock-keychain",
                f"--window-size={self.window[0]},{self.window[1]}",
                f"--user-data-dir={self.profile}", "--remote-debugging-pipe", *self.extra_args,
                "about:blank"]
        # The pipe ends must be fds 3 and 4 in the browser: bash puts them there
        # (dash takes single-digit fds only).
        script = f'exec "$0" "$@" 3<&{cmd_r} 4>&{out_w} {cmd_r}<&- {out_w}>&-'
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(["bash", "-c", script, self.binary, *args], pass_fds=(cmd_r, out_w),
                                     stdin=subprocess.DEVNULL, stdout=self._stderr, stderr=self._stderr,
                                     start_new_session=True)
        os.close(cmd_r)
        os.close(out_w)
        self.send("Target.setDiscoverTargets", {"discover": False})
        return self

    @staticmethod
    def _high(fd):
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(fd)
        return high

    def stderr(self):
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.send("Browser.close", timeout=5)
            except (CdpError, AssertionError, OSError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(timeout=10)
        for fd in (getattr(self, "_cmd_w", None), getattr(self, "_out_r", None)):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._cmd_w = self._out_r = None
        if self.profile:
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # -- protocol --

    def _read_message(self, deadline):
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self._out_r], [], [], left)
            if not ready:
                return None
            chunk = os.read(self._out_r, 1 << 20)
            if not chunk:
                raise AssertionError(f"chromium closed its DevTools pipe (exit {self.proc.poll()});\n"
                                     f"{self.stderr()[-3000:]}")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(raw)

    def send(self, method, params=None, session=None, timeout=COMMAND_TIMEOUT):
        """Sends one command and returns its result; events that arrive in
        the meantime are kept in self.events."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._cmd_w, data):]
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply is None:
                raise AssertionError(f"no answer to {method} within {timeout}s")
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise CdpError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append((reply.get("sessionId"), reply["method"], reply.get("params", {})))

    def new_page(self):
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        page.call("Page.enable")
        page.call("Runtime.enable")
        return page


class Page:
    """One tab, attached with a flat session."""

    def __init__(self, browser, session):
        self.browser = browser
        self.session = session

    def call(self, method, params=None, timeout=COMMAND_TIMEOUT):
        return self.browser.send(method, params, self.session, timeout)

    def evaluate(self, expression):
        """The value of a JavaScript expression (awaited if a promise)."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise CdpError(f"{expression}: {text}")
        return result["result"].get("value")

    def try_evaluate(self, expression):
        """Like evaluate, but None while a navigation has no document yet."""
        try:
            return self.evaluate(expression)
        except CdpError:
            return None

    def goto(self, url, timeout=WAIT_TIMEOUT):
        result = self.call("Page.navigate", {"url": url})
        assert not result.get("errorText"), f"navigation to {url} failed: {result['errorText']}"
        self.wait_for("document.readyState === 'complete'", timeout)

    def wait_for(self, expression, timeout=WAIT_TIMEOUT, interval=0.05):
        """Polls until the expression is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.try_evaluate(f"(() => {{ try {{ return ({expression}); }} catch (e) {{ return null; }} }})()")
            if value:
                return value
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {expression!r} on "
                                     f"{self.try_evaluate('location.href')}; page text:\n{self.text()[:2000]}")
            time.sleep(interval)

    def wait_for_path(self, path, timeout=WAIT_TIMEOUT):
        self.wait_for(f"location.pathname === {json.dumps(path)} && document.readyState === 'complete'", timeout)

    def text(self, selector="body"):
        return self.try_evaluate(f"(document.querySelector({json.dumps(selector)}) || {{}}).innerText || ''") or ""

    def type_into(self, selector, text):
        """Focuses a field, empties it, and types text as keyboard input."""
        found = self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
                              f" if (!e) return false; e.focus(); e.select(); return true; }})()")
        assert found, f"no {selector} on {self.try_evaluate('location.href')}"
        self.call("Input.dispatchKeyEvent", {"type": "keyDown", "key": "Delete", "code": "Delete",
                                             "windowsVirtualKeyCode": 46})
        self.call("Input.dispatchKeyEvent", {"type": "keyUp", "key": "Delete", "code": "Delete",
                                             "windowsVirtualKeyCode": 46})
        self.call("Input.insertText", {"text": text})
        value = self.evaluate(f"document.querySelector({json.dumps(selector)}).value")
        assert value == text, f"{selector} holds {value!r} after typing {text!r}"

    def click(self, selector):
        """A real mouse click (press and release) in the middle of the element."""
        box = self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
                            f" if (!e) return null; e.scrollIntoView({{block: 'center'}});"
                            f" const r = e.getBoundingClientRect();"
                            f" return {{x: r.left + r.width / 2, y: r.top + r.height / 2, w: r.width, h: r.height}}; }})()")
        assert box and box["w"] > 0 and box["h"] > 0, f"{selector} is missing or not visible: {box}"
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            params = {"type": kind, "x": box["x"], "y": box["y"]}
            if kind != "mouseMoved":
                params.update(button="left", clickCount=1)
            self.call("Input.dispatchMouseEvent", params)

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def exceptions(self):
        """Uncaught JavaScript exceptions seen on this page so far."""
        return [params.get("exceptionDetails", {}) for session, method, params in self.browser.events
                if session == self.session and method == "Runtime.exceptionThrown"]
