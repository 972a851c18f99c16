"""A page in headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe: no
port, no websocket library): the test clicks as a person does (a mouse event at an element's place) and
reads what the page then shows (innerText is only the text a person sees: a closed <details> shows none
of its body)."""
from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from helpers import CHROMIUM


def _onto_3_and_4(read_end: int, write_end: int) -> None:
    """In the child: the pipe ends as fds 3 and 4, moved above 10 first so that neither overwrites the other."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (read_end, write_end)]
    os.dup2(high[0], 3)
    os.dup2(high[1], 4)


class Page:
    """One tab on `url`; `text(selector)`, `click(selector)`, `evaluate(expression)`."""

    def __init__(self, url: str, width: int = 1400, height: int = 900):
        self._profile = tempfile.mkdtemp(prefix="sweep-cdp-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # Chromium reads commands on its fd 3 and writes answers on its fd 4
        self._proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
             "--disable-background-networking", "--disable-component-update", f"--user-data-dir={self._profile}",
             "--remote-debugging-pipe", f"--window-size={width},{height}", "about:blank"],
            pass_fds=(3, 4), preexec_fn=lambda: _onto_3_and_4(to_chrome_r, from_chrome_w),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer, self._next, self._session = b"", 0, None
        target = self._call("Target.createTarget", url="about:blank")["targetId"]
        self._session = self._call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self._call("Page.enable")
        self._call("Page.navigate", url=url)
        self._wait_event("Page.loadEventFired")

    def _send(self, method: str, params: dict) -> int:
        self._next += 1
        message = {"id": self._next, "method": method, "params": params}
        if self._session and not method.startswith("Target."):
            message["sessionId"] = self._session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        return self._next

    def _read(self) -> dict:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_chrome, 1 << 20)
            assert chunk, "Chromium closed its DevTools pipe"
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _call(self, method: str, **params) -> dict:
        wanted = self._send(method, params)
        while True:
            message = self._read()
            if message.get("id") == wanted:
                assert "error" not in message, message
                return message.get("result", {})

    def _wait_event(self, name: str) -> dict:
        while True:
            message = self._read()
            if message.get("method") == name:
                return message.get("params", {})

    def evaluate(self, expression: str):
        """The value of `expression` in the page (run by the test through DevTools, not by the page)."""
        result = self._call("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def text(self, selector: str) -> str:
        """What a person sees of the first element matching `selector` (innerText)."""
        return self.evaluate(f"document.querySelector({json.dumps(selector)}).innerText")

    def click(self, selector: str) -> None:
        """A left click in the middle of the element, scrolled into view first, as a mouse gives it."""
        box = self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
                            "e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect(); "
                            "return [r.left + Math.min(r.width / 2, 40), r.top + r.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            self._call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def screenshot(self, path, selector: str | None = None, height: int | None = None) -> None:
        """A PNG of the viewport, scrolled so that `selector` is at its top; `height` crops it (CSS pixels)."""
        if selector:
            self.evaluate(f"document.querySelector({json.dumps(selector)}).scrollIntoView({{block: 'start'}})")
        params = {"format": "png"}
        if height:
            params["clip"] = {"x": 0, "y": self.evaluate("window.scrollY"), "width": self.evaluate("innerWidth"),
                              "height": height, "scale": 1}
        data = self._call("Page.captureScreenshot", **params)["data"]
        Path(path).write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self._call("Browser.close")
        except (AssertionError, OSError):
            pass
        for fd in (self._to_chrome, self._from_chrome):
            os.close(fd)
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
