"""No import cycle inside hf_attention/ or training/.

Every import counts (module_graph.py builds the graph): top-level ones, those under `if TYPE_CHECKING:` and those
inside functions, relative and absolute. A cycle held apart only by a function-level or TYPE_CHECKING import still
means the two modules cannot be understood (or moved) one without the other.
"""

from module_graph import import_graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def a_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One closed path through `component`, to print: a → b → ... → a."""
    members, path, start = set(component), [component[0]], component[0]
    seen = {start}
    while True:
        following = sorted(graph[path[-1]] & members)
        step = start if start in following and len(path) > 1 else next((m for m in following if m not in seen), start)
        path.append(step)
        if step == start:
            return path
        seen.add(step)


def describe(graph, components) -> str:
    return "; ".join(" → ".join(a_cycle(graph, component)) for component in components)


def test_the_graph_sees_every_kind_of_import():
    graph = import_graph()
    assert "training.objective" in graph["training.run.losses"]  # top level, absolute
    assert "training.args" in graph["training.run.run_state"]  # under TYPE_CHECKING
    assert "hf_attention.conversion.to_hf" in graph["training.run.models"]  # inside a function
    assert "hf_attention.modeling.losses" in graph["hf_attention.modeling.modeling_hf_attention"]  # relative
    assert "training.objectives.translation" in graph["training.objectives"]  # `from package import module`


def test_training_has_no_import_cycle():
    graph = import_graph()
    found = [component for component in cycles(graph) if component[0].startswith("training")]
    assert not found, f"import cycles in training/: {describe(graph, found)}"


def test_hf_attention_has_no_import_cycle():
    graph = import_graph()
    found = [component for component in cycles(graph) if component[0].startswith("hf_attention")]
    assert not found, f"import cycles in hf_attention/: {describe(graph, found)}"
