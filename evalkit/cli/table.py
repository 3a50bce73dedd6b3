"""The `evalkit` commands, one line each: name → where its flags are added, where it runs.

Both halves are "module:function" strings, imported only when needed. `flags(subparsers)` adds the
command's parser; every command's is called when the parser is built (so `evalkit --help` lists them
all, and those modules import nothing heavy: tests/test_light_start.py). `run(args, console) -> int`
does the work and gives the exit code; it is imported only when that command runs.

A new command is one module holding both functions, and one line here. The order of the lines is the
order of `evalkit --help`. What depends on the command line itself (the flags of the benchmarks that
`run` names, `sim`'s many flags) is added by parser.py's `build_parser` after the table.
"""

from __future__ import annotations

from typing import NamedTuple


class Command(NamedTuple):
    flags: str  # "module:function" called with the subparsers: adds the command and its flags
    run: str  # "module:function" called with (args, console): does the work, returns the exit code


COMMANDS: dict[str, Command] = {
    "run": Command("evalkit.cli.parser:add_run_parser", "evalkit.cli.commands:cmd_run"),
    "report": Command("evalkit.cli.parser:add_report_parser", "evalkit.cli.commands:cmd_report"),
    "compare": Command("evalkit.cli.parser:add_compare_parser", "evalkit.cli.commands:cmd_compare"),
    "merge": Command("evalkit.cli.parser:add_merge_parser", "evalkit.cli.commands:cmd_merge"),
    "list": Command("evalkit.cli.parser:add_list_parser", "evalkit.cli.commands:cmd_list"),
    "cache": Command("evalkit.cli.parser:add_cache_parser", "evalkit.cli.commands:cmd_cache"),
    "batches": Command("evalkit.cli.parser:add_batches_parser", "evalkit.cli.commands:cmd_batches"),
    "sim": Command("evalkit.cli.parser:add_sim_parser", "evalkit.cli.commands:cmd_sim"),
    "derive": Command("evalkit.benchmarks.tdbench_derive:add_derive_parser",
                      "evalkit.benchmarks.tdbench_derive:cmd_derive"),
    "data": Command("evalkit.data.command:add_parser", "evalkit.cli.commands:cmd_data"),
    "lint": Command("evalkit.lint.command:add_lint_parser", "evalkit.lint.command:cmd_lint"),
    "view": Command("evalkit.view.command:add_view_parser", "evalkit.view.command:cmd_view"),
    "export": Command("evalkit.export.command:add_export_parser", "evalkit.export.command:cmd_export"),
    "translate": Command("evalkit.benchmarks.genvip_command:add_translate_parser",
                         "evalkit.benchmarks.genvip_command:cmd_translate"),
    "plan": Command("evalkit.multi.plan_command:add_plan_parser", "evalkit.multi.plan_command:cmd_plan"),
    "demo": Command("evalkit.cli.parser:add_demo_parser", "evalkit.cli.commands:cmd_demo"),
}

