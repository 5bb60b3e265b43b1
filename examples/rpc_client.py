#!/usr/bin/env python3
"""A tiny stdlib-only client for `a2rag serve` (newline-delimited JSON-RPC 2.0).

    python3 examples/rpc_client.py unix:/tmp/a2rag.sock "Where was Marie Curie born?"
    python3 examples/rpc_client.py tcp:127.0.0.1:7411 --token s3cret "Who wrote Dune?"
"""

import argparse
import json
import socket


class Client:
    def __init__(self, address, token=None):
        kind, _, rest = address.partition(":")
        if kind == "unix":
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(rest)
        elif kind == "tcp":
            host, _, port = rest.rpartition(":")
            self.sock = socket.create_connection((host, int(port)))
        else:
            raise SystemExit(f"address must be unix:PATH or tcp:HOST:PORT, not {address!r}")
        self.lines = self.sock.makefile("r", encoding="utf-8")
        self.next_id = 0
        if token is not None:
            reply = self.call("auth", {"token": token})
            if "error" in reply:
                raise SystemExit(f"authentication refused: {reply['error']}")

    def call(self, method, params=None):
        """Sends one request; returns its response object, printing notifications on the way."""
        self.next_id += 1
        request = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        self.sock.sendall((json.dumps(request) + "\n").encode("utf-8"))
        for line in self.lines:
            message = json.loads(line)
            if message.get("id") == self.next_id:
                return message
            print("notification:", message.get("method"), message.get("params"))
        raise SystemExit("server closed the connection")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("address")
    parser.add_argument("--token")
    parser.add_argument("questions", nargs="*")
    args = parser.parse_args()
    client = Client(args.address, args.token)
    print("health:", json.dumps(client.call("health")["result"]))
    for question in args.questions:
        reply = client.call("query", {"question": question})
        if "error" in reply:
            print(f"{question}\n  error {reply['error']['code']}: {reply['error']['message']}")
            continue
        result = reply["result"]
        if result["answer"] is not None:
            print(f"{question}\n  answer: {result['answer']}  (new proposals: {result['proposals']})")
        else:
            print(f"{question}\n  abstained: {result['abstained']}")


if __name__ == "__main__":
    main()
