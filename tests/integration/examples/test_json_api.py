"""examples/json_api with a real HTTP client: tasks made, read, done by the
timer's job, deleted; JSON that parses whatever the title holds; bad
requests refused; several loops and the job sharing the list."""

import http.client
import json
import threading
import time


def call(server, method, path, body=None):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        conn.request(method, path, body=body)
        response = conn.getresponse()
        data = response.read()
        json_body = response.getheader("Content-Type") == "application/json"
        parsed = json.loads(data) if json_body else data or None
        return response.status, parsed, response
    finally:
        conn.close()


def wait_done(server, task_id, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, task, _ = call(server, "GET", f"/api/tasks/{task_id}")
        assert status == 200
        if task["status"] == "done":
            return task
        time.sleep(0.02)
    raise AssertionError(f"task {task_id} was not done")


def test_a_task_is_made_queued_done_and_deleted(example):
    server = example("json_api", "--tick-ms", 300)
    status, task, response = call(server, "POST", "/api/tasks", b"water the plants")
    assert status == 201
    assert response.getheader("Content-Type") == "application/json"
    assert response.getheader("Location") == f"/api/tasks/{task['id']}"
    assert task == {"id": task["id"], "title": "water the plants", "status": "queued"}
    assert wait_done(server, task["id"])["title"] == "water the plants"
    status, listing, _ = call(server, "GET", "/api/tasks")
    assert status == 200 and listing == {"tasks": [dict(task, status="done")]}
    status, stats, _ = call(server, "GET", "/api/stats")
    assert stats == {"tasks": 1, "queued": 0, "done": 1}
    status, body, _ = call(server, "DELETE", f"/api/tasks/{task['id']}")
    assert status == 204 and body is None
    assert call(server, "GET", f"/api/tasks/{task['id']}")[0] == 404
    assert call(server, "DELETE", f"/api/tasks/{task['id']}")[0] == 404


def test_the_job_takes_tasks_oldest_first_one_per_tick(example):
    # A tick of a second: the reads between two ticks take far less, even
    # under a sanitizer.
    server = example("json_api", "--tick-ms", 1000)
    ids = [call(server, "POST", "/api/tasks", f"task {i}".encode())[1]["id"] for i in range(4)]
    # A deleted task is skipped by the job, not done.
    assert call(server, "DELETE", f"/api/tasks/{ids[1]}")[0] == 204
    assert call(server, "GET", "/api/stats")[1] == {"tasks": 3, "queued": 3, "done": 0}
    wait_done(server, ids[0])
    statuses = [call(server, "GET", f"/api/tasks/{i}")[1]["status"] for i in (ids[0], ids[2], ids[3])]
    assert statuses == ["done", "queued", "queued"], statuses
    wait_done(server, ids[2])
    assert call(server, "GET", f"/api/tasks/{ids[3]}")[1]["status"] == "queued"
    assert call(server, "GET", "/api/stats")[1] == {"tasks": 3, "queued": 1, "done": 2}


def test_titles_come_back_as_the_json_they_were(example):
    server = example("json_api", "--tick-ms", 10000)
    title = 'quote " backslash \\ newline \n tab \t bell \x07 del \x7f é 雪'
    status, task, _ = call(server, "POST", "/api/tasks", title.encode())
    assert status == 201 and task["title"] == title
    assert call(server, "GET", "/api/tasks")[1]["tasks"][0]["title"] == title


def test_bad_requests_are_refused_with_json(example):
    server = example("json_api")
    status, error, _ = call(server, "POST", "/api/tasks", b"")
    assert status == 400 and "error" in error
    assert call(server, "POST", "/api/tasks", b"x" * 1025)[0] == 400
    assert call(server, "GET", "/api/tasks/abc")[0] == 404
    assert call(server, "GET", "/api/tasks/99999999999999999999999")[0] == 404
    assert call(server, "GET", "/api/tasks/")[0] == 404
    assert call(server, "PUT", "/api/tasks")[0] == 405


def test_loops_and_the_job_share_the_list(example):
    server = example("json_api", "--threads", 2, "--tick-ms", 1)
    made = []
    lock = threading.Lock()

    def post_many(n):
        for i in range(n):
            status, task, _ = call(server, "POST", "/api/tasks", f"t{i}".encode())
            assert status == 201
            with lock:
                made.append(task["id"])

    threads = [threading.Thread(target=post_many, args=(40,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(made)) == 160
    deadline = time.monotonic() + 20
    while call(server, "GET", "/api/stats")[1]["done"] < 160:
        assert time.monotonic() < deadline, "the job did not finish the tasks"
        time.sleep(0.05)
    assert call(server, "GET", "/api/stats")[1] == {"tasks": 160, "queued": 0, "done": 160}
