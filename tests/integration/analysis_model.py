#!/usr/bin/python3
"""A small model server for the live canary analysis tests (test_analysis.c).

Serves one model version on 127.0.0.1:PORT. Every request but /metrics is an inference:
it answers 200 "vN", or 500 for a fraction ERROR_RATE of them (spread evenly, so a test sees
the same rate at any traffic), after DELAY_MS. /metrics exports, in the Prometheus text
format, what the analysis queries:
  http_requests_total{model,version,code}
  http_request_duration_seconds_bucket{model,version,le} (+ _sum, _count)
Usage: analysis_model.py PORT MODEL VERSION ERROR_RATE DELAY_MS
"""
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, MODEL, VERSION = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ERROR_RATE, DELAY = float(sys.argv[4]), float(sys.argv[5]) / 1000.0
BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0]

lock = threading.Lock()
state = {"n": 0, "codes": {"200": 0, "500": 0}, "buckets": [0] * len(BUCKETS), "sum": 0.0,
         "count": 0}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, code, body, ctype="text/plain"):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/metrics":
            lab = 'model="%s",version="%s"' % (MODEL, VERSION)
            with lock:
                lines = ["# TYPE http_requests_total counter"]
                for code, n in state["codes"].items():
                    lines.append('http_requests_total{%s,code="%s"} %d' % (lab, code, n))
                lines.append("# TYPE http_request_duration_seconds histogram")
                for le, n in zip(BUCKETS, state["buckets"]):
                    lines.append('http_request_duration_seconds_bucket{%s,le="%g"} %d' % (lab, le, n))
                lines.append('http_request_duration_seconds_bucket{%s,le="+Inf"} %d'
                             % (lab, state["count"]))
                lines.append("http_request_duration_seconds_sum{%s} %f" % (lab, state["sum"]))
                lines.append("http_request_duration_seconds_count{%s} %d" % (lab, state["count"]))
            self.reply(200, "\n".join(lines) + "\n", "text/plain; version=0.0.4")
            return
        start = time.monotonic()
        with lock:
            n = state["n"]
            state["n"] += 1
        fail = int((n + 1) * ERROR_RATE) > int(n * ERROR_RATE)
        if DELAY > 0:
            time.sleep(DELAY)
        code = 500 if fail else 200
        took = time.monotonic() - start
        with lock:
            state["codes"][str(code)] += 1
            for i, le in enumerate(BUCKETS):
                if took <= le:
                    state["buckets"][i] += 1
            state["sum"] += took
            state["count"] += 1
        self.reply(code, "v%s\n" % VERSION)


ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
