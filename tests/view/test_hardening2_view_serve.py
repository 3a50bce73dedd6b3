"""`evalkit view --serve` answers loopback names only, lists no folder, and shows no absolute path.

The server was bound to 127.0.0.1 but accepted any `Host`: a page whose own name is rebound to
127.0.0.1 (DNS rebinding) could read the results from the user's browser. It listed folders, and
thumbs/index.json held the absolute path of every source image (`/home/<user>/…`). Now a foreign
Host gets 403, a folder 404, and index.json keeps paths relative to the site — a site written by an
earlier build, with absolute paths, is still read (its images are not hashed again).
"""

from __future__ import annotations

import http.client
import json
import threading
from pathlib import Path

import pytest
from synthetic_data import make_mcq_jsonl

from evalkit.engine.evaluate import run
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread
from evalkit.view.serve import make_server
from evalkit.view.site import build_site

N_ITEMS = 3


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serve")
    data = make_mcq_jsonl(folder / "data", N_ITEMS, seed=4, image_size=64)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        res = run("mcq", "vllm/m", data=str(data), base_url=sim.url, out=str(folder / "run"),
                  cache_dir=str(folder / "cache"), progress=False, plots=False)
    built = build_site([res.out_dir], folder / "site")
    return folder, res.out_dir, built


@pytest.fixture(scope="module")
def served(site):
    server = make_server(site[2].out, 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _get(port: int, path: str, host: str | None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)  # a bound on a hang only
    try:
        conn.putrequest("GET", path, skip_host=True)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "LOCALHOST", "127.0.0.1:{port}",
                                  "localhost:{port}", "[::1]:{port}", "localhost:9000"])
def test_loopback_names_are_served(served, host):
    status, body = _get(served, "/index.html", host.format(port=served))
    assert status == 200 and b"data/meta.js" in body


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example",
                                  "localhost.evil.example:{port}", "192.168.1.5:{port}", "[::2]:{port}",
                                  "", None, "localhost:{port}:1", "user@localhost"])
def test_other_hosts_are_refused(served, host):
    status, body = _get(served, "/data/meta.js", None if host is None else host.format(port=served))
    assert status == 403 and b"EVK." not in body


@pytest.mark.parametrize("path", ["/thumbs/", "/data/", "/thumbs", "/"])
def test_no_folder_is_listed(served, site, path):
    status, body = _get(served, path, f"127.0.0.1:{served}")
    if path == "/":  # the site's own index.html, not a listing
        assert status == 200 and b"data/meta.js" in body
    elif path == "/thumbs":  # the stdlib's redirect to the folder, which then is not found
        assert status == 301
    else:
        assert status == 404 and b"Directory listing" not in body and b".js" not in body


def test_index_json_holds_relative_paths_only(served, site):
    folder, _, built = site
    status, body = _get(served, "/thumbs/index.json", "localhost")
    assert status == 200
    index = json.loads(body)
    files = sorted(index["files"])
    images = sorted((folder / "data" / "images").glob("*.png"))
    assert len(files) == len(images) == N_ITEMS
    assert files == sorted(f"../data/images/{p.name}" for p in images)
    assert str(folder).encode() not in body and b'"/' not in body
    assert built.thumbs.made == N_ITEMS


def test_a_rebuild_reads_relative_and_older_absolute_indexes(site, tmp_path):
    folder, run_dir, _ = site
    out = tmp_path / "site"
    first = build_site([run_dir], out)
    assert (first.thumbs.made, first.thumbs.hashed) == (N_ITEMS, N_ITEMS)
    again = build_site([run_dir], out)  # relative paths: every image known, none read
    assert (again.thumbs.made, again.thumbs.reused, again.thumbs.hashed) == (0, N_ITEMS, 0)
    path = out / "thumbs" / "index.json"
    index = json.loads(path.read_text())  # as an earlier build wrote it: absolute paths
    index["files"] = {str((out / rel).resolve()): v for rel, v in index["files"].items()}
    assert all(Path(p).is_absolute() and Path(p).is_file() for p in index["files"])
    path.write_text(json.dumps(index))
    old = build_site([run_dir], out)
    assert (old.thumbs.made, old.thumbs.reused, old.thumbs.hashed) == (0, N_ITEMS, 0)
    assert all(not p.startswith("/") for p in json.loads(path.read_text())["files"])  # written relative now


def test_host_allowed():
    from evalkit.view.serve import host_allowed

    assert host_allowed("127.0.0.1:8765") and host_allowed("[::1]") and host_allowed("Localhost:1")
    assert not host_allowed(None) and not host_allowed("localhost:") and not host_allowed("[::1")
