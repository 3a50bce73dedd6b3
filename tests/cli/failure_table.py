"""docs/failures.md, rendered from the tests that check each row (run this file to rewrite it).

Rows come from tests/cli/test_failure_paths.py (CASES), tests/cli/test_flag_bounds.py (BAD) and
tests/cli/test_server_death.py (ROWS); tests/cli/test_failure_table.py keeps the page in step with them.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOC = HERE.parents[1] / "docs" / "failures.md"
HEAD = """# Failures: what a user tried, what they read, the exit code

Generated from the tests that check each row (`python tests/cli/failure_table.py` rewrites this page;
`tests/cli/test_failure_table.py` fails when it is out of date). Every row runs the `evalkit` command in
a child process and asserts the exit code, the message (a fragment of it here) and that no traceback
is printed. Exit codes: 0 done; 1 incomplete, re-run the same command to resume; 2 cannot start or
continue until something is changed (bad input, usage, unreachable endpoint, environment); 130
interrupted (resumable).

| what was tried | exit | message (fragment) | test |
|---|---:|---|---|
"""


def rows() -> list[tuple[str, int, str, str]]:
    sys.path[:0] = [str(HERE), str(HERE.parent)]  # the tests beside this file, the helpers they import
    import test_failure_paths
    import test_flag_bounds
    import test_server_death

    out = [(c.tried, c.code, c.message, f"test_failure_paths[{c.id}]") for c in test_failure_paths.CASES]
    out += [(f"`{' '.join(flags)}`", 2, message, "test_flag_bounds") for flags, message in test_flag_bounds.BAD]
    out += [(tried, code, message, "test_server_death") for tried, code, message in test_server_death.ROWS]
    return out


def render() -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    return HEAD + "".join(f"| {cell(t)} | {code} | {cell(m)} | `{test}` |\n" for t, code, m, test in rows())


if __name__ == "__main__":
    DOC.write_text(render(), encoding="utf-8")
    print(f"wrote {DOC}")
