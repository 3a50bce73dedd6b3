"""`vertex/MODEL` end to end (issue 34, part 2): Gemini through google-genai's Vertex client and Claude through
the anthropic SDK's AsyncAnthropicVertex, against the simulator's Vertex routes, signed in with a fake service
account (a fresh RSA key) whose token_uri is the simulator's token endpoint. Each answers mcq, resumes for free,
is cached across run directories, costs what the price table says, survives faults and throttling, and no
credential (the private key, its id, an access token) reaches a file, the console or a message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_under_test import run_main
from hostile_routes import HostileRoutes
from synthetic_data import make_mcq_jsonl
from vertex_account import FakeAccount, fake_account

from evalkit.core.errors import EvalkitError
from evalkit.engine.evaluate import run
from evalkit.money.pricing import load_prices
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.machinery.faults import SimFaults
from evalkit.sim.server import SimConfig, SimThread
from evalkit.sim.vertex.routes import TOKENS

N = 6
PROJECT, LOCATION = "sim-project", "us-central1"
GEMINI, CLAUDE = "gemini-2.5-flash", "claude-sonnet-4-5@20250929"
ROUTES = {GEMINI: ":generateContent", CLAUDE: ":rawPredict"}


class Cloud:
    """One simulated Vertex AI (module-scoped), the account it knows, and the tokens it issued."""

    def __init__(self, root: Path, faults: SimFaults | None = None, strict: bool = False):
        self.data = make_mcq_jsonl(root / "ds", N, seed=21)
        self.account = fake_account()
        self.outsider = fake_account("not-registered")  # signs with a key the token endpoint does not know
        self.denied = fake_account("no-role", allowed=False)  # known, but without a Vertex AI role
        self.apps: list = []
        config = SimConfig(answer_key=answer_key_for("mcq", {"data": str(self.data)}), faults=faults or SimFaults(),
                           google_accounts=(self.account.public, self.denied.public), strict_model=strict,
                           served_model_name=GEMINI)
        self.hostile = HostileRoutes()
        self.sim = SimThread(config, routes=self._routes).start()
        (root / "keys").mkdir()
        self.key_file = self.account.key_file(root / "keys" / "sa.json", self.sim.url + "/token", PROJECT)
        self.root = root

    def _routes(self, routes) -> None:
        self.apps.append(routes.app)
        self.hostile(routes)

    @property
    def tokens(self) -> list[str]:
        return list(self.apps[0][TOKENS].by_token)

    def env(self, key_file: Path | None = None, **changes: str | None) -> dict[str, str]:
        env = {"GOOGLE_APPLICATION_CREDENTIALS": str(key_file or self.key_file), "GOOGLE_CLOUD_PROJECT": PROJECT,
               "GOOGLE_CLOUD_LOCATION": LOCATION, "NO_PROXY": "127.0.0.1", "HOME": str(self.root / "home")}
        env.update(changes)
        return {k: v for k, v in env.items() if v is not None}

    def asked(self, model: str) -> list:
        return [h for h in self.sim.heard if h.path.endswith(model + ROUTES[model])]

    def run(self, model: str, out: Path, env: dict[str, str] | None = None, base_url: str = "", **kw):
        return run("mcq", f"vertex/{model}", data=str(self.data), base_url=base_url or self.sim.url, env=env or self.env(),
                   out=str(out), cache_dir=str(out.parent / "cache"), progress=False, plots=False, **kw)


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    c = Cloud(tmp_path_factory.mktemp("vertex"))
    yield c
    c.sim.close()


@pytest.fixture
def stormy(tmp_path_factory):
    # seed 213: the first request draws a 429 (RESOURCE_EXHAUSTED: Vertex's throttling), the third a 503 (a 529
    # overloaded_error on Claude's route), none of the next eleven: two faults, each retried (every fault a
    # retry's wait: the test stays short)
    faults = SimFaults(rate=0.2, kinds=("429", "500", "503"), retry_after=0.01, seed=213)
    c = Cloud(tmp_path_factory.mktemp("stormy"), faults=faults)
    yield c
    c.sim.close()


def _files_with(root: Path, secrets: list[str]) -> list[tuple[Path, str]]:
    """The files under root (key files in a `keys` folder aside) holding any of the secrets."""
    return [(p, s[:12]) for p in root.rglob("*") if p.is_file() and "keys" not in p.parts
            for s in secrets if s.encode() in p.read_bytes()]


def _key_secrets(account: FakeAccount) -> list[str]:
    body = "".join(account.private_pem.splitlines()[1:-1])  # the key's base64, without its PEM lines
    return [account.key_id, body[:64], body[-64:]]


@pytest.mark.parametrize("model", [GEMINI, CLAUDE])
def test_a_model_on_vertex_answers_resumes_free_is_cached_and_costs(cloud, model, tmp_path, capsys):
    first = cloud.run(model, tmp_path / "run")
    asked = cloud.asked(model)
    assert first.exit_code == 0, first.messages
    assert first.summary["metrics"]["accuracy"] == 100.0 and len(first.records) == N
    assert len(asked) == N and all(h.auth == ("bearer",) for h in asked)
    assert all(f"/projects/{PROJECT}/locations/{LOCATION}/publishers/" in h.path for h in asked)
    # the endpoint is the project and location, never a credential
    identity = json.loads((tmp_path / "run" / "config.json").read_text())["identity"]
    assert identity["endpoint"] == f"{cloud.sim.url}/projects/{PROJECT}/locations/{LOCATION}"
    # cost: the usage at the price table's vertex/ price
    price = load_prices().price_for("vertex", model)
    usage = first.summary["usage"]
    expected = (usage["input_tokens"] * price.input_per_m + usage["output_tokens"] * price.output_per_m) / 1e6
    assert usage["cost_usd"] > 0 and usage["cost_usd"] == pytest.approx(expected, rel=1e-6)
    # the same command again: nothing asked; another --out: every answer from the cache
    again = cloud.run(model, tmp_path / "run")
    fresh = cloud.run(model, tmp_path / "fresh")
    assert again.exit_code == 0 and fresh.exit_code == 0
    assert len(cloud.asked(model)) == N and fresh.summary["cache"]["hits"] == N
    # another project is another endpoint: asked again (by the command line: its console is checked too)
    other = run_main(["run", "mcq", "--model", f"vertex/{model}", "--data", str(cloud.data), "--base-url",
                     cloud.sim.url, "--limit", "1", "--out", str(tmp_path / "other"), "--cache-dir",
                     str(tmp_path / "cache"), "--no-progress"], env=cloud.env(GOOGLE_CLOUD_PROJECT="other-project"),
                    cwd=tmp_path)
    assert other.returncode == 0, other.stderr[-2000:]
    assert len(cloud.asked(model)) == N + 1 and "accuracy" in other.stdout
    printed = capsys.readouterr()
    shown = other.stdout + other.stderr + printed.out + printed.err + json.dumps(first.messages)
    secrets = [*_key_secrets(cloud.account), *cloud.tokens]
    assert cloud.tokens and _files_with(tmp_path, secrets) == [] and _files_with(cloud.root, secrets) == []
    assert not [s for s in secrets if s in shown]


@pytest.mark.parametrize("model", [GEMINI, CLAUDE])
def test_faults_and_throttling_on_vertex_are_retried_until_all_are_answered(stormy, model, tmp_path):
    res = stormy.run(model, tmp_path / "run", no_cache=True, max_attempts=12)
    assert res.exit_code == 0, res.messages
    assert res.summary["metrics"]["accuracy"] == 100.0 and len(res.records) == N
    counts = stormy.sim.counters.snapshot()
    assert counts["faults"]["429"] >= 1 and counts["faults"]["503"] >= 1  # met, and retried
    assert counts["rate_limited"] >= 1 and counts["errors_5xx"] >= 1
    assert res.summary["throughput"]["rate_limited"] >= 1  # read as a rate limit: what adaptive limits learn from
    assert _files_with(tmp_path, [*_key_secrets(stormy.account), *stormy.tokens]) == []


def test_missing_settings_are_one_line_naming_the_variable(cloud, tmp_path):
    for unset, named in (("GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_PROJECT is not set"),
                         ("GOOGLE_CLOUD_LOCATION", "GOOGLE_CLOUD_LOCATION is not set")):
        with pytest.raises(EvalkitError, match=named):
            cloud.run(GEMINI, tmp_path / unset, env=cloud.env(**{unset: None}))
    with pytest.raises(EvalkitError, match="GOOGLE_APPLICATION_CREDENTIALS .*no-such.json"):
        cloud.run(GEMINI, tmp_path / "nofile", env=cloud.env(tmp_path / "no-such.json"))
    assert not (tmp_path / "nofile").exists()


def test_a_refused_key_or_a_missing_role_or_model_stops_before_anything_is_asked(cloud, tmp_path):
    before, claude_before = len(cloud.asked(GEMINI)), len(cloud.asked(CLAUDE))
    (tmp_path / "keys").mkdir()
    outsider = cloud.outsider.key_file(tmp_path / "keys" / "outsider.json", cloud.sim.url + "/token", PROJECT)
    with pytest.raises(EvalkitError, match="credentials were refused.*Invalid JWT"):
        cloud.run(GEMINI, tmp_path / "outsider", env=cloud.env(outsider), no_cache=True)
    denied = cloud.denied.key_file(tmp_path / "keys" / "denied.json", cloud.sim.url + "/token", PROJECT)
    with pytest.raises(EvalkitError, match="HTTP 403: PERMISSION_DENIED on project sim-project.*roles/aiplatform.user"):
        cloud.run(CLAUDE, tmp_path / "denied", env=cloud.env(denied), no_cache=True)
    assert len(cloud.asked(GEMINI)) == before and len(cloud.asked(CLAUDE)) == claude_before
    secrets = [*_key_secrets(cloud.outsider), *_key_secrets(cloud.denied)]
    assert _files_with(tmp_path, secrets) == []


def test_the_thinking_switch_reaches_gemini_and_claude_on_vertex(cloud, tmp_path):
    for model in (GEMINI, CLAUDE):
        res = cloud.run(model, tmp_path / model, thinking_budget=2048, limit=2, no_cache=True)
        assert res.exit_code == 0, res.messages
        sent = res.summary["config"]["generation"]
        assert sent.get("thinking_budget") == 2048 or sent.get("thinking") == {"type": "enabled", "budget_tokens": 2048}
    with pytest.raises(EvalkitError, match="needs at least 1024 tokens"):
        cloud.run(CLAUDE, tmp_path / "small", thinking_budget=500)


@pytest.mark.parametrize("model", [GEMINI, CLAUDE])
def test_a_server_echoing_the_bearer_token_gets_it_masked_everywhere(cloud, model, tmp_path, capsys):
    res = cloud.run(model, tmp_path / "run", base_url=f"{cloud.sim.url}/hostile/echo-key", limit=2, no_cache=True)
    assert res.exit_code == 1 and {r.error for r in res.records} == {"permanent"}
    assert all("API key not valid" in r.error_message and "***" in r.error_message for r in res.records)
    printed = capsys.readouterr()
    secrets = cloud.tokens
    assert _files_with(tmp_path, secrets) == []
    assert not [s for s in secrets if s in printed.out + printed.err + " ".join(r.error_message for r in res.records)]


def test_a_safety_block_and_a_claude_refusal_are_refusals(tmp_path_factory):
    c = Cloud(tmp_path_factory.mktemp("refusing"), faults=SimFaults(rate=1.0, kinds=("refusal",)))
    try:
        for model in (GEMINI, CLAUDE):
            res = c.run(model, c.root / model, limit=2, no_cache=True)
            assert res.summary["error_kinds"] == {"refused": 2} and len(c.asked(model)) == 2  # never asked again
        messages = {r.error_message for r in res.records}
        assert messages == {"content refused (stop_reason refusal)"}
    finally:
        c.sim.close()


def test_a_model_the_project_may_not_use_stops_the_run_at_its_first_request(tmp_path_factory):
    """The lookup passes (a proxy without it here), the predict route answers 404 for a model not served:
    the first request, alone, stops the run (exit 2) and nothing else is sent."""
    c = Cloud(tmp_path_factory.mktemp("unserved"), strict=True)
    try:
        with pytest.raises(EvalkitError, match="does not serve model 'claude-sonnet-4-5@20250929'.*HTTP 404"):
            c.run(CLAUDE, c.root / "run", base_url=f"{c.sim.url}/hostile/echo-key:1000", no_cache=True)
        assert len([h for h in c.sim.heard if h.path.endswith(":rawPredict")]) == 1
    finally:
        c.sim.close()
