"""No import cycles among evalkit's modules, counting every import: module level, inside
functions and under TYPE_CHECKING (grimp sees them all).

`lint-imports` (pyproject.toml, run by .ci/run) keeps the layers and forbids cycles between
siblings; this also catches what that check cannot see, such as a package's __init__ and one
of its own modules importing each other, or a module importing the top-level `evalkit`.
"""

from __future__ import annotations

import pytest

grimp = pytest.importorskip("grimp")


def strongly_connected(adjacency: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the components with more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(adjacency):
        if root in index:
            continue
        work = [(root, iter(sorted(adjacency[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(adjacency[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_strongly_connected_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert strongly_connected(graph) == [["a", "b", "c"]]


def test_no_import_cycles():
    graph = grimp.build_graph("evalkit", include_external_packages=False)
    adjacency = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    cycles = strongly_connected(adjacency)
    lines = []
    for component in cycles:
        members = set(component)
        lines.append(" <-> ".join(component))
        for importer in component:
            for imported in sorted(adjacency[importer] & members):
                for detail in graph.get_import_details(importer=importer, imported=imported):
                    lines.append(f"    {importer}:{detail['line_number']}  {detail['line_contents']}")
    assert not cycles, "import cycles:\n" + "\n".join(lines)
