#!/usr/bin/python3
"""A stand-in for the Hugging Face Hub's file server, for testing `kipp pull` offline.

Serves DIR/<owner>/<name>/<revision>/<file> at /<owner>/<name>/resolve/<revision>/<file>,
as the Hub does: Content-Length, `ETag: "<sha256>"` (quoted, like the Hub's LFS files),
single-range requests (206 + Content-Range, 416 past the end), HEAD, and 404 for anything
missing. Standard library only.

Fault injection (--fail-mode), applied to files matching --fault-files (a glob, default *):
  truncate-once  the first GET of each file sends the full Content-Length, then half of the
                 body, then closes the connection
  corrupt        serves the bytes with one byte flipped, with the real file's ETag and size
  truncate-always  like truncate-once, on every GET (a transfer that never completes)
  no-range       ignores Range headers: always 200 with the whole body

--lfs-redirect makes matching *.safetensors files behave like the Hub's LFS files: the
resolve URL answers 302 with X-Linked-Etag / X-Linked-Size and a Location on /cdn/..., whose
response carries an ETag that is not a SHA-256 (as a CDN's would be).

--require-token TOKEN answers 401 unless the request carries `Authorization: Bearer TOKEN`.

The bound port is printed alone on the first line of stdout (use --port 0 for a free one).
Every request is logged to stderr unless --quiet.
"""

import argparse
import fnmatch
import hashlib
import http.server
import os
import re
import sys
import threading
import urllib.parse

_RESOLVE = re.compile(r"^/([^/]+)/([^/]+)/resolve/([^/]+)/([^/]+)$")
_CDN = re.compile(r"^/cdn/([^/]+)/([^/]+)/([^/]+)/([^/]+)$")
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class HubState:
    def __init__(self, root, fail_mode, fault_files, lfs_redirect, token, quiet):
        self.root = os.path.realpath(root)
        self.fail_mode = fail_mode
        self.fault_files = fault_files
        self.lfs_redirect = lfs_redirect
        self.token = token
        self.quiet = quiet
        self.lock = threading.Lock()
        self.get_counts = {}
        self.sha_cache = {}

    def faulty(self, name):
        return self.fail_mode != "none" and fnmatch.fnmatch(name, self.fault_files)

    def count_get(self, path):
        with self.lock:
            self.get_counts[path] = self.get_counts.get(path, 0) + 1
            return self.get_counts[path]

    def sha256(self, path):
        stat = os.stat(path)
        key = (path, stat.st_size, stat.st_mtime_ns)
        with self.lock:
            if key in self.sha_cache:
                return self.sha_cache[key]
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        with self.lock:
            self.sha_cache[key] = digest.hexdigest()
        return self.sha_cache[key]


def make_handler(state):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in separate writes; with Nagle on, each response would wait
        # for the client's delayed ACK (~40 ms).
        disable_nagle_algorithm = True

        def log_message(self, fmt, *args):
            if not state.quiet:
                sys.stderr.write("hub_test_server: " + (fmt % args) + "\n")

        def do_HEAD(self):
            self.handle_file(send_body=False)

        def do_GET(self):
            self.handle_file(send_body=True)

        def locate(self):
            """Returns (kind, file path, file name) or None."""
            url_path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
            for kind, pattern in (("resolve", _RESOLVE), ("cdn", _CDN)):
                match = pattern.match(url_path)
                if not match:
                    continue
                parts = match.groups()
                if any(p in ("", ".", "..") for p in parts):
                    return None
                owner, name, revision, filename = parts
                path = os.path.realpath(os.path.join(state.root, owner, name, revision, filename))
                if not path.startswith(state.root + os.sep) or not os.path.isfile(path):
                    return None
                return kind, path, filename, "/".join(parts)
            return None

        def send_plain(self, status, text, extra_headers=()):
            body = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            for key, value in extra_headers:
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def handle_file(self, send_body):
            if state.token is not None and self.headers.get("Authorization") != "Bearer " + state.token:
                self.send_plain(401, "Invalid credentials\n")
                return
            located = self.locate()
            if located is None:
                self.send_plain(404, "Entry not found\n", [("X-Error-Code", "EntryNotFound")])
                return
            kind, path, filename, key = located
            size = os.path.getsize(path)
            sha = state.sha256(path)
            lfs = state.lfs_redirect and filename.endswith(".safetensors")
            if lfs and kind == "resolve":
                self.send_response(302)
                self.send_header("Location", "/cdn/" + key)
                self.send_header("X-Linked-Etag", '"%s"' % sha)
                self.send_header("X-Linked-Size", str(size))
                self.send_header("ETag", '"%s"' % hashlib.sha1(sha.encode()).hexdigest())
                body = b"Found. Redirecting to /cdn/" + key.encode()
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if send_body:
                    self.wfile.write(body)
                return
            etag = hashlib.md5(sha.encode()).hexdigest() if kind == "cdn" else sha
            faulty = state.faulty(filename)
            start, end = 0, size  # [start, end)
            status = 200
            range_header = self.headers.get("Range")
            if range_header and not (faulty and state.fail_mode == "no-range"):
                match = _RANGE.match(range_header.strip())
                if match is None:
                    self.send_plain(400, "unsupported Range %r\n" % range_header)
                    return
                start = int(match.group(1))
                if match.group(2):
                    end = min(size, int(match.group(2)) + 1)
                if start >= size or start >= end:
                    self.send_plain(416, "range not satisfiable\n", [("Content-Range", "bytes */%d" % size)])
                    return
                status = 206
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(end - start))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("ETag", '"%s"' % etag)
            if status == 206:
                self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end - 1, size))
            self.end_headers()
            if not send_body:
                return
            with open(path, "rb") as f:
                f.seek(start)
                body = f.read(end - start)
            if faulty and state.fail_mode == "corrupt" and body:
                middle = (size // 2 - start) if start <= size // 2 < end else 0
                body = body[:middle] + bytes([body[middle] ^ 0x5A]) + body[middle + 1:]
            truncate = state.fail_mode == "truncate-always" or (
                state.fail_mode == "truncate-once" and state.count_get(key) == 1)
            if faulty and truncate and len(body) > 1:
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                # Closing the socket before Content-Length bytes is what a dropped transfer looks like.
                self.connection.shutdown(2)
                return
            self.wfile.write(body)

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", required=True, help="folder holding <owner>/<name>/<revision>/<file>")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--fail-mode", default="none",
                        choices=["none", "truncate-once", "truncate-always", "corrupt", "no-range"])
    parser.add_argument("--fault-files", default="*", help="glob of file names the fault applies to")
    parser.add_argument("--lfs-redirect", action="store_true", help="redirect *.safetensors like Hub LFS files")
    parser.add_argument("--require-token", default=None, help="answer 401 without this bearer token")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    if not os.path.isdir(args.root):
        parser.error("--root %s is not a directory" % args.root)
    state = HubState(args.root, args.fail_mode, args.fault_files, args.lfs_redirect, args.require_token, args.quiet)
    server = http.server.ThreadingHTTPServer((args.host, args.port), make_handler(state))
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
