#!/usr/bin/python3
"""A hostile Prometheus for test_analysis.c: /api/v1/query answers nonsense chosen by the
query's text: 'nan' NaN, 'inf' +Inf, 'str' a string result, 'many' two series, 'huge' a
2 MiB body, 'bad' HTTP 400 with an error, anything else a good one-sample vector.
Usage: analysis_hostile.py PORT
"""
import json
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def vector(*values):
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"i": str(i)}, "value": [1700000000, v]} for i, v in enumerate(values)]}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query).get("query", [""])[0]
        code, body = 200, None
        if "nan" in q:
            body = vector("NaN")
        elif "inf" in q:
            body = vector("+Inf")
        elif "str" in q:
            body = {"status": "success", "data": {"resultType": "string", "result": [1, "x"]}}
        elif "many" in q:
            body = vector("1", "2")
        elif "bad" in q:
            code, body = 400, {"status": "error", "errorType": "bad_data", "error": "parse error"}
        elif "huge" in q:
            data = b'{"status":"success","pad":"' + b"x" * (2 << 20) + b'"}'
        else:
            body = vector("1")
        if body is not None:
            data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except OSError:
            pass  # the client gave up on a body too large: that is the point


ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
