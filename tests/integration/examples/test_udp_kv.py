"""examples/udp_kv with a real UDP socket: tagged answers, the verbs, keys
that expire, and requests it refuses."""

import socket
import time

import pytest


class Client:
    def __init__(self, server):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.settimeout(5.0)
        self.sock.connect(("127.0.0.1", server.port))
        self.tag = 0

    def ask(self, request):
        self.tag += 1
        self.sock.send(f"{self.tag} {request}\n".encode())
        answer = self.sock.recv(70000).decode()
        tag, _, rest = answer.rstrip("\n").partition(" ")
        assert tag == str(self.tag), answer
        return rest


def test_set_get_delete_and_count(example):
    kv = Client(example("udp_kv"))
    assert kv.ask("GET colour") == "NOT_FOUND"
    assert kv.ask("SET colour deep blue") == "OK"
    assert kv.ask("GET colour") == "VALUE deep blue"
    assert kv.ask("SET colour red") == "OK"
    assert kv.ask("GET colour") == "VALUE red"
    assert kv.ask("SET other x") == "OK"
    assert kv.ask("COUNT") == "COUNT 2"
    assert kv.ask("DEL colour") == "DELETED"
    assert kv.ask("DEL colour") == "NOT_FOUND"
    assert kv.ask("COUNT") == "COUNT 1"


def test_answers_find_their_requests_when_many_are_in_flight(example):
    server = example("udp_kv")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(5.0)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    address = ("127.0.0.1", server.port)
    # Fifty in flight at a time: well within what the sockets buffer.
    for window in range(0, 200, 50):
        for i in range(window, window + 50):
            sock.sendto(f"t{i} SET k{i} v{i}".encode(), address)
        answers = {sock.recv(100).decode() for _ in range(50)}
        assert answers == {f"t{i} OK\n" for i in range(window, window + 50)}
    for window in range(0, 200, 50):
        for i in range(window, window + 50):
            sock.sendto(f"g{i} GET k{i}".encode(), address)
        answers = {sock.recv(100).decode() for _ in range(50)}
        assert answers == {f"g{i} VALUE v{i}\n" for i in range(window, window + 50)}


def test_a_key_set_with_a_lifetime_expires_and_setting_it_again_keeps_it(example):
    kv = Client(example("udp_kv"))
    assert kv.ask("SETEX short 1 soon gone") == "OK"
    assert kv.ask("SETEX kept 1 first") == "OK"
    assert kv.ask("SET kept for good") == "OK"  # cancels its expiry
    assert kv.ask("GET short") == "VALUE soon gone"
    deadline = time.monotonic() + 5
    while kv.ask("GET short") != "NOT_FOUND":
        assert time.monotonic() < deadline, "the key did not expire"
        time.sleep(0.1)
    time.sleep(1.2)
    assert kv.ask("GET kept") == "VALUE for good"


def test_bad_requests_get_an_error_and_change_nothing(example):
    kv = Client(example("udp_kv"))
    assert kv.ask("FETCH x") == "ERROR unknown command"
    assert kv.ask("GET") == "ERROR bad key"
    assert kv.ask("SET " + "k" * 251 + " v") == "ERROR bad key"
    assert kv.ask("SETEX x soon v") == "ERROR bad ttl"
    assert kv.ask("SETEX x 0 v") == "ERROR bad ttl"
    assert kv.ask("SET big " + "v" * 60001) == "ERROR value too large"
    assert kv.ask("SET big " + "v" * 60000) == "OK"
    assert kv.ask("GET big") == "VALUE " + "v" * 60000
    assert kv.ask("COUNT") == "COUNT 1"
    # A tag past 64 bytes gets no answer (a tag and the largest value must fit one datagram).
    kv.sock.settimeout(0.5)
    kv.sock.send(b"t" * 65 + b" GET big")
    with pytest.raises(socket.timeout):
        kv.sock.recv(70000)
