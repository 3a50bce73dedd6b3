"""A provider is one unit, and its record is the only place keyed on its name (issue 43, item 3).

Two halves. The package is read with `ast`: no rule outside the registry and a provider's own folder
(or module) tests a provider's name. And a fictitious OpenAI-shaped record, registered by a fixture
(`acme`), is all it takes for the per-provider behaviour tests to run for it, for its reasoning
switches to be refused or accepted as its record says, and for it to reuse OpenAI's image limits.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import test_hostile_replies
import test_preflight
import test_provider_records
import test_providers
import test_redirects_secrets
from sim_providers import Providers, plain_providers
from synthetic_data import make_mcq_jsonl

import evalkit
from evalkit.cli import main as cli_main
from evalkit.core.errors import EvalkitError, ProviderError
from evalkit.core.types import GenParams, Message
from evalkit.images.provider_limits import OPENAI_IMAGES, check_image_count
from evalkit.providers import create_provider, parse_spec
from evalkit.providers.reasoning import chat_fields, reasoning_problem
from evalkit.providers.registry import RECORDS, ProviderInfo, Reasoning, limits_for
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

PACKAGE = Path(evalkit.__file__).resolve().parent
REGISTRY = PACKAGE / "providers" / "registry.py"
SIM = PACKAGE / "sim"  # the simulator's dialects: wire formats with their own values, not providers' code
# Exceptions, each with its reason (paths relative to the package).
EXCEPTIONS = {
    "money/pricing.py": "the price table and its rules (Bedrock's inference-profile premium) are keyed by "
                        "price_key, a record field whose values are spelled as the providers' names",
}
LOOKUPS = ("get", "pop", "setdefault")  # d.get("openai"): a dict lookup by a literal name


def unit_of(record: ProviderInfo) -> Path:
    """A provider's own unit: the folder of its client module inside providers/ (vllm/ and
    openai-compatible/ live in openai/), or the module itself when it sits in providers/ directly."""
    module = PACKAGE.parent.joinpath(*record.client.partition(":")[0].split(".")).with_suffix(".py")
    return module if module.parent == PACKAGE / "providers" else module.parent


def allowed(path: Path, name: str) -> bool:
    """May `path` test provider `name` by its literal?"""
    if path == REGISTRY or path.is_relative_to(SIM) or str(path.relative_to(PACKAGE)) in EXCEPTIONS:
        return True
    unit = unit_of(RECORDS[name])
    return path == unit or path.is_relative_to(unit) and unit.is_dir()


def _names_in(node: ast.expr) -> Iterator[str]:
    """The provider names a literal operand spells: a string, or the members of a tuple, list, set or dict."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.Tuple | ast.List | ast.Set):
        for element in node.elts:
            yield from _names_in(element)
    elif isinstance(node, ast.Dict):
        for key in node.keys:
            if key is not None:
                yield from _names_in(key)


def _literal(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def name_tests(tree: ast.AST) -> Iterator[tuple[int, str, str]]:
    """(line, literal, what) for every comparison, membership test or lookup against a string literal."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                for literal in _names_in(operand):
                    yield node.lineno, literal, "comparison"
        elif isinstance(node, ast.Subscript) and (literal := _literal(node.slice)) is not None:
            yield node.lineno, literal, "subscript"
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in LOOKUPS
              and node.args and (literal := _literal(node.args[0])) is not None):
            yield node.lineno, literal, f".{node.func.attr}()"
        elif isinstance(node, ast.MatchValue) and (literal := _literal(node.value)) is not None:
            yield node.lineno, literal, "case"


@dataclass(frozen=True)
class Hit:
    path: str
    line: int
    name: str
    what: str

    def __str__(self) -> str:
        return f"evalkit/{self.path}:{self.line}: {self.what} against provider name {self.name!r}"


def hits() -> list[Hit]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, literal, what in name_tests(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if literal in RECORDS and not allowed(path, literal):
                found.append(Hit(str(path.relative_to(PACKAGE)), line, literal, what))
    return found


def test_no_rule_outside_a_providers_unit_tests_its_name():
    found = hits()
    assert not found, "read the record instead:\n" + "\n".join(map(str, found))


def test_the_check_sees_every_kind_of_name_test():
    """The parser itself: each form the rule forbids is found, and a table or a call that only passes a
    name along is not."""
    code = '''
if p == "openai" or "vllm" != p or p in ("azure", "x") or p not in {"google"}: pass
t = d["anthropic"], d.get("bedrock"), d.pop("vertex", None)
match p:
    case "openrouter": pass
table = {"openai": 1}
f("openai")
'''
    seen = sorted((literal, what) for _, literal, what in name_tests(ast.parse(code)))
    assert seen == [("anthropic", "subscript"), ("azure", "comparison"), ("bedrock", ".get()"),
                    ("google", "comparison"), ("openai", "comparison"), ("openrouter", "case"),
                    ("vertex", ".pop()"), ("vllm", "comparison"), ("x", "comparison")]
    assert unit_of(RECORDS["vllm"]) == unit_of(RECORDS["openai-compatible"]) == PACKAGE / "providers" / "openai"
    assert unit_of(RECORDS["openrouter"]) == PACKAGE / "providers" / "openrouter.py"


# ---- a fictitious OpenAI-shaped record: nothing but the record --------------------------------------------


def register_acme(monkeypatch: pytest.MonkeyPatch) -> ProviderInfo:
    """`acme/`, an OpenAI-shaped hosted service: the openai-compatible record under its own name, key and
    base-URL variables, with OpenAI's image limits, in the registry until `monkeypatch` undoes it."""
    record = replace(RECORDS["openai-compatible"], name="acme",
                     description="Acme's OpenAI-compatible API (ACME_API_KEY; ACME_BASE_URL optional)",
                     key_env=("ACME_API_KEY",), key_required=True, base_url_env="ACME_BASE_URL",
                     default_url="https://api.acme.example/v1", image_limits=OPENAI_IMAGES, price_key="acme",
                     self_hosted=False, services=False)
    monkeypatch.setitem(RECORDS, "acme", record)
    return record


@pytest.fixture
def acme(monkeypatch: pytest.MonkeyPatch) -> ProviderInfo:
    """The acme record, registered for the one test."""
    return register_acme(monkeypatch)


# The per-provider behaviour tests that run in this process: those parametrised over the registry's providers
# (tests/sim_providers.py). A test marked slow is left out: a whole run each (some in an `evalkit` child, where a
# fixture's record does not exist).
BEHAVIOUR = (test_providers, test_preflight, test_hostile_replies, test_redirects_secrets)


@dataclass(frozen=True)
class Case:
    """One behaviour test with one set of its other parameters, to run for a new record."""

    test: Callable[..., Any]
    params: tuple[tuple[str, Any], ...]
    rule: Callable[[ProviderInfo], bool]  # which records the test's parametrisation takes

    def __str__(self) -> str:
        return "-".join([self.test.__name__, *(str(v) for _, v in self.params)])


def _argnames(mark: pytest.Mark) -> list[str]:
    names = mark.args[0]
    return [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)


def _rows(mark: pytest.Mark) -> list[tuple[Any, ...]]:
    n = len(_argnames(mark))
    rows = [getattr(v, "values", v) for v in mark.args[1]]  # pytest.param(...) or a plain value
    return [tuple(r) if n > 1 else (r[0] if isinstance(r, tuple) and len(r) == 1 else r,) for r in rows]


def behaviour_cases() -> list[Case]:
    """Every case of BEHAVIOUR's tests parametrised by the registry, their other parameters expanded."""
    cases = []
    for module in BEHAVIOUR:
        for name, test in vars(module).items():
            marks = getattr(test, "pytestmark", []) if name.startswith("test_") else []
            by_registry = [m for m in marks if m.name == "parametrize" and _argnames(m) == ["provider"]
                           and isinstance(m.args[1], Providers)]
            if not by_registry or any(m.name == "slow" for m in marks):
                continue
            others = [m for m in marks if m.name == "parametrize" and m not in by_registry]
            for rows in itertools.product(*(_rows(m) for m in others)):
                params = tuple(kv for m, row in zip(others, rows, strict=True)
                               for kv in zip(_argnames(m), row, strict=True))
                cases.append(Case(test, params, by_registry[0].args[1].rule))
    return cases


CASES = behaviour_cases()


def test_the_behaviour_tests_are_found():
    """The cases below are the real tests: the main ones of each module are among them."""
    found = {case.test.__name__ for case in CASES}
    assert {"test_faults_every_query_answered_exactly_once", "test_missing_key_is_a_one_line_error_before_anything_"
            "is_written", "test_one_and_two_images_arrive_in_order", "test_each_provider_reaches_the_simulator_and_"
            "knows_it", "test_every_hostile_reply_is_classified_by_every_provider",
            "test_every_provider_masks_an_echoed_key_in_every_form"} <= found
    assert len(CASES) >= 12


@pytest.mark.parametrize("case", CASES, ids=str)
def test_the_per_provider_behaviour_tests_run_for_a_new_record(acme, case, request, tmp_path):
    """The same test function, unedited, for `acme` against the simulator: the registry's parametrisation
    takes the record, and the test reads everything else (key, base URL, wire) from it."""
    assert case.rule(acme) and "acme" in plain_providers()
    kwargs: dict[str, Any] = dict(case.params)
    for name in inspect.signature(case.test).parameters:
        if name == "provider":
            kwargs[name] = "acme"
        elif name == "tmp_path":
            kwargs[name] = tmp_path
        elif name not in kwargs:
            kwargs[name] = request.getfixturevalue(name)
    outcome = case.test(**kwargs)
    if inspect.iscoroutine(outcome):
        asyncio.run(outcome)


def test_acme_passes_the_record_checks(acme):
    """The checks every record passes, for acme: OpenAI's image limits reused, named acme's (0.3 failed here
    with `assert 'openai' == 'acme'`)."""
    test_provider_records.test_every_record_fills_every_required_field("acme")
    test_provider_records.test_clients_are_named_not_imported("acme")
    test_provider_records.test_evalkit_list_prints_the_records()


def test_acme_reuses_openais_image_limits(acme, tmp_path):
    lim = limits_for("acme", "any-model")
    assert lim is not None and lim.name == "acme" and replace(lim, name="") == replace(OPENAI_IMAGES, name="")
    assert limits_for("openai").name == "openai"  # OpenAI's own record still names them OpenAI's
    with pytest.raises(EvalkitError, match=r"^q1: 501 images in one request; acme accepts at most 500 "):
        check_image_count(lim, 501, "q1")
    data = make_mcq_jsonl(tmp_path / "ds", 1, image_size=3000)  # above OpenAI's 2048 px working size
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        res = evalkit.run("mcq", "acme/sim-model", data=str(data), base_url=sim.url + "/v1",
                          env={"ACME_API_KEY": "acme-key"}, out=str(tmp_path / "run"), no_cache=True, progress=False,
                          plots=False)
    assert res.exit_code == 0 and res.records[0].correct and res.records[0].image_sizes == [[2048, 2048]]


# ---- the reasoning switch, as the record says --------------------------------------------------------


def _refused(capsys: pytest.CaptureFixture[str], tmp_path: Path, model: str, *flags: str) -> str:
    """The one line `evalkit run` and `evalkit.run()` both refuse the flags with, nothing written."""
    data = make_mcq_jsonl(tmp_path / "ds", 2)
    out = tmp_path / "run"
    code = cli_main(["run", "mcq", "--model", model, "--data", str(data), "--out", str(out), "--no-progress", *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("evalkit: error: "), err
    options = {flags[0].removeprefix("--").replace("-", "_"): int(flags[1]) if flags[1].isdigit() else flags[1]}
    with pytest.raises(EvalkitError) as refused:
        evalkit.run("mcq", model, data=str(data), out=str(out), env={}, **options)
    assert err == f"evalkit: error: {refused.value}" and not out.exists()
    return str(refused.value)


def test_acme_refuses_a_thinking_budget_as_its_record_says(acme, capsys, tmp_path):
    """acme speaks a chat template's on/off (the record it copies): a budget is refused in one line, by the
    command and by the Python API alike, before anything is written, and by its client if handed one."""
    assert not acme.reasoning.takes_budget()
    line = _refused(capsys, tmp_path, "acme/m", "--thinking-budget", "2048")
    assert line == f"--thinking-budget: acme/ {acme.reasoning.no_budget}"
    client = create_provider(parse_spec("acme/m", ["http://127.0.0.1:9/v1"]), {"ACME_API_KEY": "k"})
    with pytest.raises(ProviderError, match="--thinking-budget: acme/"):
        client.body([Message.user("hi")], GenParams(thinking_budget=5), [])
    body = client.body([Message.user("hi")], GenParams(reasoning_effort="high"), [])
    assert body["chat_template_kwargs"] == {"enable_thinking": True}  # the effort goes as the record says


def test_an_openai_shaped_record_refuses_what_openai_refuses(acme, monkeypatch, capsys, tmp_path):
    """A record with OpenAI's switch (reasoning_effort, no budget) refuses a budget with OpenAI's reason,
    and sends the effort in OpenAI's field: the rule is the record's, not the name's."""
    monkeypatch.setitem(RECORDS, "acme", replace(acme, reasoning=RECORDS["azure"].reasoning))
    line = _refused(capsys, tmp_path, "acme/m", "--thinking-budget", "1024")
    assert line == "--thinking-budget: acme/ takes no thinking budget; use --reasoning-effort low|medium|high"
    assert chat_fields("acme", "m", GenParams(reasoning_effort="low")) == {"reasoning_effort": "low"}


def test_a_record_that_takes_a_budget_sends_it(acme, monkeypatch):
    """Accepted where the record says so, and then sent, not dropped: a router's field carries it."""
    monkeypatch.setitem(RECORDS, "acme", replace(acme, reasoning=Reasoning("reasoning.max_tokens", "router")))
    assert reasoning_problem("acme", "m", None, 2048) is None
    client = create_provider(parse_spec("acme/m", ["http://127.0.0.1:9/v1"]), {"ACME_API_KEY": "k"})
    body = client.body([Message.user("hi")], GenParams(thinking_budget=2048), [])
    assert body["reasoning"] == {"max_tokens": 2048}


def test_a_record_cannot_drop_a_budget_silently(acme, monkeypatch):
    """A switch with no budget field must say why a budget is refused (the record check names the field),
    and a chat-completions record claiming a switch its requests cannot carry is refused, not dropped."""
    silent = replace(acme, reasoning=Reasoning("reasoning_effort", "effort"))
    assert silent.missing() == ["reasoning.no_budget (effort has no budget: say why one is refused)"]
    assert replace(acme, reasoning=Reasoning("x", "telepathy")).missing()[0].startswith("reasoning.sends (not one of")
    monkeypatch.setitem(RECORDS, "acme", replace(acme, reasoning=Reasoning("thinking.budget_tokens", "budget")))
    with pytest.raises(ProviderError, match="not one a chat completions request carries"):
        chat_fields("acme", "m", GenParams(thinking_budget=2048))


def test_registering_acme_does_not_leak():
    before = dict(RECORDS)
    with pytest.MonkeyPatch.context() as monkeypatch:
        register_acme(monkeypatch)
        assert "acme" in plain_providers() and parse_spec("acme/m").base_urls == ()
    assert before == RECORDS and "acme" not in plain_providers()
    with pytest.raises(EvalkitError, match="unknown provider 'acme'"):
        parse_spec("acme/m")
