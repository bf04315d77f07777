"""What the local API's client scripts share (openai_client.py, anthropic_client.py): one
printed line per check, the tally that decides the exit status, and requests made as the
official clients cannot make them."""

import http.client
import sys
from urllib.parse import urlparse

failures = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + (f": {detail}" if detail else ""), flush=True)
    if not ok:
        failures.append(name)


def user(text):
    return [{"role": "user", "content": text}]


def http_to(base):
    """plain_http(method, path, headers, body) for paths under `base`: (status, headers, body text)."""
    server = urlparse(base)

    def plain_http(method, path, headers=None, body=None):
        conn = http.client.HTTPConnection(server.hostname, server.port, timeout=120)
        conn.request(method, server.path + path, body=body, headers=headers or {})
        r = conn.getresponse()
        text = r.read().decode("utf-8", "replace")
        conn.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, text

    return plain_http


def conclude():
    """Exits non-zero when any check failed."""
    if failures:
        print(f"{len(failures)} check(s) failed: {', '.join(failures)}")
        sys.exit(1)
    print("all checks passed")
