#!/usr/bin/env python3
"""A slow application for the caching example: every page takes a second.

It says how long its pages may be kept (Cache-Control: max-age, 10 s
unless told), and how many requests it has answered, so that one can see
which requests reached it.

  python3 examples/cache/app.py [PORT [MAX_AGE]]     # default 3000 10
"""
import http.server
import sys
import threading
import time

answered = 0
lock = threading.Lock()


class App(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        global answered
        time.sleep(1)
        with lock:
            answered += 1
            n = answered
        body = f"{self.path}: made at {time.strftime('%H:%M:%S')}, request {n} of the application\n"
        body = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Cache-Control", f"max-age={max_age}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


port = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
max_age = int(sys.argv[2]) if len(sys.argv) > 2 else 10
http.server.ThreadingHTTPServer(("127.0.0.1", port), App).serve_forever()
