#!/usr/bin/env python3
"""Drives headless Chromium over the DevTools protocol (--remote-debugging-pipe,
so no port and no network) to check an `ecpi export --format html` page:

  flamegraph_browser.py CHROMIUM PAGE.html FRAME_NAME SCREENSHOT.png

1. the page loads with no console error and no uncaught exception, and its
   root frame is the top row of the graph, on the first screen;
2. the flame graph has frames, and hovering FRAME_NAME shows its tooltip;
3. a real mouse click on FRAME_NAME zooms to it (it spans the full width);
4. the search box highlights matches and reports the matched share;
5. a screenshot of the zoomed page is written to SCREENSHOT.png.
Prints one line per check; exits 1 on the first failure.
"""
import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

TIMEOUT = 60


class Browser:
    def __init__(self, chromium, profile_dir):
        # The pipe protocol: the browser reads commands on fd 3 and writes
        # replies and events on fd 4, each message a JSON text ended by NUL.
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def wire():
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
             "--disable-dev-shm-usage", "--user-data-dir=" + profile_dir, "--remote-debugging-pipe",
             "--window-size=1280,900", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=wire, pass_fds=(3, 4))
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def send(self, method, params=None, session=True):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(msg).encode() + b"\0")
        want = self.next_id
        while True:
            reply = self.read()
            if reply.get("id") == want:
                if "error" in reply:
                    raise RuntimeError("%s: %s" % (method, reply["error"]))
                return reply.get("result", {})
            self.events.append(reply)

    def read(self, deadline=None):
        deadline = deadline or time.time() + TIMEOUT
        while b"\0" not in self.buffer:
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError("no message from chromium")
            ready, _, _ = select.select([self.from_browser], [], [], left)
            if ready:
                chunk = os.read(self.from_browser, 1 << 16)
                if not chunk:
                    raise RuntimeError("chromium closed the pipe (exit %s)" % self.proc.poll())
                self.buffer += chunk
        msg, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(msg)

    def wait_event(self, method):
        for i, ev in enumerate(self.events):
            if ev.get("method") == method:
                return self.events.pop(i)
        deadline = time.time() + TIMEOUT
        while True:
            ev = self.read(deadline)
            if ev.get("method") == method:
                return ev
            self.events.append(ev)

    def evaluate(self, expression):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError("evaluating %s: %s" % (expression, result["exceptionDetails"]))
        return result["result"].get("value")

    def mouse(self, kind, x, y):
        params = {"type": kind, "x": x, "y": y, "button": "left" if kind != "mouseMoved" else "none"}
        if kind in ("mousePressed", "mouseReleased"):
            params["clickCount"] = 1
        self.send("Input.dispatchMouseEvent", params)

    def close(self):
        try:
            self.send("Browser.close", session=False)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def errors_in(events):
    """Console errors, uncaught exceptions and error log entries."""
    out = []
    for ev in events:
        method, p = ev.get("method"), ev.get("params", {})
        if method == "Runtime.exceptionThrown":
            out.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:400])
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console.%s: %s" % (p["type"], json.dumps(p.get("args"))[:400]))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append("log: " + p["entry"].get("text", ""))
    return out


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        sys.exit(1)


def main():
    chromium, page, frame_name, screenshot = sys.argv[1:5]
    profile_dir = tempfile.mkdtemp(prefix="ecpi-chromium-")
    browser = Browser(chromium, profile_dir)
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        browser.session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                       session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            browser.send(domain + ".enable")
        browser.send("Emulation.setDeviceMetricsOverride",
                     {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False})
        browser.send("Page.navigate", {"url": "file://" + os.path.abspath(page)})
        browser.wait_event("Page.loadEventFired")
        frames = browser.evaluate("window.ecpiFlame ? window.ecpiFlame.frameCount() : -1")
        check(frames is not None and frames > 0, "page loaded and drew %s frames" % frames)
        errors = errors_in(browser.events)
        check(not errors, "no console errors or exceptions" + ("" if not errors else ": " + "; ".join(errors)))

        # The first screen shows the root: drawn as an icicle (root on top),
        # a deep whole-system profile no longer opens on an empty box with
        # the root 1,400 px down (issue 34, defect 10).
        root = browser.evaluate(
            "(function(){const f=document.getElementById('flame'); const e=[...f.querySelectorAll('.frame')]"
            ".find(x=>x._node && x._node.depth===0); if(!e) return null; const r=e.getBoundingClientRect();"
            "return {top:r.top, graph_top:f.getBoundingClientRect().top, height:window.innerHeight};})()")
        check(root is not None and 0 <= root["top"] < root["height"] and root["top"] - root["graph_top"] < 17,
              "the root frame is the graph's top row, on the first screen (%s)" % root)
        find = ("(function(){const e=[...document.querySelectorAll('#flame .frame')].find("
                "x=>x.dataset.name===%s && !x.classList.contains('ancestor')); if(!e) return null;"
                "e.scrollIntoView({block:'center'}); const r=e.getBoundingClientRect();"
                "return {x:r.left+Math.min(r.width/2,40), y:r.top+r.height/2, w:r.width,"
                " full:document.getElementById('flame').clientWidth};})()") % json.dumps(frame_name)
        box = browser.evaluate(find)
        check(box is not None, "frame %s is drawn" % frame_name)
        check(box["w"] < box["full"] - 2, "frame %s is narrower than the graph before zooming (%.0f of %.0f px)"
              % (frame_name, box["w"], box["full"]))

        browser.mouse("mouseMoved", box["x"], box["y"])
        tip = browser.evaluate("(function(){const t=document.getElementById('tooltip');"
                               "return t.style.display==='block' ? t.textContent : null;})()")
        check(tip is not None and frame_name in tip and "samples:" in tip, "hover shows the tooltip: %r" % (tip,))

        browser.mouse("mousePressed", box["x"], box["y"])
        browser.mouse("mouseReleased", box["x"], box["y"])
        zoomed = browser.evaluate("window.ecpiFlame.zoomed()")
        check(zoomed == frame_name, "click zoomed to %r" % zoomed)
        after = browser.evaluate(find)
        check(after is not None and after["w"] >= after["full"] - 2,
              "the zoomed frame spans the graph (%.0f of %.0f px)" % (after["w"], after["full"]))
        crumbs = browser.evaluate("document.getElementById('crumbs').textContent")
        check(frame_name in crumbs, "breadcrumbs name the zoomed frame: %r" % crumbs)

        matched = browser.evaluate(
            "(function(){const s=document.getElementById('search'); s.value=%s;"
            "s.dispatchEvent(new Event('input')); return [document.getElementById('matched').textContent,"
            "document.querySelectorAll('#flame .frame.match').length,"
            "document.querySelectorAll('#top tbody tr.match').length];})()" % json.dumps(frame_name))
        check(matched[0].startswith("Matched: ") and matched[1] > 0 and matched[2] > 0,
              "search highlights frames and table rows: %r" % (matched,))

        shot = browser.send("Page.captureScreenshot", {"format": "png"})
        data = base64.b64decode(shot["data"])
        os.makedirs(os.path.dirname(os.path.abspath(screenshot)), exist_ok=True)
        with open(screenshot, "wb") as f:
            f.write(data)
        check(data.startswith(b"\x89PNG") and len(data) > 5000, "screenshot %s (%d bytes)" % (screenshot, len(data)))
        errors = errors_in(browser.events)
        check(not errors, "still no console errors" + ("" if not errors else ": " + "; ".join(errors)))
    finally:
        browser.close()
        shutil.rmtree(profile_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
