"""An HTTP application for tern's reverse proxy to stand in front of: a
real aiohttp server in its own process (python3 upstream_app.py NAME PORT
[CERT KEY]: with a certificate and its key it speaks HTTPS).

  GET  /name              its NAME (which server answered)
  GET  /echo...           the request as it arrived: method, path, headers (JSON)
  POST /sha256            the sha256 and length of the body, read as it streams
  GET  /bytes?n=N         N bytes of a fixed pattern, with a Content-Length
  GET  /stream?n=&size=&delay=   n pieces, chunked, `delay` seconds apart
  GET  /slow?delay=S      answers after S seconds
  GET  /slowcount         how many /slow requests have begun
  GET  /cut?n=N           a head with Content-Length N, about N/2 bytes of
                          the pattern, then the connection closes
  GET  /redirect          302 to http://app/v1/there (for Location rewriting)
  GET  /accel?to=URI      200 with X-Accel-Redirect: URI and a Content-Disposition
  *    /failon?name=N&code=C   status C if this is app N, else 200 and the name
  POST /count             counts the requests that reached it; GET /count reads
  POST /hangup            reads the body, then closes without answering
  GET  /hangup            closes without answering
  GET  /health            200, or 503 after POST /health/down (until /health/up)
  *    /cached/...?h=NAME:VALUE&status=C&n=N&delay=S
                          for a cache in front: status C (200), the fields
                          given by h (repeatable), a body "NAME #K PATH\n" (K
                          counts the requests /cached has had) padded with the
                          pattern to N bytes when given, after S seconds
                          (body_delay=S2: the head and half the body, the
                          rest S2 seconds later); fail_first=K: 503 "failing"
                          to the first K requests since the count was reset;
                          delay_first=S: the first such request waits S
                          seconds more
                          When the request's If-None-Match names the ETag
                          given by h, or its If-Modified-Since is its
                          Last-Modified, the answer is 304 with the fields
                          (those of h304=NAME:VALUE instead, when given) and
                          no body
  GET  /cachedcount       how many requests /cached has had; POST resets it
  GET  /cachedlast        the last /cached request's method, If-None-Match and
                          If-Modified-Since, X-Probe and X-Forwarded-For
                          (JSON, null when absent)
  POST /cachedfail?status=C|close&delay=S   /cached answers C (with a body
                          "failing") or closes the connection, and first
                          waits S seconds, until POST /cachedfail
  GET  /ws                WebSocket echo (text and binary)
  GET  /tls[?close=1]     over HTTPS: the name the client sent (SNI), the
                          protocol, whether the session was resumed (JSON);
                          close=1 ends the connection after the answer

A forward-auth service, in the style of Authelia (for auth_forward); every
request to /auth... is recorded:

  *    /auth              decides from the request's fields, in this order:
                            Cookie session=alice: 200 "ok" with Remote-User: alice,
                              Remote-Groups: admins,dev and X-Not-Copied: yes
                            Cookie session=mallory: 403 "forbidden"
                            Authorization: Bearer good: 200 with Remote-User: bot
                            X-Forwarded-Uri starting with /public: 204, no Remote-User
                            Accept with text/html: 302 to https://auth.example/login?rd=
                              (X-Original-URL, quoted) with Set-Cookie: auth_flow=1; Path=/
                              and the body "redirecting"
                            else: 401 "login required" (text/plain) with
                              WWW-Authenticate: Bearer realm="tern-test"
  *    /auth/status?code=C   status C with a short body
  *    /auth/slow?delay=S    200 after S seconds
  *    /auth/huge            401 with a 1 MiB body
  *    /auth/close           closes the connection without answering
  GET  /authlog           {"count": requests, "connections": distinct TCP
                          connections, "last": {"method", "path", "headers",
                          "body_length"} or null} (JSON)
  POST /authlog/reset     forgets them
"""

import asyncio
import hashlib
import json
import os
import sys
import urllib.parse

from aiohttp import WSMsgType, web

PATTERN = bytes(range(256)) * 256  # 64 KiB


def make_app(name):
    state = {"count": 0, "healthy": True, "cached": 0, "slow": 0}
    app = web.Application(client_max_size=1 << 30)

    async def name_handler(request):
        return web.Response(text=name)

    async def echo(request):
        body = await request.read()
        return web.json_response({
            "name": name,
            "method": request.method,
            "path": request.path_qs,
            "raw_path": request.raw_path,
            "headers": [[k, v] for k, v in request.headers.items()],
            "body_length": len(body),
        })

    async def sha256(request):
        digest = hashlib.sha256()
        length = 0
        async for piece in request.content.iter_any():
            digest.update(piece)
            length += len(piece)
        return web.json_response({"sha256": digest.hexdigest(), "length": length, "name": name})

    async def some_bytes(request):
        n = int(request.query.get("n", "0"))
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.content_length = n
        await response.prepare(request)
        sent = 0
        while sent < n:
            piece = PATTERN[: min(len(PATTERN), n - sent)]
            await response.write(piece)
            sent += len(piece)
        await response.write_eof()
        return response

    async def stream(request):
        n = int(request.query.get("n", "3"))
        size = int(request.query.get("size", "10"))
        delay = float(request.query.get("delay", "0"))
        response = web.StreamResponse(headers={"Content-Type": "text/plain", "X-Accel-Buffering": "no"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for i in range(n):
            await response.write(str(i % 10).encode() * size)
            if delay:
                await asyncio.sleep(delay)
        await response.write_eof()
        return response

    async def slow(request):
        state["slow"] += 1
        await asyncio.sleep(float(request.query.get("delay", "1")))
        return web.Response(text=f"{name} slow")

    async def cut(request):
        n = int(request.query["n"])
        response = web.StreamResponse()
        response.content_length = n
        await response.prepare(request)
        await response.write((PATTERN * (n // len(PATTERN) + 1))[:n // 2])
        await asyncio.sleep(0.1)
        request.transport.close()
        return response

    async def redirect(request):
        raise web.HTTPFound("http://app/v1/there")

    async def fail_on(request):
        await request.read()
        if request.query.get("name") == name:
            return web.Response(status=int(request.query["code"]), text=f"{name} failed")
        return web.Response(text=name)

    async def accel(request):
        return web.Response(text="not this body", headers={
            "X-Accel-Redirect": request.query["to"], "Content-Disposition": "attachment; filename=x.txt"})

    async def cached(request):
        state["cached"] += 1
        state["cached_last"] = {"method": request.method, "if_none_match": request.headers.get("If-None-Match"),
                                "if_modified_since": request.headers.get("If-Modified-Since"),
                                "probe": request.headers.get("X-Probe"),
                                "forwarded_for": request.headers.get("X-Forwarded-For")}
        await request.read()
        if "delay" in request.query:
            await asyncio.sleep(float(request.query["delay"]))
        if state.get("cached_delay"):
            await asyncio.sleep(state["cached_delay"])
        if state["cached"] == 1 and "delay_first" in request.query:
            await asyncio.sleep(float(request.query["delay_first"]))
        failing = state.get("cached_fail")
        if failing == "close":
            request.transport.close()
            await asyncio.sleep(0.1)
            return web.Response(text="never sent")
        if failing:
            return web.Response(status=int(failing), text="failing")
        if state["cached"] <= int(request.query.get("fail_first", "0")):
            return web.Response(status=503, text="failing")
        headers = []
        for field in request.query.getall("h", []):
            field_name, _, value = field.partition(":")
            headers.append((field_name, value.strip()))
        given = {k.lower(): v for k, v in headers}
        inm, ims = request.headers.get("If-None-Match"), request.headers.get("If-Modified-Since")
        if (inm is not None and inm == given.get("etag")) or (
                inm is None and ims is not None and ims == given.get("last-modified")):
            response = web.Response(status=304)
            h304 = [field.partition(":") for field in request.query.getall("h304", [])]
            for field_name, value in [(n, v.strip()) for n, _, v in h304] if h304 else headers:
                response.headers.add(field_name, value)
            return response
        body = f"{name} #{state['cached']} {request.path}\n".encode()
        if "n" in request.query:
            n = int(request.query["n"])
            body = (body + PATTERN * (n // len(PATTERN) + 1))[:n]
        if "body_delay" in request.query:
            # The head and half the body, then the rest after a while.
            response = web.StreamResponse(status=int(request.query.get("status", "200")))
            response.content_type = "text/plain"
            response.content_length = len(body)
            for field_name, value in headers:
                response.headers.add(field_name, value)
            await response.prepare(request)
            await response.write(body[:len(body) // 2])
            await asyncio.sleep(float(request.query["body_delay"]))
            await response.write(body[len(body) // 2:])
            await response.write_eof()
            return response
        response = web.Response(status=int(request.query.get("status", "200")), body=body,
                                content_type="text/plain")
        for field_name, value in headers:
            response.headers.add(field_name, value)
        return response

    async def cached_count(request):
        if request.method == "POST":
            state["cached"] = 0
        return web.Response(text=str(state["cached"]))

    async def cached_last(request):
        return web.json_response(state.get("cached_last"))

    async def cached_fail(request):
        state["cached_fail"] = request.query.get("status")
        state["cached_delay"] = float(request.query.get("delay", "0"))
        return web.Response(text="set")

    async def count(request):
        if request.method == "POST":
            await request.read()
            state["count"] += 1
        return web.Response(text=str(state["count"]))

    async def hangup(request):
        if request.method == "POST":
            await request.read()
            state["count"] += 1
        request.transport.close()
        await asyncio.sleep(0.1)
        return web.Response(text="never sent")

    async def health(request):
        return web.Response(status=200 if state["healthy"] else 503, text="ok" if state["healthy"] else "down")

    async def health_set(request):
        state["healthy"] = request.match_info["state"] == "up"
        return web.Response(text="set")

    # -- the forward-auth service --

    # Transports are held (not only their ids) so that an id is not reused
    # by another connection while the log lives.
    auth_log = {"count": 0, "last": None, "transports": {}}

    async def record(request):
        body = await request.read()
        auth_log["count"] += 1
        auth_log["transports"].setdefault(id(request.transport), request.transport)
        auth_log["last"] = {
            "method": request.method,
            "path": request.path_qs,
            "headers": [[k, v] for k, v in request.headers.items()],
            "body_length": len(body),
        }

    async def auth(request):
        await record(request)
        session = request.cookies.get("session")
        if session == "alice":
            return web.Response(text="ok", headers={
                "Remote-User": "alice", "Remote-Groups": "admins,dev", "X-Not-Copied": "yes"})
        if session == "mallory":
            return web.Response(status=403, text="forbidden")
        if request.headers.get("Authorization") == "Bearer good":
            return web.Response(text="ok", headers={"Remote-User": "bot"})
        if request.headers.get("X-Forwarded-Uri", "").startswith("/public"):
            return web.Response(status=204)
        if "text/html" in request.headers.get("Accept", ""):
            original = request.headers.get("X-Original-URL", "")
            return web.Response(status=302, text="redirecting", headers={
                "Location": "https://auth.example/login?rd=" + urllib.parse.quote(original, safe=""),
                "Set-Cookie": "auth_flow=1; Path=/"})
        return web.Response(status=401, text="login required", content_type="text/plain",
                            headers={"WWW-Authenticate": 'Bearer realm="tern-test"'})

    async def auth_status(request):
        await record(request)
        code = int(request.query.get("code", "500"))
        return web.Response(status=code, text=f"auth status {code}")

    async def auth_slow(request):
        await record(request)
        await asyncio.sleep(float(request.query.get("delay", "1")))
        return web.Response(text="ok", headers={"Remote-User": "slow"})

    async def auth_huge(request):
        await record(request)
        return web.Response(status=401, body=b"x" * (1 << 20), content_type="text/plain",
                            headers={"WWW-Authenticate": 'Bearer realm="tern-test"'})

    async def auth_close(request):
        await record(request)
        request.transport.close()
        await asyncio.sleep(0.1)
        return web.Response(text="never sent")

    async def auth_log_read(request):
        return web.json_response({"count": auth_log["count"], "connections": len(auth_log["transports"]),
                                  "last": auth_log["last"]})

    async def auth_log_reset(request):
        auth_log.update(count=0, last=None, transports={})
        return web.Response(text="reset")

    async def websocket(request):
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for message in ws:
            if message.type == WSMsgType.TEXT:
                await ws.send_str(message.data)
            elif message.type == WSMsgType.BINARY:
                await ws.send_bytes(message.data)
        return ws

    app.router.add_get("/name", name_handler)
    app.router.add_route("*", "/echo{tail:.*}", echo)
    app.router.add_post("/sha256", sha256)
    app.router.add_get("/bytes", some_bytes)
    app.router.add_get("/stream", stream)
    app.router.add_get("/slow", slow)
    app.router.add_get("/slowcount", lambda request: web.Response(text=str(state["slow"])))
    app.router.add_get("/cut", cut)
    app.router.add_get("/redirect", redirect)
    app.router.add_get("/accel", accel)
    app.router.add_route("*", "/failon", fail_on)
    app.router.add_route("*", "/count", count)
    app.router.add_route("*", "/hangup", hangup)
    app.router.add_get("/health", health)
    app.router.add_post("/health/{state}", health_set)
    app.router.add_route("*", "/cachedcount", cached_count)  # these before /cached...
    app.router.add_get("/cachedlast", cached_last)
    app.router.add_post("/cachedfail", cached_fail)
    app.router.add_route("*", "/cached{tail:.*}", cached)
    app.router.add_get("/ws", websocket)
    app.router.add_get("/tls", tls_state)
    app.router.add_route("*", "/auth", auth)
    app.router.add_route("*", "/auth/status", auth_status)
    app.router.add_route("*", "/auth/slow", auth_slow)
    app.router.add_route("*", "/auth/huge", auth_huge)
    app.router.add_route("*", "/auth/close", auth_close)
    app.router.add_get("/authlog", auth_log_read)
    app.router.add_post("/authlog/reset", auth_log_reset)
    return app


SERVER_NAMES = {}  # id(SSLObject) -> the name its client sent


async def tls_state(request):
    ssl_object = request.transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return web.Response(status=400, text="not over TLS")
    body = {"sni": SERVER_NAMES.get(id(ssl_object)), "version": ssl_object.version(),
            "resumed": ssl_object.session_reused}
    headers = {"Connection": "close"} if request.query.get("close") else {}
    return web.json_response(body, headers=headers)


def server_context(cert, key):
    import ssl
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    def remember_name(ssl_object, name, _context):
        SERVER_NAMES[id(ssl_object)] = name
    context.sni_callback = remember_name
    return context


if __name__ == "__main__":
    tls = server_context(sys.argv[3], sys.argv[4]) if len(sys.argv) > 4 else None
    # UPSTREAM_APP_HOST: another loopback address (a second "host" on the same port).
    web.run_app(make_app(sys.argv[1]), host=os.environ.get("UPSTREAM_APP_HOST", "127.0.0.1"), port=int(sys.argv[2]),
                print=None,
                access_log=None, handle_signals=True, ssl_context=tls)
