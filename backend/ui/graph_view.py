"""View models of the Graph tab: the JobGraph as laid-out nodes and edges, and the
ExecutionGraph where every vertex expands into its subtasks.

The browser only lays the boxes out (dagre); what each box says, its size and
colour are decided here, so they can be tested without a browser.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from millstream.backend.ui.vertex_metrics import VertexFigures, subtask_figures, vertex_colour, vertex_figures

NODE_WIDTH = 250
EXEC_NODE_WIDTH = 330
_LINE = 18  # px per text line in a node box, kept in sync with .dag-node CSS
_FAILURE_LINES = 2  # a failed vertex's message, clamped to two lines by .node-failure CSS
FAILED_COLOUR = "hsl(354, 70%, 40%)"  # a failed vertex, whatever its last busy figure was


@dataclass(frozen=True)
class SubtaskBox:
    index: int
    state: str
    attempt: int
    taskmanager: str
    slot: int | None
    colour: str


@dataclass(frozen=True)
class GraphNode:
    id: str
    operators: tuple[str, ...]
    parallelism: int
    state: str
    figures: VertexFigures
    colour: str
    width: int
    height: int
    subtasks: tuple[SubtaskBox, ...] = ()
    failure: str | None = None  # why a failed vertex failed, one line (the full trace is on Exceptions)


@dataclass(frozen=True)
class GraphEdge:
    source: str
    target: str
    ship_strategy: str


@dataclass(frozen=True)
class GraphModel:
    view: str  # "job" | "execution" | "plan" (an uploaded program's graph, not running)
    nodes: tuple[GraphNode, ...]
    edges: tuple[GraphEdge, ...] = field(default_factory=tuple)

    def layout_json(self) -> dict[str, Any]:
        """What dagre needs: ids, sizes and edges (labels are rendered as HTML)."""
        return {
            "nodes": [{"id": n.id, "width": n.width, "height": n.height} for n in self.nodes],
            "edges": [{"source": e.source, "target": e.target, "label": e.ship_strategy} for e in self.edges],
        }


def _operator_names(job_graph: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Chained operator names per JobVertex id, head first, from the JobGraph JSON."""
    out = {}
    for v in job_graph.get("vertices", []):
        names = tuple(o.get("name", "?") for o in v.get("operators", []))
        out[v["id"]] = names or (v.get("name", "?"),)
    return out


def _edges(job_graph: Mapping[str, Any]) -> tuple[GraphEdge, ...]:
    return tuple(
        GraphEdge(e["source_vertex"], e["target_vertex"], str(e.get("ship_strategy", "")))
        for e in job_graph.get("edges", [])
    )


def graph_model(
    job_graph: Mapping[str, Any],
    vertices: Sequence[Mapping[str, Any]],
    live: bool,
    view: str = "job",
    failures: Mapping[str, str] | None = None,
) -> GraphModel:
    """``vertices`` is ``job_views.vertices_of(record)``; ``view`` picks the JobGraph
    ("job"), the ExecutionGraph ("execution") or the bare plan ("plan") drawing;
    ``failures`` holds a one-line message per failed vertex id (``failure_lines``)."""
    names = _operator_names(job_graph)
    nodes = []
    for v in vertices:
        ops = names.get(v["id"], (v["name"],))
        figures = vertex_figures(v, live)
        state = str(v.get("status", "CREATED"))
        failure = (failures or {}).get(v["id"]) if state == "FAILED" else None
        subtasks: tuple[SubtaskBox, ...] = ()
        if view == "execution":
            subtasks = tuple(_subtask_box(st, live) for st in v.get("subtasks", []))
            width, height = EXEC_NODE_WIDTH, 100 + _LINE * len(ops) + 38 * max(len(subtasks), 1)
        elif view == "plan":  # before submission: structure only, no figures
            width, height = NODE_WIDTH, 44 + _LINE * len(ops)
        else:
            width, height = NODE_WIDTH, 104 + _LINE * len(ops)
        if failure:
            height += _LINE * _FAILURE_LINES
        nodes.append(
            GraphNode(
                id=v["id"],
                operators=ops,
                parallelism=int(v.get("parallelism", 0)),
                state=state,
                figures=figures,
                colour=FAILED_COLOUR if state == "FAILED" else vertex_colour(figures.busy, figures.backpressured),
                width=width,
                height=height,
                subtasks=subtasks,
                failure=failure,
            )
        )
    return GraphModel(view=view, nodes=tuple(nodes), edges=_edges(job_graph))


def _subtask_box(st: Mapping[str, Any], live: bool) -> SubtaskBox:
    f = subtask_figures(st.get("metrics"))
    tm = st.get("taskmanager_id") or ""
    return SubtaskBox(
        index=int(st["subtask"]),
        state=str(st.get("status", "CREATED")),
        attempt=int(st.get("attempt", 0)),
        taskmanager=tm or "(unassigned)",
        slot=st.get("slot"),
        colour=vertex_colour(f.busy, f.backpressured) if live else vertex_colour(None, None),
    )


def failure_lines(exceptions: Sequence[Any]) -> dict[str, str]:
    """The newest failure's last line (``ValueError: boom``) per vertex id, from exception records
    newest first; what the graph shows on a failed vertex without opening its trace."""
    out: dict[str, str] = {}
    for e in exceptions:
        vid = getattr(e, "vertex_id", None)
        if vid and vid not in out:
            lines = [ln.strip() for ln in (getattr(e, "stacktrace", "") or "").strip().splitlines() if ln.strip()]
            out[vid] = lines[-1][:300] if lines else str(getattr(e, "exception_name", ""))
    return out
