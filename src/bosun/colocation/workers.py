"""The processes of ``bosun colocate bench``: a latency-sensitive HTTP service and a CPU
burner. Run as ``python -m bosun.colocation.workers ls-server <work>`` or
``python -m bosun.colocation.workers burner``.

* ``ls-server``: an HTTP/1.1 server on 127.0.0.1 (an ephemeral port, printed on the first
  stdout line), one thread per connection; each ``GET`` runs ``work`` iterations of a
  small arithmetic loop (a fixed amount of CPU, about 1 ms at 20,000 on this machine) and
  answers ``200`` with the iteration count.
* ``burner``: spins on an arithmetic loop until SIGTERM, then prints the number of
  iterations done and exits (its throughput is that count over its run time).
* ``hog``: holds memory on command (the memory step of ``bosun agent memory-step``): it
  prints ``ready``, then reads lines from stdin: ``alloc <MiB>`` allocates that much more
  and writes every byte of it (so the pages are charged to its cgroup), answering
  ``ok <seconds it took>``; ``free`` drops everything it holds, answering ``ok``; end of
  input exits.
"""

from __future__ import annotations

import signal
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def spin(n: int) -> int:
    """Run ``n`` iterations of an arithmetic loop; returns a value that depends on all."""
    acc = 0
    for i in range(n):
        acc = (acc + i * i) % 1_000_003
    return acc


def serve(work: int) -> None:
    """The LS service (see the module docstring); runs until SIGTERM."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # answer in one segment: no Nagle wait behind the client's delayed ACK
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_GET(self) -> None:
            body = str(spin(work)).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever(poll_interval=0.05)
    finally:
        server.server_close()


def burn() -> None:
    """The BE worker (see the module docstring)."""
    stop = False

    def on_term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    print("ready", flush=True)
    done = 0
    while not stop:
        spin(10_000)
        done += 10_000
    print(done, flush=True)


def hog() -> None:
    """The memory worker (see the module docstring)."""
    import time

    held: list[bytearray] = []
    print("ready", flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "alloc" and len(cmd) == 2 and cmd[1].isdigit():
            t0 = time.perf_counter()
            held.append(bytearray(b"\x01") * (int(cmd[1]) * 1024 * 1024))
            print(f"ok {time.perf_counter() - t0:.6f}", flush=True)
        elif cmd[0] == "free":
            held.clear()
            print("ok", flush=True)
        else:
            print(f"error: unknown command {line.strip()!r}", flush=True)


def main(argv: list[str]) -> int:
    """Entry point: ``ls-server <work>``, ``burner`` or ``hog``."""
    if len(argv) >= 1 and argv[0] == "ls-server":
        serve(int(argv[1]) if len(argv) > 1 else 20_000)
        return 0
    if len(argv) >= 1 and argv[0] == "burner":
        burn()
        return 0
    if len(argv) >= 1 and argv[0] == "hog":
        hog()
        return 0
    print(
        "usage: python -m bosun.colocation.workers ls-server <work> | burner | hog",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
